// Instructions per allocator operation, for a profiler to count.
//
// Timings on a shared 2-core box and on the GPU machines move by 10-50%
// between minutes (bench/HISTORY.md, "The GPU machines' CPUs today"), more
// than most allocator changes. Instruction counts do not: this program runs a
// fixed number of alloc+free pairs of one pattern with no timing and no
// calibration, so that a run under cachegrind with N pairs and one with 2N
// pairs differ by exactly N pairs' instructions. bench/alloc_icount.sh does
// that for the hot pair, the `mixed` pattern and the GPT-2 replay.
//
//   alloc_icount hot SIZE PAIRS [sim]   SIZE bytes allocated and freed PAIRS times
//   alloc_icount mixed PAIRS [sim]      bench_common.h's `mixed` sequence
// (host upstream by default; `sim`: the simulated device, expandable segments).
// GENESIS_ALLOC_CONF, when set, gives the allocator's options (the same text
// as for the GPU allocators), so that configurations compare by instructions.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "bench_common.h"
#include "genesis/memory/alloc_conf.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/host_resource.h"
#include "genesis/memory/simulated_device.h"

namespace gb = genesis_bench;
using genesis::memory::CachingAllocator;

namespace {

int usage() {
  std::fprintf(stderr, "usage: alloc_icount hot SIZE PAIRS [sim] | alloc_icount mixed PAIRS [sim]\n");
  return 2;
}

// Whole decimal number, or -1.
long long parse(const char* s) {
  char* end = nullptr;
  const long long v = std::strtoll(s, &end, 10);
  return (end == s || *end != '\0' || v < 0) ? -1 : v;
}

// The loops live in functions of their own, like the benchmark's pattern
// templates: inside main() gcc allocated registers differently and the same
// hot pair counted 285 instructions instead of 233.
[[gnu::noinline]] void hot_loop(CachingAllocator& alloc, std::size_t size, long long pairs) {
  for (long long i = 0; i < pairs; ++i) {
    void* p = alloc.allocate(size);
    gb::keep(p);
    alloc.deallocate(p);
  }
}

[[gnu::noinline]] void mixed_loop(CachingAllocator& alloc, const gb::MixedSequence& seq, void** live, std::size_t& j,
                                  long long pairs) {
  for (long long k = 0; k < pairs; ++k) {
    const std::uint8_t s = seq.slot[j];
    alloc.deallocate(live[s]);
    live[s] = alloc.allocate(seq.size[j]);
    if (++j == seq.size.size()) j = 0;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return usage();
  const std::string pattern = argv[1];
  const bool hot = pattern == "hot";
  if (!hot && pattern != "mixed") return usage();
  const int nargs = hot ? 4 : 3;
  if (argc < nargs || argc > nargs + 1) return usage();
  const long long size = hot ? parse(argv[2]) : 0;
  const long long pairs = parse(argv[nargs - 1]);
  const bool sim = argc == nargs + 1 && std::string(argv[nargs]) == "sim";
  if (pairs < 0 || size < 0 || (argc == nargs + 1 && !sim)) return usage();

  std::shared_ptr<genesis::memory::UpstreamResource> upstream;
  if (sim) {
    upstream = std::make_shared<genesis::memory::SimulatedDevice>(std::size_t{80} << 30, 0);
  } else {
    upstream = std::make_shared<genesis::memory::HostResource>();
  }
  const char* conf = std::getenv("GENESIS_ALLOC_CONF");
  CachingAllocator alloc(upstream, conf != nullptr ? genesis::memory::parse_alloc_conf(conf, {}, "GENESIS_ALLOC_CONF")
                                                   : genesis::memory::AllocatorOptions{});
  if (hot) {
    hot_loop(alloc, static_cast<std::size_t>(size), pairs);
    return 0;
  }
  // The same warm-up for every PAIRS (a quarter of the sequence), so that the
  // difference of two runs is PAIRS' steady state.
  const gb::MixedSequence seq = gb::MixedSequence::make(gb::kMixedSeed);
  void* live[gb::kMixedLive];
  for (int i = 0; i < gb::kMixedLive; ++i) live[i] = alloc.allocate(seq.initial[i]);
  std::size_t j = 0;
  mixed_loop(alloc, seq, live, j, static_cast<long long>(seq.size.size() / 4));
  mixed_loop(alloc, seq, live, j, pairs);
  for (void* p : live) alloc.deallocate(p);
  return 0;
}
