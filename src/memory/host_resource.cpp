#include "genesis/memory/host_resource.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "genesis/core/error.h"

// Note [Host mmap]: requests of 2 MiB and more bypass the C heap and are
// mapped with mmap(MAP_PRIVATE | MAP_ANONYMOUS). Reasons:
//  - munmap gives the pages back to the OS at once. glibc would also mmap a
//    large block, but its threshold is dynamic: after the first free of a
//    mapped block it rises (up to 32 MiB), later blocks come from the heap
//    and free() keeps them there, so "releasing" a cached segment would not
//    lower the process's footprint.
//  - Pages are zero-filled on first touch, so a large reservation costs
//    nothing until used, and a fresh mapping is page aligned (>= 512).
// The price is a system call per allocation, which is fine here: the caching
// allocator above calls its upstream rarely. Smaller requests stay on the C
// heap, where a system call per block would dominate.

namespace genesis::memory {

namespace {

constexpr std::size_t round_up(std::size_t n, std::size_t multiple) noexcept {
  return (n + multiple - 1) / multiple * multiple;
}

std::size_t page_size() noexcept {
  static const std::size_t size = [] {
    long p = ::sysconf(_SC_PAGESIZE);
    return p > 0 ? static_cast<std::size_t>(p) : std::size_t{4096};
  }();
  return size;
}

// Reads MemAvailable and MemTotal ("Key:   123 kB") from /proc/meminfo;
// false unless both were found.
bool read_meminfo(std::size_t& available, std::size_t& total) noexcept {
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (f == nullptr) return false;
  char line[256];
  bool have_available = false;
  bool have_total = false;
  while (std::fgets(line, sizeof line, f) != nullptr && !(have_available && have_total)) {
    unsigned long long kib = 0;
    if (std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1) {
      available = static_cast<std::size_t>(kib) * 1024;
      have_available = true;
    } else if (std::sscanf(line, "MemTotal: %llu kB", &kib) == 1) {
      total = static_cast<std::size_t>(kib) * 1024;
      have_total = true;
    }
  }
  std::fclose(f);
  return have_available && have_total;
}

}  // namespace

namespace detail {

MemInfo host_mem_info() noexcept {
  MemInfo info;
  if (read_meminfo(info.free_bytes, info.total_bytes)) return info;
  // No /proc (or an old kernel without MemAvailable): free pages undercount
  // what could be reclaimed from the page cache, but it is the best we have.
  long pages = ::sysconf(_SC_PHYS_PAGES);
  long avail = ::sysconf(_SC_AVPHYS_PAGES);
  info.total_bytes = pages > 0 ? static_cast<std::size_t>(pages) * page_size() : 0;
  info.free_bytes = avail > 0 ? static_cast<std::size_t>(avail) * page_size() : 0;
  return info;
}

}  // namespace detail

MemInfo HostResource::mem_info() const {
  MemInfo info = detail::host_mem_info();
  if (capacity_limit_ != 0) {
    const std::size_t used = bytes_in_use();
    const std::size_t left = capacity_limit_ > used ? capacity_limit_ - used : 0;
    // total_bytes == 0 means the system could not be asked: the limit is all we know.
    const bool known = info.total_bytes != 0;
    info.total_bytes = known ? std::min(info.total_bytes, capacity_limit_) : capacity_limit_;
    info.free_bytes = known ? std::min(info.free_bytes, left) : left;
  }
  return info;
}

void* HostResource::do_allocate(std::size_t bytes) {
  GENESIS_CHECK(bytes > 0, "HostResource::allocate: size must be positive");
  if (capacity_limit_ != 0) {
    // Reserve the bytes first so that concurrent callers cannot overshoot.
    std::size_t used = in_use_.load(std::memory_order_relaxed);
    do {
      if (bytes > capacity_limit_ || used > capacity_limit_ - bytes) return nullptr;
    } while (!in_use_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
  } else {
    in_use_.fetch_add(bytes, std::memory_order_relaxed);
  }

  void* ptr = nullptr;
  if (bytes >= kMmapThreshold) {
    void* p = ::mmap(nullptr, round_up(bytes, page_size()), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                     -1, 0);
    ptr = p == MAP_FAILED ? nullptr : p;
  } else {
    // aligned_alloc wants a size that is a multiple of the alignment.
    ptr = std::aligned_alloc(kAlignment, round_up(bytes, kAlignment));
  }
  if (ptr == nullptr) in_use_.fetch_sub(bytes, std::memory_order_relaxed);
  return ptr;
}

void HostResource::do_deallocate(void* ptr, std::size_t bytes) noexcept {
  if (ptr == nullptr) return;
  // The size decides the path: the interface guarantees the same size as at
  // allocation, so the two paths can never be mixed up.
  if (bytes >= kMmapThreshold) {
    ::munmap(ptr, round_up(bytes, page_size()));
  } else {
    std::free(ptr);
  }
  in_use_.fetch_sub(bytes, std::memory_order_relaxed);
}

}  // namespace genesis::memory
