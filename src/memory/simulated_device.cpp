#include "genesis/memory/simulated_device.h"

#include <algorithm>
#include <cstring>
#include <cstdlib>
#include <string>

#include "genesis/core/error.h"

// Why the base is 0x6000'0000'0000 and not the 0x7e00'0000'0000 first
// suggested: on x86-64 Linux the mmap area (shared libraries, thread stacks,
// large mallocs, CUDA's own reservations) starts just under 0x7fff'ffff'ffff
// minus up to 1 TiB of ASLR offset and grows down, so it can reach
// 0x7exx'xxxx'xxxx in a big process. 0x6000'0000'0000 + 16 TiB is far from
// both that area and the heap (near the executable, 0x55.. / 0x56..), and
// stays inside the 47-bit user space, so code that packs pointers into 48 bits
// still works with simulated addresses.

namespace genesis::memory {

// Note [Simulated mapping costs]: on CUDA, expandable segments pay the
// driver per physical chunk, whatever its size up to tens of MiB: ~7 us to
// create and map it, ~20 us for cuMemSetAccess (per chunk even when one call
// covers many) and ~20 us to unmap and release it (H200, bench/RESULTS.md).
// The simulated device maps for free, which hid how much an allocator that
// maps and unmaps in steady state costs there. With a VmmCost the device
// spins that long per chunk (one map_pages call is one chunk, as in
// CudaDeviceResource) after doing the work, outside its mutex (so a waiting
// thread is not charged twice). Spinning, not sleeping: sleeps of a few
// microseconds overshoot by tens.

namespace {

constexpr std::size_t round_up(std::size_t n, std::size_t multiple) noexcept {
  return (n + multiple - 1) / multiple * multiple;
}

void spin_for(std::chrono::nanoseconds d) noexcept {
  if (d.count() <= 0) return;
  const auto until = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < until) {
  }
}

std::chrono::nanoseconds micros(double us) {
  return std::chrono::nanoseconds(static_cast<std::int64_t>(us * 1000.0 + 0.5));
}

}  // namespace

SimulatedDevice::VmmCost SimulatedDevice::VmmCost::cuda() {
  return VmmCost{micros(7.32), micros(21.74), micros(21.59)};
}

SimulatedDevice::VmmCost SimulatedDevice::VmmCost::parse(std::string_view text) {
  if (text == "none" || text == "0") return VmmCost{};
  if (text == "cuda") return cuda();
  double v[3] = {0, 0, 0};
  std::size_t pos = 0;
  for (int i = 0; i < 3; ++i) {
    const std::size_t end = i < 2 ? text.find(',', pos) : text.size();
    GENESIS_CHECK(end != std::string_view::npos, "vmm cost '", text,
                  "': expected none, cuda, or MAP,SET_ACCESS,UNMAP in microseconds per page");
    const std::string field(text.substr(pos, end - pos));
    char* stop = nullptr;
    v[i] = std::strtod(field.c_str(), &stop);
    GENESIS_CHECK(!field.empty() && stop == field.c_str() + field.size() && v[i] >= 0 && v[i] < 1e6, "vmm cost '",
                  text, "': '", field, "' is not a number of microseconds in [0, 1e6)");
    pos = end + 1;
  }
  return VmmCost{micros(v[0]), micros(v[1]), micros(v[2])};
}

SimulatedDevice::SimulatedDevice(std::size_t capacity_bytes, int index)
    : SimulatedDevice(capacity_bytes, index, VmmCost{}) {}

SimulatedDevice::SimulatedDevice(std::size_t capacity_bytes, int index, VmmCost vmm_cost)
    : capacity_(capacity_bytes),
      index_(index),
      vmm_cost_(vmm_cost),
      base_(kBaseAddress + static_cast<std::uintptr_t>(index) * kAddressSpan) {
  GENESIS_CHECK(capacity_bytes > 0 && capacity_bytes <= kAddressSpan,
                "SimulatedDevice: capacity must be in (0, 1 TiB], got ", capacity_bytes, " bytes");
  GENESIS_CHECK(index >= 0 && index <= kMaxIndex, "SimulatedDevice: index must be in [0, ", kMaxIndex, "], got ",
                index);
  const std::size_t usable = capacity_bytes / kAlignment * kAlignment;
  if (usable > 0) add_free_range(base_, usable);
}

