// machine_probe: how fast this machine's CPU runs the kinds of work the
// allocator's CPU-side benchmarks are made of, so that allocator figures
// from different machines (the dev box, the GPU machines, the machine the
// reference figures were measured on) can be told apart from changes in Genesis.
//
//   build/machine_probe        (pin it: taskset -c N build/machine_probe)
//
// Prints: a dependent 64-bit multiply-add chain (core clock), four
// independent chains (issue width), a pointer chase through 16 KiB .. 64 MiB
// (L1, L2, L3 and DRAM latency; 4 KiB pages and transparent huge pages), the
// cost of clock_gettime (coarse and precise) and of an uncontended mutex.
// Measured on the dev box and an H100 machine: bench/HISTORY.md, "The GPU
// machine's CPU, measured".
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <ctime>
#include <mutex>
#include <vector>
#include <numeric>
#include <random>
#include <algorithm>
#include <sys/mman.h>
static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
int main() {
  // ALU: dependent multiply-add chain
  { volatile std::uint64_t seed = 1; std::uint64_t x = seed; const long n = 200000000; double t = now();
    for (long i = 0; i < n; ++i) x = x * 6364136223846793005ull + 1442695040888963407ull;
    double dt = now() - t; std::printf("alu chain: %.3f ns/op (x=%llu)\n", dt / n * 1e9, (unsigned long long)x); }
  // independent ops throughput: 4 chains
  { std::uint64_t a=1,b=2,c=3,d=4; const long n = 200000000; double t = now();
    for (long i = 0; i < n; ++i) { a = a*3+1; b = b*5+1; c = c*7+1; d = d*9+1; }
    double dt = now() - t; std::printf("alu 4 chains: %.3f ns/iter (%llu)\n", dt / n * 1e9, (unsigned long long)(a^b^c^d)); }
  for (std::size_t kb : {16, 256, 1024, 4096, 65536}) {
    for (int huge = 0; huge < 2; ++huge) {
    std::size_t n = kb * 1024 / 8;
    std::uint64_t* v = static_cast<std::uint64_t*>(aligned_alloc(2 << 20, std::max<std::size_t>(n * 8, 2 << 20)));
    madvise(v, n * 8, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    std::vector<std::uint64_t> perm(n); std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin() + 1, perm.end(), std::mt19937_64(1));
    for (std::size_t i = 0; i < n; ++i) v[perm[i]] = perm[(i + 1) % n];
    std::uint64_t p = 0; const long iters = 20000000; double t = now();
    for (long i = 0; i < iters; ++i) p = v[p];
    double dt = now() - t; std::printf("chase %6zu KiB %s: %.2f ns/load (%llu)\n", kb, huge ? "thp  " : "4k   ", dt / iters * 1e9, (unsigned long long)p);
    free(v); }
  }
  { timespec ts; const long n = 5000000; double t = now(); std::uint64_t s = 0;
    for (long i = 0; i < n; ++i) { clock_gettime(CLOCK_MONOTONIC_COARSE, &ts); s += ts.tv_nsec; }
    std::printf("clock_gettime coarse: %.2f ns\n", (now() - t) / n * 1e9 + 0 * s);
    t = now(); for (long i = 0; i < n; ++i) { clock_gettime(CLOCK_MONOTONIC, &ts); s += ts.tv_nsec; }
    std::printf("clock_gettime monotonic: %.2f ns (%llu)\n", (now() - t) / n * 1e9, (unsigned long long)s); }
  { std::mutex m; const long n = 20000000; double t = now();
    for (long i = 0; i < n; ++i) { m.lock(); m.unlock(); }
    std::printf("mutex lock+unlock: %.2f ns\n", (now() - t) / n * 1e9); }
  std::FILE* f = std::fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
  if (f) { char buf[200] = {}; std::fgets(buf, sizeof buf, f); std::printf("thp: %s", buf); std::fclose(f); }
  f = std::fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
  if (f) { char buf[200] = {}; std::fgets(buf, sizeof buf, f); std::printf("clocksource: %s", buf); std::fclose(f); }
}
