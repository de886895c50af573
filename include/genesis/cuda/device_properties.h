// Device queries and device-wide operations (behind Python's
// `genesis.cuda.get_device_name()`, `get_device_capability()`,
// `get_device_properties().total_memory`, `synchronize()`), and peer access
// between GPUs (for peer copies).
//
// Like runtime.h this header includes no CUDA header. Every function throws
// CudaError saying why when CUDA or a GPU is not available, and
// InvalidArgumentError for a device index this process cannot see.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "genesis/cuda/stream.h"  // kCurrentDevice

namespace genesis::cuda {

/// What a device is. Queried once per device and process (the values cannot
/// change while the process runs; a cudaDeviceReset does not change them).
struct DeviceProperties {
  int index = 0;                           ///< the device index in this process
  std::string name;                        ///< "NVIDIA H200"
  int major = 0;                           ///< compute capability major (9 for Hopper)
  int minor = 0;                           ///< compute capability minor
  std::size_t total_memory = 0;            ///< bytes of device memory
  int multi_processor_count = 0;           ///< SMs
  int max_threads_per_block = 0;
  int max_threads_per_multi_processor = 0;
  int warp_size = 0;
  std::size_t shared_memory_per_block = 0;        ///< without opt-in
  std::size_t shared_memory_per_block_optin = 0;  ///< with cudaFuncAttributeMaxDynamicSharedMemorySize
  int registers_per_block = 0;
  std::size_t l2_cache_size = 0;           ///< bytes
  int memory_bus_width = 0;                ///< bits
  int memory_clock_khz = 0;                ///< peak memory clock
  int clock_khz = 0;                       ///< peak SM clock
  bool integrated = false;                 ///< shares memory with the host (e.g. Jetson)
  bool managed_memory = false;             ///< cudaMallocManaged supported
  bool concurrent_managed_access = false;  ///< CPU and GPU may touch managed memory at once
  bool ecc_enabled = false;
  std::string pci_bus_id;                  ///< "0000:1b:00.0", as nvidia-smi prints it
  std::array<std::uint8_t, 16> uuid{};     ///< the GPU's UUID bytes
  /// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi -L prints it.
  std::string uuid_string() const;
};

/// The properties of `device` (kCurrentDevice: the current one), cached per
/// device: the first call per device costs a cudaGetDeviceProperties, later
/// ones a lookup. The reference stays valid for the life of the process.
/// Thread-safe.
const DeviceProperties& get_device_properties(int device = kCurrentDevice);

/// get_device_properties(device).name.
std::string get_device_name(int device = kCurrentDevice);

/// {major, minor} compute capability, e.g. {9, 0} for H100/H200.
std::pair<int, int> get_device_capability(int device = kCurrentDevice);

/// Blocks until all work queued on the current device has finished
/// (cudaDeviceSynchronize). Throws CudaError if that work failed.
void synchronize();

/// The same for `device`; the calling thread's current device is unchanged.
void synchronize(int device);

/// True when kernels on `device` can read and write memory of `peer`
/// (cudaDeviceCanAccessPeer). A device always reaches its own memory, so
/// can_access_peer(d, d) is true. Thread-safe.
bool can_access_peer(int device, int peer);

/// Lets kernels running on `from` access memory allocated on `to`
/// (cudaDeviceEnablePeerAccess, one direction). Idempotent and thread-safe:
/// enabling an enabled pair, here or by other code in the process
/// (cudaErrorPeerAccessAlreadyEnabled), is not an error; from == to is a
/// no-op. Throws CudaError when the pair cannot access each other
/// (can_access_peer false) or the call fails. Does not change the calling
/// thread's current device.
void enable_peer_access(int from, int to);

}  // namespace genesis::cuda
