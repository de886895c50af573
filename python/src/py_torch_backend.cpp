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
// benchmark mode asks for it and gets an error). CUDA graph private pools
// arrive through three more hooks (Note [Private pools behind PyTorch]).
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
#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "py_bindings.h"
#include "genesis/core/error.h"
#include "genesis/cuda/runtime.h"
#include "genesis/interop/torch_abi.h"
#include "genesis/memory/alloc_conf.h"
#include "genesis/memory/cuda_resource.h"
#include "genesis/memory/device_allocators.h"
#include "genesis/memory/simulated_device.h"
#include "py_convert.h"
#include "py_location.h"

struct CUstream_st;  // what cudaStream_t points to, opaque here

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

// Note [Private pools behind PyTorch]: a CUDA graph (torch.cuda.graph,
// torch.compile's mode="reduce-overhead", transformers' static-cache
// generation) replays the kernels of its capture on the addresses they were
// given then, those of temporaries freed during the capture included. So
// PyTorch's own allocator serves a capture from a private pool: between
// beginAllocateToPool and endAllocateToPool the allocations of the
// capturing stream come from memory that nothing outside the pool reuses and
// that stays reserved until the graph goes (releasePool). A pluggable
// allocator is given the same three calls, and Genesis gives each pool id a
// CachingAllocator of its own:
//   - classic segments (nothing is ever unmapped), no thread cache, no
//     lending across streams, no idle release, and no segment given back
//     before the pool goes, out of memory included (keep_segments: a
//     replay writes the capture's temporaries into blocks that are free
//     between replays): nothing that would give back, move or query memory
//     behind the graph's back, and no stream query, which a capturing
//     stream refuses;
//   - its calls run in the relaxed capture mode (cuda::RelaxedCaptureMode),
//     as PyTorch's allocator does: cudaMalloc during a capture is otherwise
//     an error;
//   - a block freed during the capture is reused by later allocations of
//     the same capture, which replay after it in the same order, as in
//     PyTorch; one that record_stream said another stream uses is held until
//     the capture ends (those uses are part of the graph), which is what
//     PyTorch's deferred events come to;
//   - empty_cache leaves pools alone; a pool is released when every
//     begin_pool of it has been matched by a release_pool (each graph
//     captured into it holds one until it is destroyed), and its segments
//     go back to the driver when its last block is freed (a graph's outputs
//     may outlive the graph).
// While no pool exists, routing costs malloc and free one relaxed load each
// (the lists themselves are read under pools_mutex, which orders them).
// A torch.cuda.use_mem_pool region would arrive through the same calls (a
// route that accepts the current thread), but PyTorch 2.11 cannot make a
// torch.cuda.MemPool while a pluggable allocator is current (it asks the
// allocator for createOrIncrefPool, which the pluggable one refuses), so
// the pools are CUDA graphs'. torch.compile's graph trees also check what a
// pool holds and checkpoint it after each recording, which genesis.torch
// answers from _torch_private_pool_blocks; restoring a checkpoint (a second
// path of graphs over one pool) re-creates blocks at their addresses
// (_torch_private_pool_restore, CachingAllocator::allocate_at; Note
// [Restoring a graph pool] in genesis/torch/_torch_api.py).
struct PrivatePool {
  int device = 0;
  std::uint64_t a = 0, b = 0;  // PyTorch's MempoolId_t
  std::unique_ptr<CachingAllocator> alloc;
  int open_routes = 0;  // begin_pool regions not yet ended
  // begin_pool calls not yet matched by release_pool (PyTorch's use count: a
  // graph holds one from its capture until it is destroyed, and
  // torch.compile's graph trees open and release further regions over the
  // same pool); released when it falls to zero.
  int uses = 0;
  bool released = false;
  std::size_t live = 0;     // blocks out, those held included
  std::vector<void*> held;  // freed in a capture while another stream used them
};

struct Route {
  int device;
  std::uint64_t a, b;
  int (*accepts)(void* stream, void* ctx);
  void* ctx;
  PrivatePool* pool;
};

