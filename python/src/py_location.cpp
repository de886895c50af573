#include "py_location.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <unordered_map>

#include <pybind11/pybind11.h>

#include "genesis/core/error.h"

namespace genesis::python {

namespace {
std::atomic<bool> g_capture{false};
std::atomic<int> g_depth{4};
std::mutex g_prefix_mutex;
std::string g_prefix;  // guarded by g_prefix_mutex

// A site's frames as (code object, instruction offset) pairs, innermost
// first (Note [Site cache]).
struct SiteKey {
  int n = 0;
  std::array<std::uintptr_t, 2 * kMaxSiteDepth> v;  // v[2i], v[2i+1]: frame i's code and offset; i < n
  bool operator==(const SiteKey& o) const {
    return n == o.n && std::equal(v.begin(), v.begin() + 2 * n, o.v.begin());
  }
};
struct SiteKeyHash {
  std::size_t operator()(const SiteKey& k) const noexcept {
    std::uint64_t h = static_cast<std::uint64_t>(k.n);
    for (int i = 0; i < 2 * k.n; ++i) {
      h = (h ^ k.v[static_cast<std::size_t>(i)]) * 0x9E3779B97F4A7C15ull;
      h ^= h >> 29;
    }
    return static_cast<std::size_t>(h);
  }
};

// Both guarded by the GIL; each key of g_in_package holds a reference to its
// code object, and every code object in a g_sites key is one of them.
constexpr std::size_t kMaxCachedCodes = 1 << 16;
constexpr std::size_t kMaxCachedSites = 1 << 16;
std::unordered_map<PyCodeObject*, bool>* g_in_package = new std::unordered_map<PyCodeObject*, bool>();  // leaked: see below
std::unordered_map<SiteKey, const char*, SiteKeyHash>* g_sites = new std::unordered_map<SiteKey, const char*, SiteKeyHash>();
// (Leaked on purpose: destroying them at exit would decref code objects after
// the interpreter is gone.)

std::uint64_t g_generation = 0;  // clear_caches() calls so far

void clear_caches() {
  ++g_generation;
  g_sites->clear();
  for (auto& [code, inside] : *g_in_package) Py_DECREF(reinterpret_cast<PyObject*>(code));
  g_in_package->clear();
}

std::string str_attr(PyObject* obj, const char* name) {
  PyObject* v = PyObject_GetAttrString(obj, name);
  if (v == nullptr) {
    PyErr_Clear();
    return "?";
  }
  std::string out = "?";
  if (PyUnicode_Check(v)) {
    const char* s = PyUnicode_AsUTF8(v);
    if (s != nullptr) out = s;
    else PyErr_Clear();
  }
  Py_DECREF(v);
  return out;
}

bool in_package(PyCodeObject* code) {
  if (auto it = g_in_package->find(code); it != g_in_package->end()) return it->second;
  if (g_in_package->size() >= kMaxCachedCodes) clear_caches();
  std::string prefix;
  {
    std::lock_guard<std::mutex> lock(g_prefix_mutex);
    prefix = g_prefix;
  }
  const std::string file = str_attr(reinterpret_cast<PyObject*>(code), "co_filename");
  const bool inside = !prefix.empty() && file.compare(0, prefix.size(), prefix) == 0;
  Py_INCREF(reinterpret_cast<PyObject*>(code));
  g_in_package->emplace(code, inside);
  return inside;
}

std::uintptr_t frame_offset(PyFrameObject* frame) {
#if PY_VERSION_HEX >= 0x030B0000
  return static_cast<std::uintptr_t>(PyFrame_GetLasti(frame));
#else
  return static_cast<std::uintptr_t>(PyFrame_GetLineNumber(frame));  // slower, as exact
#endif
}

// Frames kept alive while a site is looked up (and described on a miss).
struct FrameList {
  std::array<PyFrameObject*, kMaxSiteDepth> frames{};
  int n = 0;
  FrameList() = default;
  FrameList(const FrameList&) = delete;
  FrameList& operator=(const FrameList&) = delete;
  ~FrameList() {
    for (int i = 0; i < n; ++i) Py_DECREF(frames[static_cast<std::size_t>(i)]);
  }
};

std::string describe(const FrameList& list) {
  std::string out;
  for (int i = 0; i < list.n; ++i) {
    PyFrameObject* frame = list.frames[static_cast<std::size_t>(i)];
    PyCodeObject* code = PyFrame_GetCode(frame);
    if (i > 0) out += '\n';
    out += str_attr(reinterpret_cast<PyObject*>(code), "co_filename");
    out += ':';
    out += std::to_string(PyFrame_GetLineNumber(frame));
    out += " in ";
    out += str_attr(reinterpret_cast<PyObject*>(code), "co_name");
    Py_DECREF(code);
  }
  return out;
}
}  // namespace

void set_capture_locations(bool on) noexcept { g_capture.store(on, std::memory_order_relaxed); }
bool capture_locations() noexcept { return g_capture.load(std::memory_order_relaxed); }

void set_package_prefix(std::string prefix) {
  {
    std::lock_guard<std::mutex> lock(g_prefix_mutex);
    g_prefix = std::move(prefix);
  }
  clear_caches();  // which code is "inside" changed (called from Python: the GIL is held)
}

void set_site_depth(int depth) {
  GENESIS_CHECK(depth >= 1 && depth <= kMaxSiteDepth, "site depth must be between 1 and ", kMaxSiteDepth,
                ", got ", depth);
  g_depth.store(depth, std::memory_order_relaxed);
}

int site_depth() noexcept { return g_depth.load(std::memory_order_relaxed); }

const char* python_caller_site() {
  const int depth = site_depth();
  const std::uint64_t generation = g_generation;
  SiteKey key;
  FrameList kept;
  // PyEval_GetFrame returns a borrowed reference; PyFrame_GetBack and
  // PyFrame_GetCode (3.9+) return new ones.
  PyFrameObject* frame = PyEval_GetFrame();
  Py_XINCREF(frame);
  while (frame != nullptr && kept.n < depth) {
    PyCodeObject* code = PyFrame_GetCode(frame);
    const bool skip = in_package(code);  // the cache holds its own reference
    Py_DECREF(code);
    PyFrameObject* back = PyFrame_GetBack(frame);
    if (skip) {
      Py_DECREF(frame);
    } else {
      key.v[static_cast<std::size_t>(2 * key.n)] = reinterpret_cast<std::uintptr_t>(code);
      key.v[static_cast<std::size_t>(2 * key.n + 1)] = frame_offset(frame);
      ++key.n;
      kept.frames[static_cast<std::size_t>(kept.n++)] = frame;  // released by `kept`
    }
    frame = back;
  }
  Py_XDECREF(frame);
  if (key.n == 0) return nullptr;
  if (auto it = g_sites->find(key); it != g_sites->end()) return it->second;
  if (g_sites->size() >= kMaxCachedSites) g_sites->clear();
  const char* site = memory::intern_location(describe(kept));
  // A clear during the walk dropped the references that keep this key's
  // code objects alive: the key must not outlive the walk then.
  if (generation == g_generation) g_sites->emplace(key, site);
  return site;
}

std::string python_caller_location() {
  const char* site = python_caller_site();
  return site != nullptr ? std::string(site) : std::string();
}

AllocationSite::AllocationSite() {
  if (!capture_locations()) return;
  if (const char* where = python_caller_site(); where != nullptr) scope_.emplace(where);
}

}  // namespace genesis::python
