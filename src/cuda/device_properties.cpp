// Device queries and peer access: see include/genesis/cuda/device_properties.h.
#include "genesis/cuda/device_properties.h"

#include <cstdio>
#include <memory>
#include <mutex>
#include <vector>

#include "device_index.h"
#include "genesis/core/error.h"
#include "genesis/cuda/async_errors.h"
#include "genesis/cuda/check.h"
#include "genesis/cuda/runtime.h"

namespace genesis::cuda {

namespace {

#if GENESIS_WITH_CUDA
DeviceProperties query_properties(int device) {
  cudaDeviceProp p{};
  GENESIS_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  DeviceProperties d;
  d.index = device;
  d.name = p.name;
  d.major = p.major;
  d.minor = p.minor;
  d.total_memory = p.totalGlobalMem;
  d.multi_processor_count = p.multiProcessorCount;
  d.max_threads_per_block = p.maxThreadsPerBlock;
  d.max_threads_per_multi_processor = p.maxThreadsPerMultiProcessor;
  d.warp_size = p.warpSize;
  d.shared_memory_per_block = p.sharedMemPerBlock;
  d.shared_memory_per_block_optin = p.sharedMemPerBlockOptin;
  d.registers_per_block = p.regsPerBlock;
  d.l2_cache_size = static_cast<std::size_t>(p.l2CacheSize);
  d.memory_bus_width = p.memoryBusWidth;
  // CUDA 13 dropped the clock fields from cudaDeviceProp; the attributes remain.
  GENESIS_CUDA_CHECK(cudaDeviceGetAttribute(&d.memory_clock_khz, cudaDevAttrMemoryClockRate, device));
  GENESIS_CUDA_CHECK(cudaDeviceGetAttribute(&d.clock_khz, cudaDevAttrClockRate, device));
  d.integrated = p.integrated != 0;
  d.managed_memory = p.managedMemory != 0;
  d.concurrent_managed_access = p.concurrentManagedAccess != 0;
  d.ecc_enabled = p.ECCEnabled != 0;
  char bus[32] = {};
  GENESIS_CUDA_CHECK(cudaDeviceGetPCIBusId(bus, sizeof bus, device));
  d.pci_bus_id = bus;
  for (std::size_t i = 0; i < d.uuid.size(); ++i) d.uuid[i] = static_cast<std::uint8_t>(p.uuid.bytes[i]);
  return d;
}
#endif

}  // namespace

std::string DeviceProperties::uuid_string() const {
  std::string s = "GPU-";
  char hex[3];
  for (std::size_t i = 0; i < uuid.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    std::snprintf(hex, sizeof hex, "%02x", uuid[i]);
    s += hex;
  }
  return s;
}

const DeviceProperties& get_device_properties(int device) {
  device = GENESIS_RESOLVE_DEVICE(device, "get_device_properties()");
  // Entries are created once and never change or move, so a reference handed
  // out stays valid and can be read without the lock.
  static std::mutex mutex;
  static std::vector<std::unique_ptr<const DeviceProperties>> cache(static_cast<std::size_t>(device_count()));
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = cache[static_cast<std::size_t>(device)];
#if GENESIS_WITH_CUDA
  if (!slot) slot = std::make_unique<const DeviceProperties>(query_properties(device));
#endif
  return *slot;
}

std::string get_device_name(int device) { return get_device_properties(device).name; }

std::pair<int, int> get_device_capability(int device) {
  const DeviceProperties& p = get_device_properties(device);
  return {p.major, p.minor};
}

void synchronize() {
  if (device_count() == 0) detail::throw_cuda_unavailable("synchronize()", __FILE__, __LINE__);
#if GENESIS_WITH_CUDA
  GENESIS_CUDA_CHECK(cudaDeviceSynchronize());
  raise_async_errors(current_device());  // Note [Asynchronous kernel errors]
#endif
}

void synchronize(int device) {
  device = GENESIS_RESOLVE_DEVICE(device, "synchronize(device)");
  synchronize_device(device);
}

bool can_access_peer(int device, int peer) {
  device = GENESIS_RESOLVE_DEVICE(device, "can_access_peer()");
  peer = GENESIS_RESOLVE_DEVICE(peer, "can_access_peer()");
  if (device == peer) return true;
  int can = 0;
#if GENESIS_WITH_CUDA
  GENESIS_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, device, peer));
#endif
  return can != 0;
}

void enable_peer_access(int from, int to) {
  from = GENESIS_RESOLVE_DEVICE(from, "enable_peer_access()");
  to = GENESIS_RESOLVE_DEVICE(to, "enable_peer_access()");
  if (from == to) return;
  const auto n = static_cast<std::size_t>(device_count());
  // One lock for all pairs: enabling is rare and slow (the driver maps every
  // allocation of `to` into `from`), so contention does not matter, and the
  // lock makes "check, enable, remember" atomic.
  static std::mutex mutex;
  static std::vector<char> enabled(n * n, 0);
  std::lock_guard<std::mutex> lock(mutex);
  char& done = enabled[static_cast<std::size_t>(from) * n + static_cast<std::size_t>(to)];
  if (done) return;
  if (!can_access_peer(from, to)) {
    throw CudaError(genesis::detail::str_cat("enable_peer_access(", from, ", ", to, "): device ", from,
                                             " cannot access the memory of device ", to,
                                             " (cudaDeviceCanAccessPeer is 0: no NVLink/PCIe peer path, or "
                                             "peer access is disabled on this system); copy through the host "
                                             "or use cudaMemcpyPeer instead"),
                    /*cudaErrorPeerAccessUnsupported*/ 217, __FILE__, __LINE__);
  }
#if GENESIS_WITH_CUDA
  DeviceGuard guard(from);  // peer access is granted to the current device's context
  const cudaError_t err = cudaDeviceEnablePeerAccess(to, 0);
  if (err == cudaErrorPeerAccessAlreadyEnabled) {
    (void)cudaGetLastError();  // enabled by other code: the state we want
  } else if (err != cudaSuccess) {
    detail::throw_cuda_error(static_cast<int>(err), "cudaDeviceEnablePeerAccess(to, 0)", __FILE__, __LINE__);
  }
#endif
  done = 1;
}

}  // namespace genesis::cuda
