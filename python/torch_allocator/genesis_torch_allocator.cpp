// libgenesis_torch_allocator.so: the library that PyTorch loads as a
// pluggable CUDA allocator,
//   torch.cuda.memory.CUDAPluggableAllocator(path, "genesis_torch_malloc", "genesis_torch_free")
// A shim without an allocator of its own: every call goes to the Genesis of
// the Python extension genesis._C (Note [One allocator behind PyTorch] in
// genesis/interop/torch_abi.h); how PyTorch's calls map onto Genesis is Note
// [Genesis behind PyTorch] in python/src/py_torch_backend.cpp.
//
// Exported (C linkage; nothing else is visible):
//   genesis_torch_malloc / genesis_torch_free            the allocator of change_current_allocator:
//                                                        OOM throws (Note [Errors into PyTorch])
//   genesis_torch_pool_malloc / genesis_torch_pool_free  for torch.cuda.MemPool(allocator=...):
//                                                        OOM returns NULL, frees wait for the device
//   genesis_torch_record_stream                          for set_record_stream_fn
//   genesis_torch_empty_cache                            for set_reset_fn (torch.cuda.empty_cache)
//   genesis_torch_set_memory_fraction                    for set_memory_fraction_fn
//   genesis_torch_begin_allocate_to_pool                 for set_begin_allocate_to_pool,
//   genesis_torch_end_allocate_to_pool                   set_end_allocate_to_pool_fn and
//   genesis_torch_release_pool                           set_release_pool: CUDA graph private pools
//                                                        (Note [Private pools behind PyTorch])
//   genesis_torch_refuse_private_pools                   for set_begin_allocate_to_pool where PyTorch
//                                                        lacks the other two hooks: a clear error
//   genesis_torch_attach, genesis_torch_last_error       for genesis.torch (ctypes)
//
// It needs neither CUDA nor Python to load: a stream is an opaque pointer
// here, and Genesis is found at run time.
#include <dirent.h>
#include <dlfcn.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

#include "genesis/interop/torch_abi.h"

#if defined(GENESIS_TORCH_WITH_CUDA_HEADERS)
#include <cuda_runtime_api.h>
#else
typedef struct CUstream_st* cudaStream_t;  // as the CUDA headers declare it
#endif

#define GENESIS_TORCH_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

std::atomic<const GenesisTorchBackend*> attached{nullptr};
std::mutex attach_mutex;
thread_local std::string shim_error;  // this library's own errors (no backend)

bool usable(const GenesisTorchBackend* t, std::string& why) {
  if (t == nullptr) {
    why = "genesis._C returned no backend table";
    return false;
  }
  if (t->abi_version != GENESIS_TORCH_ABI_VERSION || t->size < sizeof(GenesisTorchBackend)) {
    why = "genesis._C speaks version " + std::to_string(t->abi_version) + " of the PyTorch adaptor and this library " +
          std::to_string(GENESIS_TORCH_ABI_VERSION) + ": use the library built with that genesis._C";
    return false;
  }
  return true;
}

std::string own_directory() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&usable), &info) == 0 || info.dli_fname == nullptr) return ".";
  std::string path = info.dli_fname;
  const std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// The genesis/_C*.so next to this library. dlopen of a module Python has
// already imported returns that module; otherwise it is loaded here and
// Python's later import finds it loaded (the same file).
const GenesisTorchBackend* find_sibling(std::string& why) {
  const std::string dir = own_directory();
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    why = "cannot list " + dir;
    return nullptr;
  }
  why = "no genesis/_C*.so next to this library (in " + dir + ")";
  const GenesisTorchBackend* found = nullptr;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() < 5 || name.compare(0, 2, "_C") != 0 || name.compare(name.size() - 3, 3, ".so") != 0) continue;
    const std::string path = dir + "/" + name;
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      const char* err = dlerror();
      why = "cannot load " + path + ": " + (err != nullptr ? err : "unknown error");
      continue;
    }
    auto fn = reinterpret_cast<GenesisTorchBackendFn>(dlsym(h, "genesis_torch_backend"));
    if (fn == nullptr) {
      why = path + " has no genesis_torch_backend (an older genesis._C?)";
      continue;
    }
    const GenesisTorchBackend* t = fn();
    if (usable(t, why)) {
      found = t;
      break;
    }
  }
  closedir(d);
  return found;
}

const GenesisTorchBackend& backend() {
  if (const GenesisTorchBackend* b = attached.load(std::memory_order_acquire)) return *b;
  std::lock_guard<std::mutex> lock(attach_mutex);
  if (const GenesisTorchBackend* b = attached.load(std::memory_order_acquire)) return *b;
  std::string why;
  const GenesisTorchBackend* b = find_sibling(why);
  if (b == nullptr) {
    shim_error = "Genesis is not loaded (" + why + ")";
    throw std::runtime_error("libgenesis_torch_allocator.so: Genesis is not loaded (" + why +
                             "). Call genesis.torch.use_genesis_allocator() or genesis.torch.mem_pool(), which "
                             "attach it, or keep this library next to genesis/_C*.so");
  }
  attached.store(b, std::memory_order_release);
  return *b;
}

