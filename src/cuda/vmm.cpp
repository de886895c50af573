#include "genesis/cuda/vmm.h"

#include "genesis/core/error.h"

#if GENESIS_WITH_CUDA
#include <cuda.h>
#include <cuda_runtime.h>

#include <mutex>
#endif

namespace genesis::cuda::vmm {

#if GENESIS_WITH_CUDA

namespace {

struct Api {
  decltype(&::cuMemAddressReserve) address_reserve = nullptr;
  decltype(&::cuMemAddressFree) address_free = nullptr;
  decltype(&::cuMemCreate) create = nullptr;
  decltype(&::cuMemRelease) release = nullptr;
  decltype(&::cuMemMap) map = nullptr;
  decltype(&::cuMemUnmap) unmap = nullptr;
  decltype(&::cuMemSetAccess) set_access = nullptr;
  decltype(&::cuMemGetAllocationGranularity) granularity = nullptr;
  decltype(&::cuDeviceGetAttribute) device_attribute = nullptr;
  decltype(&::cuGetErrorName) error_name = nullptr;
  bool ok = false;
};

template <typename Fn>
bool load(const char* symbol, Fn* fn) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult status{};
  // 12000: the ABI version of these entry points (stable since CUDA 10.2).
  if (cudaGetDriverEntryPointByVersion(symbol, &p, 12000, cudaEnableDefault, &status) != cudaSuccess ||
      status != cudaDriverEntryPointSuccess || p == nullptr) {
    (void)cudaGetLastError();
    return false;
  }
  *fn = reinterpret_cast<Fn>(p);
  return true;
}

const Api& api() {
  static const Api instance = [] {
    Api a;
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
      (void)cudaGetLastError();
      return a;
    }
    a.ok = load("cuMemAddressReserve", &a.address_reserve) && load("cuMemAddressFree", &a.address_free) &&
           load("cuMemCreate", &a.create) && load("cuMemRelease", &a.release) && load("cuMemMap", &a.map) &&
           load("cuMemUnmap", &a.unmap) && load("cuMemSetAccess", &a.set_access) &&
           load("cuMemGetAllocationGranularity", &a.granularity) &&
           load("cuDeviceGetAttribute", &a.device_attribute) && load("cuGetErrorName", &a.error_name);
    return a;
  }();
  return instance;
}

[[noreturn]] void fail(CUresult r, const char* what) {
  const char* name = nullptr;
  if (api().error_name != nullptr) api().error_name(r, &name);
  throw CudaError(std::string(what) + " failed: " + (name ? name : "unknown CUDA driver error") + " (" +
                      std::to_string(static_cast<int>(r)) + ")",
                  static_cast<int>(r), __FILE__, __LINE__);
}

CUmemAllocationProp properties(int device) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  return prop;
}

}  // namespace

bool available(int device) noexcept {
  try {
    const Api& a = api();
    if (!a.ok) return false;
    int supported = 0;
    if (a.device_attribute(&supported, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, device) !=
        CUDA_SUCCESS)
      return false;
    return supported != 0;
  } catch (...) {
    return false;
  }
}

std::size_t granularity(int device) {
  const Api& a = api();
  GENESIS_CHECK(a.ok, "CUDA virtual memory management is not available");
  CUmemAllocationProp prop = properties(device);
  std::size_t g = 0;
  if (CUresult r = a.granularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM); r != CUDA_SUCCESS)
    fail(r, "cuMemGetAllocationGranularity");
  return g;
}

std::uintptr_t reserve(std::size_t bytes, std::size_t alignment) {
  const Api& a = api();
  GENESIS_CHECK(a.ok, "CUDA virtual memory management is not available");
  CUdeviceptr ptr = 0;
  CUresult r = a.address_reserve(&ptr, bytes, alignment, 0, 0);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) return 0;
  if (r != CUDA_SUCCESS) fail(r, "cuMemAddressReserve");
  return static_cast<std::uintptr_t>(ptr);
}

void free_reservation(std::uintptr_t addr, std::size_t bytes) noexcept {
  const Api& a = api();
  if (a.ok) (void)a.address_free(static_cast<CUdeviceptr>(addr), bytes);
}

bool create_and_map(int device, std::uintptr_t addr, std::size_t bytes, Handle* handle) {
  const Api& a = api();
  GENESIS_CHECK(a.ok, "CUDA virtual memory management is not available");
  CUmemAllocationProp prop = properties(device);
  CUmemGenericAllocationHandle h = 0;
  CUresult r = a.create(&h, bytes, &prop, 0);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) return false;
  if (r != CUDA_SUCCESS) fail(r, "cuMemCreate");
  r = a.map(static_cast<CUdeviceptr>(addr), bytes, 0, h, 0);
  if (r != CUDA_SUCCESS) {
    a.release(h);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) return false;
    fail(r, "cuMemMap");
  }
  *handle = static_cast<Handle>(h);
  return true;
}

bool set_access(int device, std::uintptr_t addr, std::size_t bytes) {
  const Api& a = api();
  GENESIS_CHECK(a.ok, "CUDA virtual memory management is not available");
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  const CUresult r = a.set_access(static_cast<CUdeviceptr>(addr), bytes, &access, 1);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) return false;
  if (r != CUDA_SUCCESS) fail(r, "cuMemSetAccess");
  return true;
}

void unmap_and_release(std::uintptr_t addr, std::size_t bytes, Handle handle) noexcept {
  const Api& a = api();
  if (!a.ok) return;
  (void)a.unmap(static_cast<CUdeviceptr>(addr), bytes);
  (void)a.release(static_cast<CUmemGenericAllocationHandle>(handle));
}

#else  // !GENESIS_WITH_CUDA

bool available(int) noexcept { return false; }
std::size_t granularity(int) {
  GENESIS_CHECK(false, "CUDA virtual memory management needs CUDA (Genesis was built without it)");
  return 0;
}
std::uintptr_t reserve(std::size_t, std::size_t) { return 0; }
void free_reservation(std::uintptr_t, std::size_t) noexcept {}
bool create_and_map(int, std::uintptr_t, std::size_t, Handle*) { return false; }
bool set_access(int, std::uintptr_t, std::size_t) { return false; }
void unmap_and_release(std::uintptr_t, std::size_t, Handle) noexcept {}

#endif

}  // namespace genesis::cuda::vmm
