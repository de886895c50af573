// Loading NVML at run time (nvml_loader.h).
#include "nvml_loader.h"

#include <dlfcn.h>

#include <mutex>

#include "genesis/core/error.h"

namespace genesis::debug::nvml {

namespace {

constexpr const char* kLibrary = "libnvidia-ml.so.1";
constexpr const char* kOtherSources =
    "Use --trace FILE to analyse a recorded trace, or --pid PID / -- CMD to watch a Genesis program";

struct Loaded {
  Api api;
  bool ok = false;
  std::string why;
};

template <class F>
bool symbol(void* lib, const char* name, F& out, bool required, std::string& why) {
  out = reinterpret_cast<F>(dlsym(lib, name));
  if (out == nullptr && required && why.empty()) why = std::string(kLibrary) + " has no " + name;
  return out != nullptr || !required;
}

const Loaded& loaded() {
  static const Loaded l = [] {
    Loaded r;
    void* lib = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* e = dlerror();
      std::string msg = e != nullptr ? e : "cannot be loaded";
      // dlerror() starts with the library's name, which the message names already.
      const std::string prefix = std::string(kLibrary) + ": ";
      if (msg.compare(0, prefix.size(), prefix) == 0) msg.erase(0, prefix.size());
      r.why = msg;
      return r;
    }
    Api& a = r.api;
    bool ok = symbol(lib, "nvmlInit_v2", a.init, true, r.why);
    ok = symbol(lib, "nvmlShutdown", a.shutdown, true, r.why) && ok;
    ok = symbol(lib, "nvmlDeviceGetCount_v2", a.device_count, true, r.why) && ok;
    ok = symbol(lib, "nvmlDeviceGetHandleByIndex_v2", a.device_handle, true, r.why) && ok;
    ok = symbol(lib, "nvmlDeviceGetMemoryInfo", a.memory_info, true, r.why) && ok;
    ok = symbol(lib, "nvmlDeviceGetName", a.device_name, true, r.why) && ok;
    symbol(lib, "nvmlDeviceGetMemoryInfo_v2", a.memory_info_v2, false, r.why);
    symbol(lib, "nvmlDeviceGetComputeRunningProcesses_v3", a.processes_v3, false, r.why);
    symbol(lib, "nvmlDeviceGetComputeRunningProcesses_v2", a.processes_v2, false, r.why);
    symbol(lib, "nvmlDeviceGetComputeRunningProcesses", a.processes_v1, false, r.why);
    symbol(lib, "nvmlErrorString", a.error_string, false, r.why);
    r.ok = ok;
    return r;  // the library stays loaded for the process's lifetime
  }();
  return l;
}

}  // namespace

const Api* load(std::string* why) {
  const Loaded& l = loaded();
  if (!l.ok && why != nullptr) *why = l.why;
  return l.ok ? &l.api : nullptr;
}

Return memory_figures(const Api& api, Device device, MemoryFigures& out) {
  if (api.memory_info_v2 != nullptr) {
    MemoryV2 m{};
    m.version = kMemoryV2Version;
    if (api.memory_info_v2(device, &m) == kSuccess) {
      out.total = m.total > m.reserved ? m.total - m.reserved : m.total;
      out.used = m.used;
      out.free = out.total > m.used ? out.total - m.used : 0;
      return kSuccess;
    }
    // A driver that exports the call but refuses this version: the first one.
  }
  Memory m{};
  const Return r = api.memory_info(device, &m);
  if (r != kSuccess) return r;
  out.total = m.total;
  out.used = m.used;
  out.free = m.total > m.used ? m.total - m.used : 0;
  return kSuccess;
}

std::string error_text(const Api& api, Return r) {
  std::string s = "NVML error " + std::to_string(r);
  if (api.error_string != nullptr) {
    const char* t = api.error_string(r);
    if (t != nullptr) s += std::string(" (") + t + ")";
  }
  return s;
}