std::string SimulatedDevice::name() const { return "sim:" + std::to_string(index_); }

MemInfo SimulatedDevice::mem_info() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return MemInfo{capacity_ - bytes_in_use_, capacity_};
}

// --- range allocator ---------------------------------------------------------

void SimulatedDevice::add_free_range(std::uintptr_t addr, std::size_t size) {
  // Coalesce with the neighbours so that frees never leave touching ranges.
  auto next = free_by_addr_.lower_bound(addr);
  if (next != free_by_addr_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == addr) {
      addr = prev->first;
      size += prev->second;
      remove_free_range(prev);
    }
  }
  if (next != free_by_addr_.end() && addr + size == next->first) {
    size += next->second;
    remove_free_range(next);
  }
  free_by_addr_.emplace(addr, size);
  free_by_size_.emplace(size, addr);
}

void SimulatedDevice::remove_free_range(std::map<std::uintptr_t, std::size_t>::iterator it) {
  free_by_size_.erase({it->second, it->first});
  free_by_addr_.erase(it);
}

std::uintptr_t SimulatedDevice::take_range(std::size_t size, std::size_t align) {
  // Best fit: ranges in increasing size; the first that still fits after
  // aligning its start is the smallest that fits. For 512-byte alignment the
  // first candidate always fits (every range starts 512-aligned); only 2 MiB
  // alignment may need to look further.
  for (auto it = free_by_size_.lower_bound({size, 0}); it != free_by_size_.end(); ++it) {
    const auto [range_size, range_addr] = *it;
    const std::uintptr_t start = round_up(range_addr, align);
    if (start + size > range_addr + range_size) continue;
    remove_free_range(free_by_addr_.find(range_addr));
    // Whatever is left on either side goes back as free ranges; they cannot
    // touch other free ranges, since the range they came from did not.
    if (start > range_addr) {
      free_by_addr_.emplace(range_addr, start - range_addr);
      free_by_size_.emplace(start - range_addr, range_addr);
    }
    const std::uintptr_t end = start + size;
    const std::uintptr_t range_end = range_addr + range_size;
    if (range_end > end) {
      free_by_addr_.emplace(end, range_end - end);
      free_by_size_.emplace(range_end - end, end);
    }
    return start;
  }
  return 0;
}

void* SimulatedDevice::do_allocate(std::size_t bytes) {
  GENESIS_CHECK(bytes > 0, "SimulatedDevice::allocate: size must be positive");
  std::lock_guard<std::mutex> lock(mutex_);
  if (fail_next_ > 0) {
    --fail_next_;
    ++num_failed_allocs_;
    return nullptr;
  }
  if (bytes > capacity_) {  // also keeps round_up below from overflowing
    ++num_failed_allocs_;
    return nullptr;
  }
  const std::size_t size = round_up(bytes, kAlignment);
  if (size > capacity_ - bytes_in_use_) {
    ++num_failed_allocs_;
    return nullptr;
  }
  const std::size_t align = size >= kLargeAlignment ? kLargeAlignment : kAlignment;
  const std::uintptr_t addr = take_range(size, align);
  if (addr == 0) {  // enough free bytes, but no contiguous range fits
    ++num_failed_allocs_;
    return nullptr;
  }
  live_.emplace(addr, Live{bytes, size});
  bytes_in_use_ += size;
  peak_bytes_in_use_ = std::max(peak_bytes_in_use_, bytes_in_use_);
  ++num_allocs_;
  return reinterpret_cast<void*>(addr);
}