struct PrivateBlock {
  PrivatePool* pool;
  bool other_streams;  // record_stream during a capture
};

// Made once and never destroyed: PyTorch frees tensors (graph outputs among
// them) while the process exits, after this file's statics would be gone, and
// a pool's allocator must not return its segments after CUDA has unloaded.
std::mutex& pools_mutex = *new std::mutex;
std::vector<std::unique_ptr<PrivatePool>>& pools = *new std::vector<std::unique_ptr<PrivatePool>>;  // one per graph pool
std::vector<Route>& routes = *new std::vector<Route>;
std::unordered_map<void*, PrivateBlock>& private_blocks = *new std::unordered_map<void*, PrivateBlock>;
std::atomic<int> open_route_count{0};
std::atomic<std::size_t> private_block_count{0};

bool redirected() { return redirect.load(std::memory_order_acquire) != nullptr; }

// The relaxed capture mode around calls into a pool's allocator (none on the
// simulated device of the tests, which never reaches CUDA).
struct RelaxedCapture {
  RelaxedCapture() {
    if (!redirected()) mode.emplace();
  }
  std::optional<cuda::RelaxedCaptureMode> mode;
};

std::unique_ptr<CachingAllocator> make_private_allocator(int device) {
  memory::AllocatorOptions o;
  o.expandable_segments = memory::AllocatorOptions::Expandable::kOff;
  o.thread_cache = false;
  o.stream_borrow = false;
  o.arenas = 1;
  o.idle_release_ms = 0;
  o.keep_segments = true;  // a graph replays into the pool's free blocks too
  std::shared_ptr<memory::UpstreamResource> up;
  if (CachingAllocator* r = redirect.load(std::memory_order_acquire)) {
    // Tests: a simulated device of its own, at addresses no other simulated
    // device of the test uses (a device's index places its address range).
    static int next_index = 0;
    const int index = memory::SimulatedDevice::kMaxIndex - (next_index++ % 8);
    up = std::make_shared<memory::SimulatedDevice>(r->upstream().mem_info().total_bytes, index);
  } else
    up = std::make_shared<memory::CudaDeviceResource>(device);
  return std::make_unique<CachingAllocator>(std::move(up), o);
}

// pools_mutex held.
PrivatePool* find_pool(int device, std::uint64_t a, std::uint64_t b) {
  for (auto& p : pools)
    if (p->device == device && p->a == a && p->b == b) return p.get();
  return nullptr;
}

// pools_mutex held: takes a released pool with nothing out of the list (its
// segments go back when the caller drops it, outside the lock).
std::unique_ptr<PrivatePool> take_if_done(PrivatePool* pool) {
  if (!pool->released || pool->live != 0 || pool->open_routes != 0) return nullptr;
  auto it = std::find_if(pools.begin(), pools.end(), [&](const auto& p) { return p.get() == pool; });
  std::unique_ptr<PrivatePool> out = std::move(*it);
  pools.erase(it);
  return out;
}

void drop_pool(std::unique_ptr<PrivatePool> pool) {
  if (pool == nullptr) return;
  RelaxedCapture relaxed;
  pool.reset();
}

// pools_mutex held: the block goes back to its pool.
void give_back_locked(PrivatePool* pool, void* ptr) {
  {
    RelaxedCapture relaxed;
    pool->alloc->deallocate(ptr);
  }
  --pool->live;
  private_block_count.fetch_sub(1, std::memory_order_relaxed);
}

// A block of the first open region whose route accepts `stream`; nullptr if
// none does. Throws OutOfMemoryError as CachingAllocator::allocate does.
void* private_malloc(std::size_t size, int device, void* stream) {
  std::lock_guard<std::mutex> lock(pools_mutex);
  for (const Route& r : routes) {
    if (r.device != device || r.accepts(stream, r.ctx) == 0) continue;
    void* p = nullptr;
    {
      RelaxedCapture relaxed;
      p = r.pool->alloc->allocate(size, reinterpret_cast<memory::StreamId>(stream));
    }
    private_blocks.emplace(p, PrivateBlock{r.pool, false});
    ++r.pool->live;
    private_block_count.fetch_add(1, std::memory_order_relaxed);
    return p;
  }
  return nullptr;
}

