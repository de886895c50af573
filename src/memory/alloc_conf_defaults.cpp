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
#include <string>
#include <vector>

#include "genesis/core/error.h"
#include "genesis/memory/alloc_conf.h"
#include "genesis/memory/device_allocators.h"

namespace genesis::memory {

namespace {

struct Conf {
  std::mutex mutex;
  bool env_read = false;           // GENESIS_ALLOC_CONF parsed without error
  AllocatorOptions options;        // the environment's text, then each added one, parsed
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
  c.options = parse_alloc_conf(text, AllocatorOptions{}, "GENESIS_ALLOC_CONF");
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
  std::vector<std::pair<std::string, CachingAllocator*>> live;
  for (auto& [id, a] : existing_allocators())
    if (is_cuda_id(id)) live.emplace_back(id, a);
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
}

}  // namespace genesis::memory
