// CUDA IPC export and import: see include/genesis/cuda/ipc.h,
// Note [IPC of allocator blocks].
#include "genesis/cuda/ipc.h"

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <random>

#include "genesis/core/error.h"
#include "genesis/cuda/check.h"
#include "genesis/cuda/device_properties.h"
#include "genesis/cuda/runtime.h"

#if GENESIS_WITH_CUDA
#include <cuda.h>  // driver types only: the functions come from cudaGetDriverEntryPointByVersion
#endif

namespace genesis::cuda {

std::uint64_t ipc_process_id() noexcept {
  // Random rather than the pid: pids repeat across pid namespaces (containers)
  // and over time, and a false "exported by this process" would refuse a valid
  // handle.
  static const std::uint64_t id = [] {
    std::uint64_t v = 0;
    try {
      std::random_device rd;
      v = (std::uint64_t{rd()} << 32) ^ rd();
    } catch (...) {
    }
    v ^= static_cast<std::uint64_t>(::getpid()) * 0x9e3779b97f4a7c15ull;
    v ^= static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    return v == 0 ? 1 : v;
  }();
  return id;
}

#if GENESIS_WITH_CUDA

namespace {

// Driver entry points, resolved through the runtime so that Genesis does not
// link libcuda (see src/cuda/vmm.cpp for the same pattern).
struct DriverApi {
  decltype(&::cuMemGetAddressRange) get_address_range = nullptr;
  decltype(&::cuPointerGetAttribute) pointer_attribute = nullptr;
  decltype(&::cuMemRetainAllocationHandle) retain_handle = nullptr;
  decltype(&::cuMemRelease) release = nullptr;
  decltype(&::cuGetErrorName) error_name = nullptr;
};

template <typename Fn>
void load(const char* symbol, Fn* fn) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult status{};
  // 12000: the ABI of these entry points as of CUDA 12 (cuMemGetAddressRange
  // resolves to its _v2, 64-bit-size form).
  if (cudaGetDriverEntryPointByVersion(symbol, &p, 12000, cudaEnableDefault, &status) != cudaSuccess ||
      status != cudaDriverEntryPointSuccess || p == nullptr) {
    (void)cudaGetLastError();
    *fn = nullptr;
    return;
  }
  *fn = reinterpret_cast<Fn>(p);
}

const DriverApi& driver() {
  static const DriverApi api = [] {
    DriverApi a;
    load("cuMemGetAddressRange", &a.get_address_range);
    load("cuPointerGetAttribute", &a.pointer_attribute);
    load("cuMemRetainAllocationHandle", &a.retain_handle);
    load("cuMemRelease", &a.release);
    load("cuGetErrorName", &a.error_name);
    return a;
  }();
  if (api.get_address_range == nullptr || api.pointer_attribute == nullptr) {
    throw CudaError("CUDA IPC: the driver does not provide cuMemGetAddressRange/cuPointerGetAttribute "
                    "(cudaGetDriverEntryPointByVersion failed; driver too old?)",
                    detail::kNoDeviceCode, __FILE__, __LINE__);
  }
  return api;
}

[[noreturn]] void driver_fail(CUresult r, const char* what, const char* file, int line) {
  const char* name = nullptr;
  if (driver().error_name != nullptr) driver().error_name(r, &name);
  throw CudaError(genesis::detail::str_cat(what, " failed: ", name ? name : "unknown CUDA driver error", " (",
                                           static_cast<int>(r), ")"),
                  static_cast<int>(r), file, line);
}

// Process-wide table of opened segments (Note [IPC of allocator blocks]).
struct OpenSegment {
  void* base = nullptr;
  std::size_t size = 0;
  int device = 0;
  int refs = 0;
};

struct SegmentTable {
  std::mutex mutex;
  std::map<std::array<std::uint8_t, 64>, OpenSegment> open;
};

SegmentTable& segments() {
  // Leaked on purpose: IpcMappings in static objects may close after a
  // function-local static table would have been destroyed.
  static SegmentTable* table = new SegmentTable;
  return *table;
}

std::string uuid_text(const std::array<std::uint8_t, 16>& uuid) {
  DeviceProperties p;
  p.uuid = uuid;
  return p.uuid_string();
}

int local_device_of(const IpcHandle& h) {
  const int count = device_count();
  const bool has_uuid = h.device_uuid != std::array<std::uint8_t, 16>{};
  if (has_uuid) {
    for (int d = 0; d < count; ++d)
      if (get_device_properties(d).uuid == h.device_uuid) return d;
    GENESIS_THROW(InvalidArgumentError, "IpcMapping::open: the handle's GPU ", uuid_text(h.device_uuid),
                  " (device ", h.device, " in the exporting process) is not visible in this process, which sees ",
                  count, count == 1 ? " device" : " devices",
                  "; check CUDA_VISIBLE_DEVICES, and that both processes run on the same machine");
  }
  GENESIS_CHECK(h.device >= 0 && h.device < count, "IpcMapping::open: the handle names device ", h.device,
                " but this process sees ", count, count == 1 ? " device" : " devices",
                " (and the handle carries no GPU UUID to find it by)");
  return h.device;
}

}  // namespace

