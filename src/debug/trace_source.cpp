// The trace source: a recorded trace replayed through a CachingAllocator on
// a simulated GPU, on the trace's own clock (Note [Memory sources]).
//
// Note [Trace source clock]: trace time starts at 0 with the first event:
// an event's time is (time_us - the first event's time_us) * 1000 ns, clamped
// so that it never goes back (Note [Trace times and sites] in trace.h); a
// trace without time stamps advances 1 us per event. advance_to(t) replays
// every event with time <= t. At a speed > 0 it paces itself against the
// steady clock, anchored at its first call: trace time T is reached at wall
// time anchor + T / speed, so events whose wall time has passed are replayed
// in one batch and the source sleeps (in slices of at most 50 ms, looking at
// the stop flag) until the next one is due. At speed 0 ("max") it never
// sleeps. The source's mutex is held while replaying, never while sleeping,
// so sample() from another thread waits at most for one batch.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <memory>
#include <mutex>
#include <sstream>

#include "genesis/core/error.h"
#include "genesis/debug/memory_source.h"
#include "genesis/debug/replay.h"
#include "genesis/memory/caching_allocator.h"
#include "genesis/memory/simulated_device.h"
#include "source_util.h"

namespace genesis::debug {

namespace {

// Events kept for events(): the newest ones (64 MiB of MemoryEvents).
constexpr std::size_t kMaxKeptEvents = std::size_t{1} << 20;
// At speed max, the stop flag is looked at every this many events.
constexpr std::size_t kStopCheckEvents = 4096;

std::string base_name(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

class TraceSource final : public MemorySource {
 public:
  TraceSource(Trace trace, const TraceSourceOptions& options) : trace_(std::move(trace)), speed_(options.speed) {
    GENESIS_CHECK(std::isfinite(speed_) && speed_ >= 0, "trace source: speed must be 0 (max) or positive, got ",
                  speed_);
    check_trace(trace_);
    const ReplayConfig config = make_replay_config(options.config, ReplayDevice::kSimulated, options.capacity);
    config_name_ = config.name;
    capacity_ = config.capacity != 0 ? config.capacity : default_simulated_capacity(trace_);
    GENESIS_CHECK(capacity_ <= memory::SimulatedDevice::kAddressSpan,
                  "the simulated device holds at most 1 TiB, got ", genesis::detail::format_bytes(capacity_),
                  " (--capacity)");
    device_ = std::make_shared<memory::SimulatedDevice>(capacity_, 0, config.sim_vmm_cost);
    for (const StreamId s : trace_.streams) streams_.push_back(s == 0 ? 0 : device_->create_stream());
    memory::AllocatorOptions alloc_options = config.options;
    alloc_options.record_events = false;  // the source keeps its own, in trace time
    alloc_ = std::make_unique<memory::CachingAllocator>(device_, alloc_options);
    peaks_.from_zero();
    slots_.assign(trace_.num_slots, nullptr);
    has_sites_ = !trace_.event_site.empty();
    if (has_sites_) {
      site_names_.assign(std::max<std::size_t>(trace_.sites.size(), 1), nullptr);
      for (std::size_t i = 1; i < trace_.sites.size(); ++i) {
        if (!trace_.sites[i].empty()) site_names_[i] = memory::intern_location(trace_.sites[i]);
      }
    }
    if (!trace_.time_us.empty()) first_us_ = trace_.time_us.front();
    devices_.push_back(SourceDevice{"0", device_->name() + " (trace " + base_name(trace_.source) + ")", capacity_});
  }

  ~TraceSource() override {
    // Give back what the trace still holds, before the allocator goes.
    for (void*& p : slots_) {
      if (p == nullptr) continue;
      try {
        alloc_->deallocate(p);
      } catch (...) {
        // Nothing sensible to do in a destructor; the allocator frees its segments anyway.
      }
      p = nullptr;
    }
  }

  std::string describe() const override {
    std::ostringstream os;
    os << "trace " << trace_.source << " at ";
    if (speed_ > 0) {
      os << speed_ << "x";
    } else {
      os << "max speed";
    }
    if (config_name_ != "genesis") os << ", config " << config_name_;
    if (trace_.time_us.empty() && !trace_.events.empty()) os << " (no time stamps: 1 us per event)";
    return os.str();
  }

  std::vector<SourceDevice> devices() const override { return devices_; }

  MemorySample sample(const std::string& device) override {
    check_device(device);
    std::lock_guard<std::mutex> lock(mutex_);
    MemorySample s;
    s.time_ns = now_.load(std::memory_order_relaxed);
    source_util::fill_from_stats(s, alloc_->stats(), peaks_);
    s.free_blocks = source_util::count_free_blocks(alloc_->snapshot());
    s.total = capacity_;
    source_util::set_free(s);
    return s;
  }

  bool has_sites() const override { return has_sites_; }

  std::vector<SiteStat> sites(const std::string& device) override {
    check_device(device);
    if (!has_sites_) return {};
    std::lock_guard<std::mutex> lock(mutex_);
    return source_util::sites_of(alloc_->large_allocations(0));
  }

  std::uint64_t now_ns() const override { return now_.load(std::memory_order_relaxed); }

  bool advance_to(std::uint64_t time_ns, const StopFlag& stop) override {
    std::unique_lock<std::mutex> lock(mutex_);
    const std::size_t n = trace_.events.size();
    if (speed_ > 0 && !anchored_) {
      anchored_ = true;
      anchor_ns_ = static_cast<double>(source_util::steady_now_ns()) -
                   static_cast<double>(now_.load(std::memory_order_relaxed)) / speed_;
    }
    while (true) {
      if (stop.load(std::memory_order_relaxed)) return false;
      if (next_ == n) return finish_locked();
      // How far the trace may go now: to `time_ns`, or at a speed, to the
      // trace time the wall clock has reached (Note [Trace source clock]).
      std::uint64_t reach = time_ns;
      if (speed_ > 0) reach = std::min(reach, wall_to_trace(source_util::steady_now_ns()));
      std::size_t done = 0;
      while (next_ < n && event_time(next_) <= reach) {
        replay_one(next_++);
        if (++done % kStopCheckEvents == 0 && stop.load(std::memory_order_relaxed)) {
          set_now(floor_ns_);
          return false;
        }
      }
      if (next_ == n) return finish_locked();
      set_now(reach);
      if (reach >= time_ns) return true;
      // Paced: sleep until the next event (or `time_ns`) is due.
      const std::uint64_t goal = std::min(time_ns, event_time(next_));
      const double wall_goal = anchor_ns_ + static_cast<double>(goal) / speed_;
      const double wall_now = static_cast<double>(source_util::steady_now_ns());
      lock.unlock();
      if (wall_goal > wall_now) source_util::sleep_ns(static_cast<std::uint64_t>(wall_goal - wall_now) + 1);
      lock.lock();
    }
  }

  std::uint64_t idle_until_ns() const override {
    if (speed_ > 0) return 0;  // paced: the wall clock decides, not the gap
    std::lock_guard<std::mutex> lock(mutex_);
    return next_ < trace_.events.size() ? event_time(next_) : 0;
  }

  bool ended() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return next_ == trace_.events.size();
  }

  std::string end_reason() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (next_ != trace_.events.size()) return {};
    std::ostringstream os;
    os << "trace finished (" << trace_.events.size() << " events";
    if (ooms_ > 0) os << ", " << ooms_ << " allocations out of memory";
    os << ")";
    return os.str();
  }

