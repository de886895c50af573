// The Genesis side of PyTorch's pluggable CUDA allocator: the table
// libgenesis_torch_allocator.so calls through (genesis/interop/torch_abi.h,
// Note [One allocator behind PyTorch]), exported from genesis._C.
//
// Note [Genesis behind PyTorch]: how PyTorch's calls map onto Genesis.
// torch.cuda.memory.CUDAPluggableAllocator wraps two C functions:
//   malloc(size, device, stream): PyTorch passes the current device and its
//     current stream; the allocation is made for that stream, as PyTorch's
//     own allocator does (CachingAllocator::allocate(size, stream)).
//   free(ptr, size, device, stream): PyTorch keeps (size, device, stream) of
//     every pointer its malloc returned and passes them back, so `stream` is
//     the stream of the allocation, not the one current at the free. Genesis
//     knows the block's stream itself; the free makes the block reusable at
//     once on that stream (its work is ordered before any later use there)
//     and on other streams only after the work recorded on them completes.
// PyTorch forwards tensor.record_stream(s) to a pluggable allocator only if
// one was set with set_record_stream_fn (the Python binding of
// CUDAPluggableAllocator has it; genesis.torch sets it): it becomes
// CachingAllocator::record_stream, so a block freed while another stream
// still uses it is not handed out before that stream's work is done, exactly
// PyTorch's own guarantee. Without that hook a record_stream is silently
// dropped and the program must synchronise the streams itself, as with any
// allocator that ignores record_stream; genesis.torch warns when the hook is
// missing. What PyTorch never tells a pluggable allocator: the statistics
// and snapshot calls (torch.cuda.memory_stats, memory_snapshot,
// _record_memory_history raise for a pluggable allocator, which is why
// genesis.torch answers them itself: Note [torch.cuda's memory functions
// behind Genesis] in genesis/torch/_torch_api.py), cacheInfo (cuDNN's
// benchmark mode asks for it and gets an error), and CUDA graph private
// pools (set_begin_allocate_to_pool: genesis.torch makes that a clear error).
//
// A torch.cuda.MemPool(allocator=...) is different: PyTorch's own caching
// allocator stays in charge and calls the pluggable allocator for whole
// segments (2 MiB, 20 MiB, ...), with the stream current at that moment,
// which may not be the stream its blocks are used on, and releases them the
// way it calls cudaFree: expecting the call to wait for the device. The pool
// entry points (GENESIS_TORCH_POOL) synchronise the device before the free,
// so that the memory is never handed out while the pool's work still runs.
//
// Note [Errors into PyTorch]: what PyTorch does with a failed call.
// CUDAPluggableAllocator::malloc does not look at the pointer it gets: a NULL
// becomes a tensor without memory, which the next kernel turns into an
// illegal address (and a context that is lost). A C++ exception thrown by the
// pluggable function, on the other hand, propagates through PyTorch's
// allocator and reaches Python as RuntimeError with the exception's text
// (PyTorch translates every std::exception it does not know this way; only
// its own c10::OutOfMemoryError becomes torch.OutOfMemoryError, and that
// type lives in libc10, which the shim cannot link). So the allocator of
// change_current_allocator throws on OOM (GENESIS_TORCH_THROW_ON_OOM), with a
// message that starts like PyTorch's ("CUDA out of memory. ") and carries
// Genesis's explanation; genesis.torch.oom_as_torch_error() turns it into a
// torch.OutOfMemoryError for code that catches that type. Inside a MemPool
// the opposite holds: PyTorch's caching allocator treats NULL as
// cudaErrorMemoryAllocation, frees its own cache, retries and raises
// torch.OutOfMemoryError itself; the pool entry points return NULL and keep
// Genesis's explanation in last_error(), which genesis.torch appends to that
// error. Errors other than OOM (no CUDA driver, a bad device) always throw:
// there is nothing to retry. free never throws: PyTorch calls it from
// destructors, where an exception ends the process.
#include <pybind11/pybind11.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>

#include "py_bindings.h"
#include "genesis/core/error.h"
#include "genesis/cuda/runtime.h"
#include "genesis/interop/torch_abi.h"
#include "genesis/memory/alloc_conf.h"
#include "genesis/memory/device_allocators.h"
#include "genesis/memory/simulated_device.h"
#include "py_location.h"

