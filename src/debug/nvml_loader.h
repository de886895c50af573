// NVML (the NVIDIA Management Library), loaded at run time with dlopen so
// that Genesis builds and runs without it: the few types and functions the
// memory sources use, declared here instead of including nvml.h. Internal to
// src/debug.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace genesis::debug::nvml {

using Return = int;  // nvmlReturn_t
inline constexpr Return kSuccess = 0;
inline constexpr Return kErrorInsufficientSize = 7;
/// usedGpuMemory when the driver cannot tell (some containers, Windows WDDM).
inline constexpr unsigned long long kValueNotAvailable = ~0ull;
/// NVML_DEVICE_NAME_V2_BUFFER_SIZE.
inline constexpr unsigned kNameBufferSize = 96;

struct DeviceRecord;                 // nvmlDevice_st, opaque
using Device = DeviceRecord*;        // nvmlDevice_t

struct Memory {                      // nvmlMemory_t
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

/// nvmlMemory_v2_t: `used` leaves out the memory the driver reserves for
/// itself (`reserved`), as nvidia-smi's "used" does; the first version
/// counts that reserve as used.
struct MemoryV2 {
  unsigned int version;
  unsigned long long total;
  unsigned long long reserved;
  unsigned long long free;
  unsigned long long used;
};
/// nvmlMemory_v2: the struct's size with the version in the top byte.
inline constexpr unsigned kMemoryV2Version = static_cast<unsigned>(sizeof(MemoryV2)) | (2u << 24);

/// One GPU's memory as the sources report it. Where the driver can tell,
/// its own reserve is left out of both `used` (which is then nvidia-smi's
/// figure) and `total` (the capacity programs can have), so that used +
/// free == total and the OOM predictor's headroom is real.
struct MemoryFigures {
  unsigned long long total = 0;
  unsigned long long used = 0;
  unsigned long long free = 0;
};

struct ProcessInfoV1 {               // nvmlProcessInfo_v1_t
  unsigned int pid;
  unsigned long long usedGpuMemory;
};

struct ProcessInfoV2 {               // nvmlProcessInfo_v2_t, and nvmlProcessInfo_t of the _v3 call
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};

/// The entry points, from libnvidia-ml.so.1. The process-list calls may be
/// null (older drivers lack _v3 and _v2).
struct Api {
  Return (*init)() = nullptr;                                      // nvmlInit_v2
  Return (*shutdown)() = nullptr;                                  // nvmlShutdown
  Return (*device_count)(unsigned int*) = nullptr;                 // nvmlDeviceGetCount_v2
  Return (*device_handle)(unsigned int, Device*) = nullptr;        // nvmlDeviceGetHandleByIndex_v2
  Return (*memory_info)(Device, Memory*) = nullptr;                // nvmlDeviceGetMemoryInfo
  Return (*memory_info_v2)(Device, MemoryV2*) = nullptr;           // nvmlDeviceGetMemoryInfo_v2 (optional)
  Return (*device_name)(Device, char*, unsigned int) = nullptr;    // nvmlDeviceGetName
  Return (*processes_v3)(Device, unsigned int*, ProcessInfoV2*) = nullptr;  // nvmlDeviceGetComputeRunningProcesses_v3
  Return (*processes_v2)(Device, unsigned int*, ProcessInfoV2*) = nullptr;  // ..._v2
  Return (*processes_v1)(Device, unsigned int*, ProcessInfoV1*) = nullptr;  // nvmlDeviceGetComputeRunningProcesses
  const char* (*error_string)(Return) = nullptr;                   // nvmlErrorString (optional)
};

/// The library, loaded once per process and never unloaded; nullptr when it
/// cannot be loaded, with `why` set to dlerror()'s message (or a missing
/// entry point). Thread-safe, never throws.
const Api* load(std::string* why);

/// The memory of `device` through the newest call the driver has; the
/// return code of the call that failed otherwise.
Return memory_figures(const Api& api, Device device, MemoryFigures& out);

/// "NVML error N (text)".
std::string error_text(const Api& api, Return r);

/// nvmlInit_v2 for the lifetime of the object, nvmlShutdown after (NVML
/// counts them). Throws genesis::Error with the message of Note [Memory
/// sources] naming the other sources when the library is missing or does
/// not initialise.
class Session {
 public:
  Session();
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  const Api& api() const noexcept { return *api_; }

 private:
  const Api* api_ = nullptr;
};

/// One GPU as NVML sees it.
struct Gpu {
  int index = 0;  ///< NVML's index
  std::string name;
  Device handle = nullptr;
  unsigned long long total = 0;
};

/// The GPUs `wanted` (NVML indices; empty: all) of a session. Throws
/// InvalidArgumentError for an index that does not exist, genesis::Error
/// when NVML fails.
std::vector<Gpu> open_gpus(const Session& session, const std::vector<int>& wanted);

/// The compute processes on `device` with their used bytes
/// (kValueNotAvailable when the driver does not say). False when the driver
/// cannot list them.
bool running_processes(const Api& api, Device device, std::vector<std::pair<unsigned, unsigned long long>>& out);

}  // namespace genesis::debug::nvml