  std::vector<memory::MemoryEvent> events(const std::string& device) override {
    check_device(device);
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<memory::MemoryEvent> out;
    out.reserve(kept_.size());
    out.insert(out.end(), kept_.begin() + static_cast<std::ptrdiff_t>(kept_head_), kept_.end());
    out.insert(out.end(), kept_.begin(), kept_.begin() + static_cast<std::ptrdiff_t>(kept_head_));
    return out;
  }

 private:
  void check_device(const std::string& device) const {
    if (device != "0") source_util::throw_unknown_device(device, describe(), devices_);
  }

  // The event's trace time, clamped to never go back (Note [Trace source clock]).
  std::uint64_t event_time(std::size_t i) const noexcept {
    std::uint64_t raw;
    if (trace_.time_us.empty()) {
      raw = static_cast<std::uint64_t>(i) * 1000;
    } else {
      const std::uint64_t us = trace_.time_us[i] > first_us_ ? trace_.time_us[i] - first_us_ : 0;
      raw = us > std::numeric_limits<std::uint64_t>::max() / 1000 ? std::numeric_limits<std::uint64_t>::max()
                                                                   : us * 1000;
    }
    return std::max(raw, floor_ns_);
  }

  std::uint64_t wall_to_trace(std::uint64_t wall_ns) const noexcept {
    const double t = (static_cast<double>(wall_ns) - anchor_ns_) * speed_;
    if (t <= 0) return 0;
    if (t >= 1.8e19) return std::numeric_limits<std::uint64_t>::max();
    return static_cast<std::uint64_t>(t);
  }