void SimulatedDevice::do_deallocate(void* ptr, std::size_t bytes) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(reinterpret_cast<std::uintptr_t>(ptr));
  if (it == live_.end()) {  // double free, foreign pointer, or nullptr
    ++num_misuses_;
    return;
  }
  // A wrong size is a caller bug, but the block is known: free what was
  // really allocated so that the accounting stays consistent.
  if (bytes != it->second.requested) ++num_misuses_;
  const std::size_t size = it->second.size;
  const std::uintptr_t addr = it->first;
  live_.erase(it);
  bytes_in_use_ -= size;
  ++num_frees_;
  // Re-inserting the range allocates tree nodes; should that fail, the range
  // (and any neighbour it was being merged with) is dropped from the free
  // lists, which only shrinks the simulated device. Better than letting
  // std::bad_alloc escape a noexcept function.
  try {
    add_free_range(addr, size);
  } catch (...) {
  }
}

// --- streams and events ------------------------------------------------------

StreamId SimulatedDevice::create_stream() {
  std::lock_guard<std::mutex> lock(mutex_);
  streams_.emplace_back();
  return streams_.size() - 1;
}

SimulatedDevice::Stream& SimulatedDevice::stream_locked(StreamId stream) {
  GENESIS_CHECK(stream < streams_.size(), name(), ": unknown stream ", stream, " (", streams_.size() - 1,
                " streams created; 0 is the default stream)");
  return streams_[stream];
}

const SimulatedDevice::Stream& SimulatedDevice::stream_locked(StreamId stream) const {
  return const_cast<SimulatedDevice*>(this)->stream_locked(stream);
}

std::uint64_t SimulatedDevice::submit_work(StreamId stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  return ++stream_locked(stream).submitted;
}

void SimulatedDevice::complete_work(StreamId stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  Stream& s = stream_locked(stream);
  s.completed = s.submitted;
}

void SimulatedDevice::synchronize_stream(StreamId stream) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++num_stream_syncs_;
  }
  complete_work(stream);
}

std::size_t SimulatedDevice::num_stream_syncs() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return num_stream_syncs_;
}

void SimulatedDevice::complete_all() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Stream& s : streams_) s.completed = s.submitted;
}

std::uint64_t SimulatedDevice::submitted_work(StreamId stream) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stream_locked(stream).submitted;
}

std::uint64_t SimulatedDevice::completed_work(StreamId stream) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stream_locked(stream).completed;
}

EventId SimulatedDevice::record_event(StreamId stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::uint64_t ticket = stream_locked(stream).submitted;
  const EventId id = next_event_++;
  events_.emplace(id, Event{stream, ticket});
  return id;
}

SimulatedDevice::Event& SimulatedDevice::event_locked(EventId event, const char* what) {
  auto it = events_.find(event);
  GENESIS_CHECK(it != events_.end(), name(), ": ", what, " of event ", event,
                ", which was never recorded or was already released");
  return it->second;
}

bool SimulatedDevice::event_done(EventId event) {
  std::lock_guard<std::mutex> lock(mutex_);
  const Event& e = event_locked(event, "event_done");
  return streams_[e.stream].completed >= e.ticket;
}

void SimulatedDevice::wait_event(EventId event) {
  std::lock_guard<std::mutex> lock(mutex_);
  const Event& e = event_locked(event, "wait_event");
  Stream& s = streams_[e.stream];
  s.completed = std::max(s.completed, e.ticket);
}

void SimulatedDevice::release_event(EventId event) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  if (events_.erase(event) == 0) ++num_misuses_;
}

std::size_t SimulatedDevice::outstanding_events() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return events_.size();
}

// --- virtual memory ----------------------------------------------------------

std::uintptr_t SimulatedDevice::reserve_address_range(std::size_t bytes) {
  if (bytes == 0 || bytes % kPageSize != 0) return 0;
  std::lock_guard<std::mutex> lock(mutex_);
  const std::uintptr_t base = kVirtualBase + static_cast<std::uintptr_t>(index_) * kVirtualSpan;
  if (next_virtual_ == 0) next_virtual_ = base;
  // Bump allocation: address space is plentiful (4 TiB per index) and never
  // reusing it makes stale-pointer bugs show up as misuses.
  if (bytes > base + kVirtualSpan - next_virtual_) return 0;
  const std::uintptr_t addr = next_virtual_;
  next_virtual_ += bytes;
  Range r;
  r.size = bytes;
  // Flags grow as pages are mapped (a device-sized range has up to a million).
  r.mapped.reserve(64);
  ranges_.emplace(addr, std::move(r));
  return addr;
}