Session::Session() {
  std::string why;
  const Api* api = load(&why);
  if (api == nullptr) {
    GENESIS_THROW(Error, "NVML is not available (", kLibrary, ": ", why, "): no NVIDIA driver on this machine. ",
                  kOtherSources);
  }
  const Return r = api->init();
  if (r != kSuccess) {
    GENESIS_THROW(Error, "NVML is not available (nvmlInit failed: ", error_text(*api, r),
                  "): the NVIDIA driver does not answer (no GPU, or a driver/library mismatch). ", kOtherSources);
  }
  api_ = api;
}

Session::~Session() {
  if (api_ != nullptr) (void)api_->shutdown();
}

std::vector<Gpu> open_gpus(const Session& session, const std::vector<int>& wanted) {
  const Api& api = session.api();
  unsigned int count = 0;
  const Return r = api.device_count(&count);
  if (r != kSuccess) GENESIS_THROW(Error, "NVML cannot count the GPUs: ", error_text(api, r));
  std::vector<int> indices = wanted;
  if (indices.empty()) {
    for (unsigned i = 0; i < count; ++i) indices.push_back(static_cast<int>(i));
  }
  std::vector<Gpu> gpus;
  for (const int i : indices) {
    GENESIS_CHECK(i >= 0 && static_cast<unsigned>(i) < count, "no GPU ", i, ": NVML sees ", count,
                  count == 1 ? " GPU (0)" : " GPUs", count > 1 ? " (0 to " + std::to_string(count - 1) + ")" : "");
    bool seen = false;
    for (const Gpu& g : gpus) seen = seen || g.index == i;
    if (seen) continue;
    Gpu g;
    g.index = i;
    Return e = api.device_handle(static_cast<unsigned>(i), &g.handle);
    if (e != kSuccess) GENESIS_THROW(Error, "NVML cannot open GPU ", i, ": ", error_text(api, e));
    char name[kNameBufferSize] = {};
    if (api.device_name(g.handle, name, sizeof name) == kSuccess) g.name = name;
    if (g.name.empty()) g.name = "GPU " + std::to_string(i);
    MemoryFigures m;
    e = memory_figures(api, g.handle, m);
    if (e != kSuccess) GENESIS_THROW(Error, "NVML cannot read the memory of GPU ", i, ": ", error_text(api, e));
    g.total = m.total;
    gpus.push_back(std::move(g));
  }
  return gpus;
}

bool running_processes(const Api& api, Device device, std::vector<std::pair<unsigned, unsigned long long>>& out) {
  out.clear();
  // The newest call the driver has; each fills the same record layout but
  // _v1's (which has no instance ids).
  for (int version = 3; version >= 1; --version) {
    if ((version == 3 && api.processes_v3 == nullptr) || (version == 2 && api.processes_v2 == nullptr) ||
        (version == 1 && api.processes_v1 == nullptr)) {
      continue;
    }
    unsigned int capacity = 64;
    for (int attempt = 0; attempt < 4; ++attempt) {
      unsigned int count = capacity;
      Return r;
      if (version == 1) {
        std::vector<ProcessInfoV1> infos(capacity);
        r = api.processes_v1(device, &count, infos.data());
        if (r == kSuccess) {
          for (unsigned i = 0; i < count && i < capacity; ++i) out.emplace_back(infos[i].pid, infos[i].usedGpuMemory);
          return true;
        }
      } else {
        std::vector<ProcessInfoV2> infos(capacity);
        r = version == 3 ? api.processes_v3(device, &count, infos.data())
                         : api.processes_v2(device, &count, infos.data());
        if (r == kSuccess) {
          for (unsigned i = 0; i < count && i < capacity; ++i) out.emplace_back(infos[i].pid, infos[i].usedGpuMemory);
          return true;
        }
      }
      if (r != kErrorInsufficientSize) break;  // try an older call
      capacity = count + 16;                   // processes started in between
    }
  }
  return false;
}

}  // namespace genesis::debug::nvml