  void set_now(std::uint64_t t) noexcept {
    if (t > now_.load(std::memory_order_relaxed)) now_.store(t, std::memory_order_relaxed);
  }

  // The trace has no events left: the clock stops at the last one.
  bool finish_locked() noexcept {
    set_now(floor_ns_);
    return false;
  }

  void replay_one(std::size_t i) {
    const TraceEvent& e = trace_.events[i];
    const std::uint64_t t = event_time(i);
    floor_ns_ = t;
    if (e.op == TraceOp::kEmptyCache) {
      alloc_->empty_cache();  // Note [Released caches]; the segments it frees are in the statistics
      return;
    }
    memory::MemoryEvent rec;
    rec.time_ns = t;
    rec.size = e.size;
    rec.block_size = memory::detail::round_size(e.size);
    rec.stream = trace_.streams[e.stream];
    if (e.op == TraceOp::kAlloc) {
      void* p = nullptr;
      try {
        if (has_sites_) {
          memory::ScopedAllocationContext context(site_names_[trace_.event_site[i]]);
          p = alloc_->allocate(e.size, streams_[e.stream]);
        } else {
          p = alloc_->allocate(e.size, streams_[e.stream]);
        }
        rec.action = memory::EventAction::kAlloc;
      } catch (const OutOfMemoryError&) {
        ++ooms_;  // counted, and the trace goes on; its free is a no-op
        rec.action = memory::EventAction::kOOM;
      }
      slots_[e.slot] = p;
      rec.address = reinterpret_cast<std::uintptr_t>(p);
      keep(rec);
      return;
    }
    void* p = slots_[e.slot];
    if (p == nullptr) return;  // unknown free, or the allocation failed
    slots_[e.slot] = nullptr;
    alloc_->deallocate(p);
    rec.action = memory::EventAction::kFree;
    rec.address = reinterpret_cast<std::uintptr_t>(p);
    keep(rec);
  }

  void keep(const memory::MemoryEvent& e) {
    if (kept_.size() < kMaxKeptEvents) {
      kept_.push_back(e);
      return;
    }
    kept_[kept_head_] = e;  // the oldest goes
    kept_head_ = (kept_head_ + 1) % kMaxKeptEvents;
  }

  mutable std::mutex mutex_;  // everything below but now_
  Trace trace_;
  double speed_;
  std::string config_name_;
  std::size_t capacity_ = 0;
  std::shared_ptr<memory::SimulatedDevice> device_;
  std::vector<StreamId> streams_;  // the simulated device's stream of each trace stream
  std::unique_ptr<memory::CachingAllocator> alloc_;
  std::vector<void*> slots_;
  bool has_sites_ = false;
  std::vector<const char*> site_names_;  // interned Trace::sites (nullptr: none)
  std::vector<SourceDevice> devices_;
  std::uint64_t first_us_ = 0;
  std::size_t next_ = 0;          // the next event to replay
  std::uint64_t floor_ns_ = 0;    // the time of the last event replayed
  std::atomic<std::uint64_t> now_{0};
  bool anchored_ = false;
  double anchor_ns_ = 0;          // steady-clock time of trace time 0 (paced)
  std::uint64_t ooms_ = 0;
  source_util::PeakTracker peaks_;  // the allocator is new: its peaks are the trace's
  std::vector<memory::MemoryEvent> kept_;  // a ring once full
  std::size_t kept_head_ = 0;              // its oldest entry once full
};

}  // namespace

std::unique_ptr<MemorySource> open_trace_source(Trace trace, const TraceSourceOptions& options) {
  return std::make_unique<TraceSource>(std::move(trace), options);
}

std::unique_ptr<MemorySource> open_trace_source(const std::string& path, const TraceSourceOptions& options) {
  return std::make_unique<TraceSource>(read_trace(path), options);
}

}  // namespace genesis::debug