SimulatedDevice::Range* SimulatedDevice::range_locked(std::uintptr_t addr, std::size_t bytes, std::uintptr_t* base) {
  auto it = ranges_.upper_bound(addr);
  if (it == ranges_.begin()) return nullptr;
  --it;
  if (addr + bytes > it->first + it->second.size) return nullptr;
  *base = it->first;
  return &it->second;
}

void SimulatedDevice::release_address_range(std::uintptr_t addr, std::size_t bytes) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = ranges_.find(addr);
  if (it == ranges_.end() || it->second.size != bytes) {
    ++num_misuses_;
    return;
  }
  // Pages still mapped inside are a caller bug: count it, then drop them.
  for (std::uint8_t m : it->second.mapped) {
    if (!m) continue;
    ++num_misuses_;
    bytes_in_use_ -= kPageSize;
    mapped_bytes_ -= kPageSize;
  }
  ranges_.erase(it);
}

bool SimulatedDevice::map_pages(std::uintptr_t addr, std::size_t bytes, std::size_t chunk) {
  const bool ok = map_pages_locked(addr, bytes, chunk);
  if (ok) spin_for(static_cast<std::int64_t>(bytes / chunk) * (vmm_cost_.map + vmm_cost_.set_access));
  return ok;
}

bool SimulatedDevice::map_pages_locked(std::uintptr_t addr, std::size_t bytes, std::size_t chunk) {
  std::lock_guard<std::mutex> lock(mutex_);
  GENESIS_CHECK(bytes > 0 && addr % kPageSize == 0 && bytes % kPageSize == 0,
                "SimulatedDevice::map_pages: range must be page aligned (2 MiB), got addr ", addr, " bytes ", bytes);
  GENESIS_CHECK(chunk > 0 && chunk % kPageSize == 0 && bytes % chunk == 0, "SimulatedDevice::map_pages: chunk size ",
                chunk, " must be a multiple of the page size (2 MiB) that divides ", bytes);
  std::uintptr_t base = 0;
  Range* r = range_locked(addr, bytes, &base);
  GENESIS_CHECK(r != nullptr, "SimulatedDevice::map_pages: range is not inside one reserved range");
  const std::size_t first = (addr - base) / kPageSize, n = bytes / kPageSize;
  if (r->mapped.size() < first + n) {
    const std::size_t size = std::max(first + n, 2 * r->mapped.size());
    r->mapped.resize(size, 0);
    r->head.resize(size, 0);
  }
  // One vectorised scan rather than a check per page: the replay maps runs
  // of tens of pages on a fresh allocator.
  GENESIS_CHECK(std::memchr(r->mapped.data() + first, 1, n) == nullptr,
                "SimulatedDevice::map_pages: page already mapped");
  if (fail_next_ > 0) {
    --fail_next_;
    ++num_failed_allocs_;
    return false;
  }
  if (bytes > capacity_ - bytes_in_use_) {
    ++num_failed_allocs_;
    return false;
  }
  std::fill(r->mapped.begin() + static_cast<std::ptrdiff_t>(first),
            r->mapped.begin() + static_cast<std::ptrdiff_t>(first + n), std::uint8_t{1});
  const std::size_t chunk_pages = chunk / kPageSize;
  if (chunk_pages == 1) {
    std::memset(r->head.data() + first, 1, n);
  } else {
    for (std::size_t i = first; i < first + n; i += chunk_pages) r->head[i] = 1;
  }
  num_chunks_mapped_ += n / chunk_pages;
  bytes_in_use_ += bytes;
  mapped_bytes_ += bytes;
  peak_bytes_in_use_ = std::max(peak_bytes_in_use_, bytes_in_use_);
  ++num_map_calls_;
  num_pages_mapped_ += n;
  return true;
}

void SimulatedDevice::unmap_pages(std::uintptr_t addr, std::size_t bytes) noexcept {
  const std::size_t chunks = unmap_pages_locked(addr, bytes);
  spin_for(static_cast<std::int64_t>(chunks) * vmm_cost_.unmap);
}