namespace genesis::python {

namespace {

using memory::CachingAllocator;

constexpr int kMaxDevices = 1024;

// The allocator of each device, looked up once: cuda_allocator() validates
// the index and takes the registry's lock, which a malloc should not pay for.
// The process-wide allocators live until exit, so the pointers stay valid.
std::atomic<CachingAllocator*> device_allocators[kMaxDevices];

// Tests on machines without a GPU point every device at a simulated one.
// `redirect_owner` keeps the Python object alive while it is used (GIL).
std::atomic<CachingAllocator*> redirect{nullptr};
py::object* redirect_owner = nullptr;

thread_local std::string last_error;
// The thread's last out-of-memory explanation, kept until taken: the frees
// and retries that PyTorch makes after a NULL from a pool clear last_error
// before genesis.torch can read it (Note [Errors into PyTorch]).
thread_local std::string last_oom;
std::atomic<std::uint64_t> bad_frees{0};

CachingAllocator& allocator_of(int device) {
  if (CachingAllocator* r = redirect.load(std::memory_order_acquire)) return *r;
  GENESIS_CHECK(device >= 0 && device < kMaxDevices, "device index ", device, " is out of range");
  CachingAllocator* a = device_allocators[device].load(std::memory_order_acquire);
  if (a == nullptr) {
    // PyTorch's allocator: expandable segments unless the user chose
    // (Note [Front-end defaults] in alloc_conf_defaults.cpp).
    memory::prefer_framework_allocator_defaults(device, "the PyTorch adaptor");
    // Throws CudaError/InvalidArgumentError without a driver or device.
    a = &memory::cuda_allocator(device);
    device_allocators[device].store(a, std::memory_order_release);
  }
  return *a;
}

// Emulates cudaFree's wait for the device (GENESIS_TORCH_POOL).
void wait_for_device(int device, CachingAllocator& a) {
  if (redirect.load(std::memory_order_acquire) != nullptr) {
    if (auto* sim = dynamic_cast<memory::SimulatedDevice*>(&a.upstream())) sim->complete_all();
    return;
  }
  cuda::synchronize_device(device);
}

// When site capture is on (genesis.enable_memory_debugging,
// genesis.cuda.memory._record_memory_history) an allocation carries the
// Python stack of the thread that asked for it. PyTorch releases the GIL
// around its operators, so the thread usually does not hold it: as PyTorch's
// own recorder does, the site is taken with the GIL re-acquired, and only on
// threads that have Python frames (a thread state); PyTorch's C++ threads
// (autograd's backward) carry none. Off (the default): one relaxed load.
void open_python_site(std::optional<AllocationSite>& site) {
  if (!capture_locations() || Py_IsInitialized() == 0) return;
  if (PyGILState_Check() != 0) {
    site.emplace();
  } else if (PyGILState_GetThisThreadState() != nullptr) {
    const PyGILState_STATE g = PyGILState_Ensure();
    site.emplace();
    PyGILState_Release(g);
  }
}

void* backend_malloc(std::ptrdiff_t size, int device, void* stream, std::uint32_t flags) {
  last_error.clear();
  if (size == 0) return nullptr;
  try {
    GENESIS_CHECK(size > 0, "cannot allocate a negative number of bytes (", size, ")");
    CachingAllocator& a = allocator_of(device);
    std::optional<AllocationSite> site;
    open_python_site(site);
    return a.allocate(static_cast<std::size_t>(size), reinterpret_cast<memory::StreamId>(stream));
  } catch (const OutOfMemoryError& e) {
    last_error = e.message();
    last_oom = e.message();
    if ((flags & GENESIS_TORCH_THROW_ON_OOM) == 0) return nullptr;
    throw std::runtime_error(GENESIS_TORCH_OOM_PREFIX "Tried to allocate " +
                             genesis::detail::format_bytes(static_cast<unsigned long long>(size)) +
                             " on cuda:" + std::to_string(device) + " (Genesis allocator). " + e.message());
  } catch (const Error& e) {
    last_error = e.message();
    throw std::runtime_error("Genesis allocator (cuda:" + std::to_string(device) + "): " + e.message());
  } catch (const std::exception& e) {
    last_error = e.what();
    throw std::runtime_error(std::string("Genesis allocator (cuda:") + std::to_string(device) + "): " + e.what());
  }
}

void backend_free(void* ptr, std::ptrdiff_t, int device, void*, std::uint32_t flags) {
  last_error.clear();
  if (ptr == nullptr) return;
  try {
    CachingAllocator& a = allocator_of(device);
    if ((flags & GENESIS_TORCH_POOL) != 0) wait_for_device(device, a);
    a.deallocate(ptr);
  } catch (const std::exception& e) {
    const Error* ge = dynamic_cast<const Error*>(&e);
    last_error = ge != nullptr ? ge->message() : e.what();
    // Reported, not thrown (Note [Errors into PyTorch]); the first few in
    // full, then one line per thousand so that a loop cannot flood stderr.
    const std::uint64_t n = bad_frees.fetch_add(1, std::memory_order_relaxed) + 1;
    if (n <= 8 || n % 1000 == 0)
      std::fprintf(stderr, "genesis: PyTorch freed %p on cuda:%d, which Genesis cannot free (%llu so far): %s\n", ptr,
                   device, static_cast<unsigned long long>(n), last_error.c_str());
  } catch (...) {
    last_error = "unknown error";
  }
}

void backend_record_stream(void* ptr, void* stream) {
  last_error.clear();
  try {
    CachingAllocator* owner = redirect.load(std::memory_order_acquire);
    if (owner == nullptr) {
      for (auto& slot : device_allocators) {
        CachingAllocator* a = slot.load(std::memory_order_acquire);
        if (a != nullptr && a->owns(ptr)) {
          owner = a;
          break;
        }
      }
    }
    GENESIS_CHECK(owner != nullptr, "record_stream: ", ptr, " is not the start of a live Genesis GPU allocation");
    owner->record_stream(ptr, reinterpret_cast<memory::StreamId>(stream));
  } catch (const Error& e) {
    last_error = e.message();
    throw std::runtime_error("Genesis allocator: " + e.message());
  }
}

void backend_empty_cache() {
  last_error.clear();
  if (CachingAllocator* r = redirect.load(std::memory_order_acquire)) {
    r->empty_cache();
    return;
  }
  for (auto& slot : device_allocators)
    if (CachingAllocator* a = slot.load(std::memory_order_acquire)) a->empty_cache();
}

void backend_set_memory_fraction(double fraction, int device) {
  last_error.clear();
  try {
    GENESIS_CHECK(fraction > 0.0 && fraction <= 1.0, "memory fraction must be in (0, 1], got ", fraction);
    allocator_of(device).set_memory_fraction(fraction);
  } catch (const Error& e) {
    last_error = e.message();
    throw std::runtime_error("Genesis allocator: " + e.message());
  }
}

const char* backend_last_error() { return last_error.c_str(); }

const GenesisTorchBackend kBackend = {
    GENESIS_TORCH_ABI_VERSION,   sizeof(GenesisTorchBackend), &backend_malloc,     &backend_free,
    &backend_record_stream,      &backend_empty_cache,        &backend_set_memory_fraction,
    &backend_last_error,
};

}  // namespace

void bind_torch_backend(py::module_& m) {
  m.def("_torch_backend_address", [] { return reinterpret_cast<std::uintptr_t>(&kBackend); },
        "Address of the table libgenesis_torch_allocator.so calls through (genesis_torch_attach).");
  m.attr("_torch_abi_version") = GENESIS_TORCH_ABI_VERSION;
  m.attr("_torch_oom_prefix") = GENESIS_TORCH_OOM_PREFIX;
  m.def(
      "_torch_backend_redirect",
      [](py::object allocator) {
        if (allocator.is_none()) {
          redirect.store(nullptr, std::memory_order_release);
          delete redirect_owner;
          redirect_owner = nullptr;
          return;
        }
        CachingAllocator& a = allocator.cast<CachingAllocator&>();
        auto* keep = new py::object(allocator);
        redirect.store(&a, std::memory_order_release);
        delete redirect_owner;
        redirect_owner = keep;
      },
      py::arg("allocator"),
      "Tests without a GPU: every device of the PyTorch adaptor uses this genesis._C.Allocator (None: the GPUs).");
  m.def("_torch_last_error", [] { return last_error; },
        "This thread's last error of the PyTorch adaptor (\"\" after a success).");
  m.def(
      "_torch_take_last_oom",
      [] {
        std::string out;
        out.swap(last_oom);
        return out;
      },
      "This thread's last Genesis OOM explanation from the PyTorch adaptor (\"\" if none), forgotten once read.");
  m.def("_torch_bad_frees", [] { return bad_frees.load(std::memory_order_relaxed); },
        "Frees from PyTorch that Genesis refused (reported on stderr).");
  // The shim's exported functions are called by PyTorch, which catches C++
  // exceptions; called through ctypes an exception would end the process.
  // This calls one the way PyTorch does, for tests of that path.
  m.def(
      "_torch_call_malloc",
      [](std::uintptr_t fn, std::ptrdiff_t size, int device, std::uintptr_t stream) {
        using Malloc = void* (*)(std::ptrdiff_t, int, void*);
        auto* f = reinterpret_cast<Malloc>(fn);
        try {
          return reinterpret_cast<std::uintptr_t>(f(size, device, reinterpret_cast<void*>(stream)));
        } catch (const std::exception& e) {
          throw std::runtime_error(e.what());
        }
      },
      py::arg("fn"), py::arg("size"), py::arg("device"), py::arg("stream"));
  m.def(
      "_torch_call_void",
      [](std::uintptr_t fn, std::uintptr_t ptr, std::uintptr_t stream) {
        using RecordStream = void (*)(void*, void*);
        auto* f = reinterpret_cast<RecordStream>(fn);
        try {
          f(reinterpret_cast<void*>(ptr), reinterpret_cast<void*>(stream));
        } catch (const std::exception& e) {
          throw std::runtime_error(e.what());
        }
      },
      py::arg("fn"), py::arg("ptr"), py::arg("stream"),
      "Calls a record_stream-shaped function of the shim as PyTorch would (tests).");
}

}  // namespace genesis::python

// Note [One allocator behind PyTorch]: the shim finds the table by this name.
extern "C" __attribute__((visibility("default"))) const GenesisTorchBackend* genesis_torch_backend(void) {
  return &genesis::python::kBackend;
}
