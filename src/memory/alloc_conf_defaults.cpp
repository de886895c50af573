// The configuration of the process-wide GPU allocators: GENESIS_ALLOC_CONF
// plus what the front ends add (Note [Allocator configuration] in
// genesis/memory/alloc_conf.h).
//
// Lock order: this file's mutex, then the allocator registry's (through
// existing_allocators()). cuda_allocator() asks for its options before it
// takes the registry's lock, so the two never nest the other way.
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "genesis/core/error.h"
#include "genesis/memory/alloc_conf.h"
#include "genesis/memory/cuda_resource.h"
#include "genesis/memory/device_allocators.h"

namespace genesis::memory {

namespace {

struct Conf {
  std::mutex mutex;
  bool env_read = false;           // GENESIS_ALLOC_CONF parsed without error
  AllocatorOptions options;        // the environment's text, then each added one, parsed
  std::set<std::string> given;     // keys the environment or configure_cuda_allocators set
};

// Leaked, like the allocator registry: allocators may be made during exit.
Conf& conf() {
  static auto* c = new Conf;
  return *c;
}

// A malformed environment is reported at every use until it is fixed, not
// once: env_read stays false when parsing throws.
void read_environment_locked(Conf& c) {
  if (c.env_read) return;
  const char* v = std::getenv("GENESIS_ALLOC_CONF");
  const std::string text = v != nullptr ? v : "";
  std::vector<std::string> keys;
  c.options = parse_alloc_conf(text, AllocatorOptions{}, "GENESIS_ALLOC_CONF", &keys);
  c.given.insert(keys.begin(), keys.end());
  c.env_read = true;
}

// key -> value of the options fixed when an allocator is made (everything but
// memory_fraction and the cache cap, which set_memory_fraction and
// set_cache_size change later).
std::map<std::string, std::string> fixed_options(AllocatorOptions o) {
  const AllocatorOptions d;
  o.memory_fraction = d.memory_fraction;
  o.cache_size_limit = d.cache_size_limit;
  std::map<std::string, std::string> out;
  const std::string text = format_alloc_conf(o);
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(start, end - start);
    const std::size_t colon = item.find(':');
    out[item.substr(0, colon)] = item.substr(colon + 1);
    start = end + 1;
  }
  return out;
}

bool is_cuda_id(const std::string& id) {
  return !id.empty() && id.find_first_not_of("0123456789") == std::string::npos;
}

// The process-wide GPU allocators that exist: (device id, allocator).
std::vector<std::pair<std::string, CachingAllocator*>> live_cuda_allocators() {
  std::vector<std::pair<std::string, CachingAllocator*>> live;
  for (auto& [id, a] : existing_allocators())
    if (is_cuda_id(id)) live.emplace_back(id, a);
  return live;
}

}  // namespace

AllocatorOptions cuda_allocator_options() {
  Conf& c = conf();
  std::lock_guard<std::mutex> lock(c.mutex);
  read_environment_locked(c);
  return c.options;
}

std::string cuda_alloc_conf() {
  Conf& c = conf();
  std::lock_guard<std::mutex> lock(c.mutex);
  read_environment_locked(c);
  return format_alloc_conf(c.options);
}

void configure_cuda_allocators(std::string_view text, std::string_view source) {
  Conf& c = conf();
  std::lock_guard<std::mutex> lock(c.mutex);
  read_environment_locked(c);
  std::vector<std::string> keys;
  const AllocatorOptions next = parse_alloc_conf(text, c.options, source, &keys);
  const auto live = live_cuda_allocators();
  // Check every allocator before changing any.
  const auto wanted = fixed_options(next);
  for (const auto& [id, a] : live) {
    const auto have = fixed_options(a->options());
    for (const char* side : {"wanted", "have"}) {
      const auto& from = side[0] == 'w' ? wanted : have;
      for (const auto& [key, value] : from) {
        const auto& other = side[0] == 'w' ? have : wanted;
        const auto it = other.find(key);
        if (it != other.end() && it->second == value) continue;
        const std::string now = side[0] == 'w' ? (it == other.end() ? "the default" : it->second) : value;
        const std::string asked = side[0] == 'w' ? value : (it == other.end() ? "the default" : it->second);
        GENESIS_THROW(InvalidArgumentError, source, ": the allocator of cuda:", id, " exists already with ", key,
                      " = ", now, ", which cannot change while it lives (asked for ", asked,
                      "); configure Genesis before the first GPU allocation (or set GENESIS_ALLOC_CONF)");
      }
    }
  }
  for (const std::string& key : keys) {
    for (const auto& [id, a] : live) {
      if (key == "memory_fraction") a->set_memory_fraction(next.memory_fraction);
      if (key == "cache_size" || key == "max_cached_bytes") a->set_cache_size(next.cache_size_limit);
    }
  }
  c.options = next;
  c.given.insert(keys.begin(), keys.end());
}

// Note [Front-end defaults]: the library's own defaults suit a program that
// calls Genesis directly, where a round trip of tens of nanoseconds is what
// is measured: on CUDA, classic segments and the thread cache, because every
// physical mapping of expandable segments costs the driver tens of
// microseconds (Note [Physical chunks]). A framework's allocation sits
// behind an operator call of several microseconds and a job that is judged
// by the memory it needs and its step rate: there expandable segments
// reserve 1.01-1.02 of the peak a job asks for, against 1.05-1.57 with
// classic segments, at the step rate of PyTorch's own allocator on the real
// jobs measured (bench/RESULTS.md, "Genesis as PyTorch's allocator"). So the
// PyTorch and CuPy adaptors prefer expandable segments. A preference is
// weaker than a choice: it fills only the keys the user left alone, and it
// changes nothing once a process-wide GPU allocator exists (made by another
// front end first, whose options are fixed), rather than fail; nor on a
// device that cannot map pages, where asking for expandable segments is an
// error (prefer_framework_allocator_defaults).
bool prefer_cuda_allocator_defaults(std::string_view text, std::string_view source) {
  Conf& c = conf();
  std::lock_guard<std::mutex> lock(c.mutex);
  read_environment_locked(c);
  const AllocatorOptions wanted = parse_alloc_conf(text, AllocatorOptions{}, source);
  if (!live_cuda_allocators().empty()) return false;
  // The text's items (fixed_options lists only what differs from the
  // library's defaults) for the keys the user did not give, on top of the
  // current options.
  std::string fill;
  for (const auto& [key, value] : fixed_options(wanted))
    if (c.given.count(key) == 0) fill += (fill.empty() ? "" : ",") + key + ":" + value;
  c.options = parse_alloc_conf(fill, c.options, source);
  return true;
}

bool prefer_framework_allocator_defaults(int device, std::string_view source) {
  if (!CudaDeviceResource::maps_pages(device)) return false;
  return prefer_cuda_allocator_defaults(kFrameworkAllocDefaults, source);
}

}  // namespace genesis::memory