std::size_t SimulatedDevice::unmap_pages_locked(std::uintptr_t addr, std::size_t bytes) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  ++num_unmap_calls_;
  std::uintptr_t base = 0;
  Range* r = addr % kPageSize == 0 && bytes % kPageSize == 0 ? range_locked(addr, bytes, &base) : nullptr;
  if (r == nullptr) {
    ++num_misuses_;
    return 0;
  }
  const std::size_t first = (addr - base) / kPageSize, n = bytes / kPageSize;
  // Pages past the flags or not mapped are misuses (counted, skipped). The
  // counters are updated once per call, not per page.
  const std::size_t have = first < r->mapped.size() ? std::min(n, r->mapped.size() - first) : 0;
  std::uint8_t* const flags = r->mapped.data() + first;
  std::uint8_t* const heads = r->head.data() + first;
  // A chunk begun below the range or running on past it would be cut.
  if (have > 0 && flags[0] && !heads[0]) ++num_misuses_;
  if (first + have < r->mapped.size() && r->mapped[first + have] && !r->head[first + have]) {
    ++num_misuses_;
    r->head[first + have] = 1;  // the rest of the cut chunk
  }
  const auto unmapped = static_cast<std::size_t>(std::count(flags, flags + have, std::uint8_t{1}));
  auto chunks = static_cast<std::size_t>(std::count(heads, heads + have, std::uint8_t{1}));
  if (have > 0 && flags[0] && !heads[0]) ++chunks;  // the cut piece costs a handle too
  std::fill(flags, flags + have, std::uint8_t{0});
  std::fill(heads, heads + have, std::uint8_t{0});
  num_misuses_ += n - unmapped;
  bytes_in_use_ -= unmapped * kPageSize;
  mapped_bytes_ -= unmapped * kPageSize;
  num_pages_unmapped_ += unmapped;
  num_chunks_unmapped_ += chunks;
  return chunks;
}

std::size_t SimulatedDevice::mapped_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return mapped_bytes_;
}
std::size_t SimulatedDevice::num_map_calls() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return num_map_calls_;
}
std::size_t SimulatedDevice::num_unmap_calls() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return num_unmap_calls_;
}
std::size_t SimulatedDevice::num_pages_mapped() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return num_pages_mapped_;
}
std::size_t SimulatedDevice::num_pages_unmapped() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return num_pages_unmapped_;
}
std::size_t SimulatedDevice::num_chunks_mapped() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return num_chunks_mapped_;
}
std::size_t SimulatedDevice::num_chunks_unmapped() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return num_chunks_unmapped_;
}
std::size_t SimulatedDevice::num_reserved_ranges() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ranges_.size();
}

// --- failure injection and counters -----------------------------------------

void SimulatedDevice::fail_next_allocations(std::size_t n) {
  std::lock_guard<std::mutex> lock(mutex_);
  fail_next_ = n;
}

std::size_t SimulatedDevice::num_allocs() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return num_allocs_;
}

std::size_t SimulatedDevice::num_frees() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return num_frees_;
}

std::size_t SimulatedDevice::num_failed_allocs() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return num_failed_allocs_;
}

std::size_t SimulatedDevice::bytes_in_use() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_in_use_;
}

std::size_t SimulatedDevice::peak_bytes_in_use() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return peak_bytes_in_use_;
}

void SimulatedDevice::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  peak_bytes_in_use_ = bytes_in_use_;
}

std::size_t SimulatedDevice::num_live_allocations() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return live_.size();
}

std::size_t SimulatedDevice::largest_free_range() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return free_by_size_.empty() ? 0 : free_by_size_.rbegin()->first;
}

std::size_t SimulatedDevice::num_free_ranges() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return free_by_addr_.size();
}

std::size_t SimulatedDevice::num_misuses() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return num_misuses_;
}

bool SimulatedDevice::owns(const void* ptr) const noexcept {
  const auto p = reinterpret_cast<std::uintptr_t>(ptr);
  return p >= base_ && p - base_ < capacity_;
}

}  // namespace genesis::memory