IpcHandle export_ipc_handle(const void* ptr, std::size_t nbytes) {
  if (device_count() == 0) detail::throw_cuda_unavailable("export_ipc_handle()", __FILE__, __LINE__);
  GENESIS_CHECK(ptr != nullptr, "export_ipc_handle: null pointer");

  cudaPointerAttributes attr{};
  GENESIS_CUDA_CHECK(cudaPointerGetAttributes(&attr, ptr));
  GENESIS_CHECK(attr.type == cudaMemoryTypeDevice, "export_ipc_handle: ", ptr, " is not device memory (it is ",
                attr.type == cudaMemoryTypeManaged ? "managed memory"
                : attr.type == cudaMemoryTypeHost  ? "pinned host memory"
                                                   : "not CUDA memory at all",
                "); only cudaMalloc'd device memory can be shared through CUDA IPC");

  const DriverApi& api = driver();
  DeviceGuard guard(attr.device);
  // The driver calls below use the thread's current context; cudaSetDevice
  // binds the device's primary context (CUDA >= 12), which a thread that only
  // asked cudaPointerGetAttributes may not have yet.
  GENESIS_CUDA_CHECK(cudaSetDevice(attr.device));
  const auto dptr = static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(ptr));

  // The driver knows whether cudaIpcGetMemHandle can take this allocation.
  // If even the query fails (a driver without the attribute), go on and let
  // cudaIpcGetMemHandle decide, after the one check that gives a clear reason.
  int legacy_ipc = 0;  // the driver writes a bool (1 byte) or an int: zeroed, either reads right
  const bool known = api.pointer_attribute(&legacy_ipc, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, dptr) ==
                     CUDA_SUCCESS;
  if (!known || legacy_ipc == 0) {
    // Tell the likely cause apart: only a VMM mapping has a retainable handle.
    bool vmm = false;
    if (api.retain_handle != nullptr && api.release != nullptr) {
      CUmemGenericAllocationHandle h{};
      if (api.retain_handle(&h, const_cast<void*>(ptr)) == CUDA_SUCCESS) {
        vmm = true;
        (void)api.release(h);
      }
    }
    if (vmm || known) {
      GENESIS_THROW(InvalidArgumentError, "export_ipc_handle: the memory at ", ptr, " on cuda:", attr.device,
                    " cannot be shared with cudaIpcGetMemHandle: ",
                    vmm ? "it was mapped with the CUDA virtual-memory API (cuMemCreate/cuMemMap), as the caching "
                          "allocator's expandable segments are; allocate it with expandable segments off"
                        : "it was not allocated by cudaMalloc (cudaMallocAsync pools and virtual-memory "
                          "mappings are not shareable this way)");
    }
  }

  CUdeviceptr base = 0;
  std::size_t size = 0;
  if (CUresult r = api.get_address_range(&base, &size, dptr); r != CUDA_SUCCESS)
    driver_fail(r, "cuMemGetAddressRange", __FILE__, __LINE__);
  const std::size_t offset = static_cast<std::size_t>(dptr - base);
  GENESIS_CHECK(nbytes <= size - offset, "export_ipc_handle: [", ptr, ", +", nbytes,
                ") runs past the end of its allocation (", size - offset, " bytes left after the pointer; the "
                "allocation is ", size, " bytes at 0x", std::hex, static_cast<std::uintptr_t>(base), ")");

  cudaIpcMemHandle_t h{};
  GENESIS_CUDA_CHECK(cudaIpcGetMemHandle(&h, reinterpret_cast<void*>(static_cast<std::uintptr_t>(base))));
  IpcHandle out;
  static_assert(sizeof(h) == sizeof(out.handle), "cudaIpcMemHandle_t is 64 bytes");
  std::memcpy(out.handle.data(), &h, sizeof h);
  out.offset = offset;
  out.nbytes = nbytes;
  out.device = attr.device;
  out.device_uuid = get_device_properties(attr.device).uuid;
  out.exporter = ipc_process_id();
  return out;
}

