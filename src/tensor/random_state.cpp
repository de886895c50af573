// Per-device random generator state (random_state.h).
#include "random_state.h"

#include <mutex>
#include <unordered_map>

#include "genesis/tensor/creation.h"

namespace genesis {
namespace {

constexpr std::uint64_t kDefaultSeed = 67280421310721ull;

struct Generators {
  std::mutex mu;
  std::uint64_t seed = kDefaultSeed;
  std::unordered_map<Device, std::uint64_t> offsets;
};

Generators& generators() {
  static Generators g;
  return g;
}

}  // namespace

namespace detail {
void reserve_random(Device device, std::uint64_t count, std::uint64_t& seed, std::uint64_t& offset) {
  auto& g = generators();
  std::lock_guard<std::mutex> lock(g.mu);
  seed = g.seed;
  std::uint64_t& o = g.offsets[device];
  offset = o;
  o += count;
}
}  // namespace detail

void manual_seed(std::uint64_t seed) {
  auto& g = generators();
  std::lock_guard<std::mutex> lock(g.mu);
  g.seed = seed;
  g.offsets.clear();
}

std::uint64_t initial_seed() {
  auto& g = generators();
  std::lock_guard<std::mutex> lock(g.mu);
  return g.seed;
}

}  // namespace genesis