// Whether `ptr` was a private pool's block (then it is freed or held).
bool private_free(void* ptr) {
  std::unique_ptr<PrivatePool> done;
  {
    std::lock_guard<std::mutex> lock(pools_mutex);
    auto it = private_blocks.find(ptr);
    if (it == private_blocks.end()) return false;
    const PrivateBlock blk = it->second;
    private_blocks.erase(it);
    if (blk.other_streams && blk.pool->open_routes > 0) {
      blk.pool->held.push_back(ptr);
      return true;
    }
    give_back_locked(blk.pool, ptr);
    done = take_if_done(blk.pool);
  }
  drop_pool(std::move(done));
  return true;
}

// Whether `ptr` is a private pool's block (then its use on `stream` is noted).
bool private_record_stream(void* ptr, void* stream) {
  std::lock_guard<std::mutex> lock(pools_mutex);
  auto it = private_blocks.find(ptr);
  if (it == private_blocks.end()) return false;
  if (it->second.pool->open_routes > 0) {
    it->second.other_streams = true;  // events would be captured: held until the capture ends instead
  } else {
    RelaxedCapture relaxed;
    it->second.pool->alloc->record_stream(ptr, reinterpret_cast<memory::StreamId>(stream));
  }
  return true;
}

void* backend_malloc(std::ptrdiff_t size, int device, void* stream, std::uint32_t flags) {
  last_error.clear();
  if (size == 0) return nullptr;
  try {
    GENESIS_CHECK(size > 0, "cannot allocate a negative number of bytes (", size, ")");
    if (open_route_count.load(std::memory_order_relaxed) > 0) {
      if (void* p = private_malloc(static_cast<std::size_t>(size), device, stream)) return p;
    }
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
    if (private_block_count.load(std::memory_order_relaxed) > 0 && private_free(ptr)) return;
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
    if (private_block_count.load(std::memory_order_relaxed) > 0 && private_record_stream(ptr, stream)) return;
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

void backend_begin_pool(int device, std::uint64_t a, std::uint64_t b, int (*accepts)(void*, void*), void* ctx) {
  last_error.clear();
  try {
    GENESIS_CHECK(accepts != nullptr, "begin_pool: no route function");
    allocator_of(device);  // checks the device; the process-wide allocator comes first
    std::lock_guard<std::mutex> lock(pools_mutex);
    PrivatePool* pool = find_pool(device, a, b);
    if (pool == nullptr) {
      auto made = std::make_unique<PrivatePool>();
      made->device = device;
      made->a = a;
      made->b = b;
      made->alloc = make_private_allocator(device);
      pool = made.get();
      pools.push_back(std::move(made));
    }
    pool->released = false;
    ++pool->uses;
    ++pool->open_routes;
    routes.push_back(Route{device, a, b, accepts, ctx, pool});
    open_route_count.fetch_add(1, std::memory_order_relaxed);
  } catch (const Error& e) {
    last_error = e.message();
    throw std::runtime_error("Genesis allocator (cuda:" + std::to_string(device) + "): " + e.message());
  }
}

void* backend_end_pool(int device, std::uint64_t a, std::uint64_t b) {
  last_error.clear();
  std::lock_guard<std::mutex> lock(pools_mutex);
  auto it = std::find_if(routes.begin(), routes.end(),
                         [&](const Route& r) { return r.device == device && r.a == a && r.b == b; });
  if (it == routes.end()) return nullptr;
  void* ctx = it->ctx;
  PrivatePool* pool = it->pool;
  routes.erase(it);
  open_route_count.fetch_sub(1, std::memory_order_relaxed);
  if (--pool->open_routes == 0) {
    for (void* p : pool->held) give_back_locked(pool, p);
    pool->held.clear();
  }
  return ctx;
}

void backend_release_pool(int device, std::uint64_t a, std::uint64_t b) {
  last_error.clear();
  std::unique_ptr<PrivatePool> done;
  {
    std::lock_guard<std::mutex> lock(pools_mutex);
    PrivatePool* pool = find_pool(device, a, b);
    if (pool == nullptr) return;
    if (pool->uses > 0) --pool->uses;
    pool->released = pool->uses == 0;
    done = take_if_done(pool);
  }
  drop_pool(std::move(done));
}

const GenesisTorchBackend kBackend = {
    GENESIS_TORCH_ABI_VERSION,   sizeof(GenesisTorchBackend), &backend_malloc,     &backend_free,
    &backend_record_stream,      &backend_empty_cache,        &backend_set_memory_fraction,
    &backend_last_error,         &backend_begin_pool,         &backend_end_pool,
    &backend_release_pool,
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
  m.def(
      "_torch_private_pools",
      [](bool segments) {
        py::list out;
        std::lock_guard<std::mutex> lock(pools_mutex);
        for (const auto& p : pools) {
          py::dict d;
          d["device"] = p->device;
          d["id"] = py::make_tuple(p->a, p->b);
          d["open"] = p->open_routes;
          d["released"] = p->released;
          d["uses"] = p->uses;
          d["live_blocks"] = p->live;
          d["held_blocks"] = p->held.size();
          d["stats"] = stats_to_dict(p->alloc->stats());
          if (segments) {
            d["segments"] = snapshot_to_list(p->alloc->snapshot());
            d["allocations"] = allocations_to_list(p->alloc->large_allocations(0));
          }
          out.append(d);
        }
        return out;
      },
      py::arg("segments") = false,
      "The private pools of CUDA graph captures and use_mem_pool regions behind PyTorch (Note [Private pools "
      "behind PyTorch]): device, id, open regions, uses, released, blocks out and held, and the pool's "
      "statistics; with segments=True also its segments and live allocations (as genesis._C.Allocator.snapshot() "
      "and large_allocations(0) give them), what PyTorch's snapshot lists under segment_pool_id id.");
  m.def(
      "_torch_private_pool_blocks",
      [](int device, unsigned long long a, unsigned long long b) -> py::object {
        std::lock_guard<std::mutex> lock(pools_mutex);
        PrivatePool* pool = find_pool(device, a, b);
        if (pool == nullptr) return py::none();
        py::list out;
        for (const auto& [ptr, blk] : private_blocks) {
          if (blk.pool != pool) continue;
          const std::optional<memory::AllocationInfo> info = pool->alloc->allocation_info(ptr);
          if (info) out.append(py::make_tuple(reinterpret_cast<std::uintptr_t>(ptr), info->size, info->requested));
        }
        return out;
      },
      py::arg("device"), py::arg("a"), py::arg("b"),
      "The live blocks of private pool (a, b) of `device` as (address, size, requested) tuples (None: no such "
      "pool): what a checkpoint of the pool records.");
  m.def(
      "_torch_private_pool_restore",
      [](int device, unsigned long long a, unsigned long long b,
         const std::vector<std::tuple<std::uintptr_t, std::size_t, std::size_t>>& blocks) {
        // Note [Restoring a graph pool]: see genesis/torch/_torch_api.py.
        std::lock_guard<std::mutex> lock(pools_mutex);
        PrivatePool* pool = find_pool(device, a, b);
        GENESIS_CHECK(pool != nullptr, "restoring CUDA graph pool (", a, ", ", b, ") of cuda:", device,
                      ": Genesis holds no such pool (it was released, or never used)");
        GENESIS_CHECK(pool->open_routes == 0, "restoring CUDA graph pool (", a, ", ", b,
                      "): a capture or pool region is still allocating from it");
        std::unordered_map<void*, std::size_t> want;
        for (const auto& [addr, size, requested] : blocks) want.emplace(reinterpret_cast<void*>(addr), size);
        for (const auto& [ptr, blk] : private_blocks) {
          if (blk.pool != pool) continue;
          auto it = want.find(ptr);
          GENESIS_CHECK(it != want.end(), "restoring CUDA graph pool (", a, ", ", b, "): the block at ", ptr,
                        " is allocated now but not in the checkpoint; the tensors using it must be freed "
                        "(or passed as stale storages) first");
          const std::size_t now = pool->alloc->allocation_size(ptr);
          GENESIS_CHECK(now == it->second, "restoring CUDA graph pool (", a, ", ", b, "): the block at ", ptr, " is ",
                        now, " bytes now and ", it->second, " in the checkpoint");
        }
        std::vector<void*> made;
        try {
          RelaxedCapture relaxed;
          for (const auto& [addr, size, requested] : blocks) {
            void* ptr = reinterpret_cast<void*>(addr);
            if (private_blocks.count(ptr) != 0) continue;
            void* p = pool->alloc->allocate_at(ptr, size, requested);
            private_blocks.emplace(p, PrivateBlock{pool, false});
            ++pool->live;
            private_block_count.fetch_add(1, std::memory_order_relaxed);
            made.push_back(p);
          }
        } catch (...) {
          // All or nothing: the blocks made so far go back.
          for (void* p : made) {
            private_blocks.erase(p);
            give_back_locked(pool, p);
          }
          throw;
        }
        py::list out;
        for (void* p : made) out.append(reinterpret_cast<std::uintptr_t>(p));
        return out;
      },
      py::arg("device"), py::arg("a"), py::arg("b"), py::arg("blocks"),
      "Makes private pool (a, b) hold exactly `blocks` ((address, size, requested) tuples, as "
      "_torch_private_pool_blocks gave them), re-creating the missing ones at their addresses; every block "
      "allocated now must be one of them. Returns the addresses re-created. All or nothing.");
  m.def(
      "_torch_private_free",
      [](std::uintptr_t ptr) { return private_free(reinterpret_cast<void*>(ptr)); },
      py::arg("ptr"),
      "Frees `ptr` if it is a block of a private pool, without PyTorch (whose pluggable allocator does not know "
      "blocks a restore re-created); returns whether it was one.");
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
  // The pool hooks' types as PyTorch declares them (the shim's exports),
  // with the stream as the opaque pointer cudaStream_t is.
  using PoolId = std::pair<unsigned long long, unsigned long long>;
  using Route = std::function<bool(CUstream_st*)>;
  m.def(
      "_torch_call_begin_pool",
      [](std::uintptr_t fn, int device, unsigned long long a, unsigned long long b, std::vector<std::uintptr_t> streams) {
        using Begin = void (*)(int, PoolId, Route);
        Route route = [streams](CUstream_st* s) {
          return std::find(streams.begin(), streams.end(), reinterpret_cast<std::uintptr_t>(s)) != streams.end();
        };
        try {
          reinterpret_cast<Begin>(fn)(device, PoolId{a, b}, std::move(route));
        } catch (const std::exception& e) {
          throw std::runtime_error(e.what());
        }
      },
      py::arg("fn"), py::arg("device"), py::arg("a"), py::arg("b"), py::arg("streams"),
      "Calls the shim's begin_allocate_to_pool as PyTorch would, routing `streams` to the pool (tests).");
  m.def(
      "_torch_call_pool_hook",
      [](std::uintptr_t fn, int device, unsigned long long a, unsigned long long b) {
        using Hook = void (*)(int, PoolId);
        try {
          reinterpret_cast<Hook>(fn)(device, PoolId{a, b});
        } catch (const std::exception& e) {
          throw std::runtime_error(e.what());
        }
      },
      py::arg("fn"), py::arg("device"), py::arg("a"), py::arg("b"),
      "Calls the shim's end_allocate_to_pool or release_pool as PyTorch would (tests).");
}

}  // namespace genesis::python

// Note [One allocator behind PyTorch]: the shim finds the table by this name.
extern "C" __attribute__((visibility("default"))) const GenesisTorchBackend* genesis_torch_backend(void) {
  return &genesis::python::kBackend;
}