// free never throws (Note [Errors into PyTorch]).
void free_or_report(void* ptr, ssize_t size, int device, cudaStream_t stream, std::uint32_t flags) noexcept {
  shim_error.clear();
  try {
    backend().free(ptr, size, device, stream, flags);
  } catch (const std::exception& e) {
    shim_error = e.what();
    std::fprintf(stderr, "genesis: cannot free %p on cuda:%d: %s\n", ptr, device, e.what());
  } catch (...) {
    shim_error = "unknown error";
  }
}

}  // namespace

GENESIS_TORCH_EXPORT void* genesis_torch_malloc(ssize_t size, int device, cudaStream_t stream) {
  shim_error.clear();
  return backend().malloc(size, device, stream, GENESIS_TORCH_THROW_ON_OOM);
}

GENESIS_TORCH_EXPORT void genesis_torch_free(void* ptr, ssize_t size, int device, cudaStream_t stream) {
  free_or_report(ptr, size, device, stream, 0);
}

GENESIS_TORCH_EXPORT void* genesis_torch_pool_malloc(ssize_t size, int device, cudaStream_t stream) {
  shim_error.clear();
  return backend().malloc(size, device, stream, GENESIS_TORCH_POOL);
}

GENESIS_TORCH_EXPORT void genesis_torch_pool_free(void* ptr, ssize_t size, int device, cudaStream_t stream) {
  free_or_report(ptr, size, device, stream, GENESIS_TORCH_POOL);
}

GENESIS_TORCH_EXPORT void genesis_torch_record_stream(void* ptr, cudaStream_t stream) {
  shim_error.clear();
  backend().record_stream(ptr, stream);
}

GENESIS_TORCH_EXPORT void genesis_torch_empty_cache(void) {
  shim_error.clear();
  backend().empty_cache();
}

GENESIS_TORCH_EXPORT void genesis_torch_set_memory_fraction(double fraction, int device) {
  shim_error.clear();
  backend().set_memory_fraction(fraction, device);
}

// PyTorch's types of these hooks are
//   void(int, c10::cuda::MempoolId_t, std::function<bool(cudaStream_t)>)
//   void(int, c10::cuda::MempoolId_t)
// with MempoolId_t = std::pair<unsigned long long, unsigned long long>:
// declared with the same standard types, so that the calls match the ABI.
// They begin and end a CUDA graph capture or a use_mem_pool region, and
// release its pool when the graph goes (Note [Private pools behind
// PyTorch] in python/src/py_torch_backend.cpp). PyTorch's route (which
// streams the region covers) is a C++ object: this library keeps a copy
// for as long as the region is open and hands Genesis a plain function.
using PoolId = std::pair<unsigned long long, unsigned long long>;
using PoolRoute = std::function<bool(cudaStream_t)>;

int call_route(void* stream, void* ctx) {
  try {
    return (*static_cast<PoolRoute*>(ctx))(static_cast<cudaStream_t>(stream)) ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

GENESIS_TORCH_EXPORT void genesis_torch_begin_allocate_to_pool(int device, PoolId pool, PoolRoute route) {
  shim_error.clear();
  auto* kept = new PoolRoute(std::move(route));
  try {
    backend().begin_pool(device, pool.first, pool.second, &call_route, kept);
  } catch (...) {
    delete kept;
    throw;
  }
}

GENESIS_TORCH_EXPORT void genesis_torch_end_allocate_to_pool(int device, PoolId pool) {
  shim_error.clear();
  delete static_cast<PoolRoute*>(backend().end_pool(device, pool.first, pool.second));
}

GENESIS_TORCH_EXPORT void genesis_torch_release_pool(int device, PoolId pool) {
  shim_error.clear();
  backend().release_pool(device, pool.first, pool.second);
}

// For a PyTorch whose pluggable allocator takes a begin hook but not the end
// and release ones: a region that could never end is refused before it starts.
GENESIS_TORCH_EXPORT void genesis_torch_refuse_private_pools(int device, PoolId, PoolRoute) {
  throw std::runtime_error(
      "Genesis allocator (cuda:" + std::to_string(device) +
      "): CUDA graph capture and torch.cuda.use_mem_pool need private memory pools, and this PyTorch's "
      "pluggable allocator cannot tell Genesis when a capture ends. Use genesis.torch.mem_pool() with PyTorch's "
      "own allocator instead, or capture without Genesis");
}

// 0 on success; otherwise genesis_torch_last_error() says why. Attaching the
// table that is attached already is a success; another one is refused: the
// pointers handed out so far belong to the first.
GENESIS_TORCH_EXPORT int genesis_torch_attach(const GenesisTorchBackend* table) {
  std::string why;
  if (!usable(table, why)) {
    shim_error = why;
    return 1;
  }
  std::lock_guard<std::mutex> lock(attach_mutex);
  const GenesisTorchBackend* now = attached.load(std::memory_order_acquire);
  if (now != nullptr && now != table) {
    shim_error = "libgenesis_torch_allocator.so is already attached to another copy of genesis._C in this process";
    return 2;
  }
  attached.store(table, std::memory_order_release);
  shim_error.clear();
  return 0;
}

// This thread's last error: the shim's own, else the backend's.
GENESIS_TORCH_EXPORT const char* genesis_torch_last_error(void) {
  if (!shim_error.empty()) return shim_error.c_str();
  const GenesisTorchBackend* b = attached.load(std::memory_order_acquire);
  return b != nullptr ? b->last_error() : "";
}