IpcMapping IpcMapping::open(const IpcHandle& handle) {
  if (device_count() == 0) detail::throw_cuda_unavailable("IpcMapping::open()", __FILE__, __LINE__);
  GENESIS_CHECK(handle.exporter != ipc_process_id(),
                "IpcMapping::open: this handle was exported by this very process; CUDA cannot open an IPC "
                "handle in the process that created it: use the original device pointer instead");
  GENESIS_CHECK(handle.offset + handle.nbytes >= handle.offset, "IpcMapping::open: offset + nbytes overflows");
  const int device = local_device_of(handle);

  SegmentTable& table = segments();
  std::lock_guard<std::mutex> lock(table.mutex);
  auto it = table.open.find(handle.handle);
  if (it == table.open.end()) {
    cudaIpcMemHandle_t h{};
    std::memcpy(&h, handle.handle.data(), sizeof h);
    void* base = nullptr;
    DeviceGuard guard(device);  // the segment is mapped into (and closed from) this device's context
    {
      const cudaError_t err = cudaIpcOpenMemHandle(&base, h, cudaIpcMemLazyEnablePeerAccess);
      if (err != cudaSuccess) {
        (void)cudaGetLastError();
        throw CudaError(genesis::detail::str_cat(
                            "IpcMapping::open: cudaIpcOpenMemHandle on cuda:", device, " failed: ",
                            detail::cuda_error_text(static_cast<int>(err)),
                            ". Likely causes: the exporting process has exited or freed the memory, the handle "
                            "comes from another machine or container without shared IPC, or the handle text "
                            "was altered"),
                        static_cast<int>(err), __FILE__, __LINE__);
      }
    }
    // The segment's true size, to check the handle's range against it.
    CUdeviceptr range_base = 0;
    std::size_t size = 0;
    const CUresult r =
        driver().get_address_range(&range_base, &size, static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(base)));
    if (r != CUDA_SUCCESS) {
      if (cudaIpcCloseMemHandle(base) != cudaSuccess) (void)cudaGetLastError();
      driver_fail(r, "cuMemGetAddressRange (mapped IPC segment)", __FILE__, __LINE__);
    }
    if (handle.offset + handle.nbytes > size) {
      if (cudaIpcCloseMemHandle(base) != cudaSuccess) (void)cudaGetLastError();
      GENESIS_THROW(InvalidArgumentError, "IpcMapping::open: the handle's range [", handle.offset, ", ",
                    handle.offset + handle.nbytes, ") lies outside the shared allocation of ", size, " bytes");
    }
    it = table.open.emplace(handle.handle, OpenSegment{base, size, device, 0}).first;
  }
  OpenSegment& seg = it->second;
  GENESIS_CHECK(handle.offset + handle.nbytes <= seg.size, "IpcMapping::open: the handle's range [",
                handle.offset, ", ", handle.offset + handle.nbytes, ") lies outside the shared allocation of ",
                seg.size, " bytes");
  ++seg.refs;
  IpcMapping m;
  m.base_ = seg.base;
  m.offset_ = handle.offset;
  m.nbytes_ = handle.nbytes;
  m.device_ = seg.device;
  m.key_ = handle.handle;
  return m;
}

void IpcMapping::close() noexcept {
  if (base_ == nullptr) return;
  SegmentTable& table = segments();
  {
    std::lock_guard<std::mutex> lock(table.mutex);
    auto it = table.open.find(key_);
    if (it != table.open.end() && --it->second.refs == 0) {
      DeviceGuard guard(it->second.device, std::nothrow);
      // Fails only while CUDA shuts down; the mapping dies with the context.
      if (cudaIpcCloseMemHandle(it->second.base) != cudaSuccess) (void)cudaGetLastError();
      table.open.erase(it);
    }
  }
  base_ = nullptr;
  offset_ = 0;
  nbytes_ = 0;
  device_ = -1;
}

#else  // !GENESIS_WITH_CUDA

IpcHandle export_ipc_handle(const void*, std::size_t) {
  detail::throw_cuda_unavailable("export_ipc_handle()", __FILE__, __LINE__);
}

IpcMapping IpcMapping::open(const IpcHandle&) {
  detail::throw_cuda_unavailable("IpcMapping::open()", __FILE__, __LINE__);
}

void IpcMapping::close() noexcept {
  base_ = nullptr;
  device_ = -1;
}

#endif

IpcMapping::~IpcMapping() { close(); }

IpcMapping::IpcMapping(IpcMapping&& other) noexcept
    : base_(other.base_),
      offset_(other.offset_),
      nbytes_(other.nbytes_),
      device_(other.device_),
      key_(other.key_) {
  other.base_ = nullptr;
  other.offset_ = 0;
  other.nbytes_ = 0;
  other.device_ = -1;
}

IpcMapping& IpcMapping::operator=(IpcMapping&& other) noexcept {
  if (this != &other) {
    close();
    base_ = other.base_;
    offset_ = other.offset_;
    nbytes_ = other.nbytes_;
    device_ = other.device_;
    key_ = other.key_;
    other.base_ = nullptr;
    other.offset_ = 0;
    other.nbytes_ = 0;
    other.device_ = -1;
  }
  return *this;
}

void* IpcMapping::data() const noexcept {
  return base_ == nullptr ? nullptr : static_cast<char*>(base_) + offset_;
}

}  // namespace genesis::cuda
