// genesis._C.Allocator: a thin binding of memory::CachingAllocator
// (memory/caching_allocator.h) and the process-wide allocators
// (memory/device_allocators.h). The Python package builds the public API
// (genesis.device(...).memory_stats(), genesis.cuda.*, profiling, leak checks)
// on these methods; nothing here decides policy.
//
// Lifetime: the process-wide allocators live until exit and are returned by
// reference (Python never deletes them: nodelete holder). A SimulatedAllocator
// owns its CachingAllocator and hands it out with reference_internal, which
// keeps the owner alive as long as Python holds the Allocator object.
//
// The GIL is released around calls that can wait (empty_cache waits for
// pending stream work, warmup and compact may talk to the driver) and around
// calls that copy a lot under the allocator's mutex; allocate/deallocate keep
// it (they take nanoseconds, and the allocation site needs Python frames).
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <pybind11/stl.h>

#include "py_bindings.h"
#include "py_convert.h"
#include "genesis/memory/device_allocators.h"
#include "genesis/memory/events.h"
#include "py_location.h"

namespace genesis::python {

namespace {

using memory::CachingAllocator;
using memory::MemoryEvent;
using memory::StreamId;

void* as_ptr(std::uintptr_t address) { return reinterpret_cast<void*>(address); }

std::chrono::nanoseconds seconds_to_ns(double seconds) {
  GENESIS_CHECK(std::isfinite(seconds) && seconds >= 0.0,
                "max_idle must be a finite number of seconds >= 0, got ", seconds);
  const double ns = seconds * 1e9;
  // Longer than ~292 years: every segment counts as recent.
  if (ns >= static_cast<double>(std::numeric_limits<std::int64_t>::max()))
    return std::chrono::nanoseconds(std::numeric_limits<std::int64_t>::max());
  return std::chrono::nanoseconds(static_cast<std::int64_t>(ns));
}

py::dict totals_to_dict(const memory::EventTotals& t) {
  py::dict d;
  for (int i = 0; i < memory::kNumEventActions; ++i) {
    const auto a = static_cast<memory::EventAction>(i);
    const std::string name(memory::event_action_name(a));
    d[py::str(name)] = t.count[i];
    d[py::str(name + "_bytes")] = t.bytes[i];
    d[py::str(name + "_block_bytes")] = t.block_bytes[i];
  }
  d["cache_hits"] = t.cache_hits;
  d["alloc_ns"] = t.alloc_ns;
  d["lifetime_ns"] = t.lifetime_ns;
  d["lifetimes"] = t.lifetimes;
  d["events"] = t.events();
  return d;
}

void bind_event(py::module_& m) {
  py::class_<memory::RecordingMark>(m, "RecordingMark", "A session's start (CachingAllocator.mark_recording()).")
      .def_readonly("time_ns", &memory::RecordingMark::time_ns);
  py::class_<MemoryEvent>(m, "MemoryEvent", "One recorded allocator event (allocation, free, segment map/unmap, OOM, ...).")
      .def_readonly("time_ns", &MemoryEvent::time_ns)
      .def_readonly("address", &MemoryEvent::address)
      .def_readonly("size", &MemoryEvent::size)
      .def_readonly("block_size", &MemoryEvent::block_size)
      .def_readonly("stream", &MemoryEvent::stream)
      .def_readonly("duration_ns", &MemoryEvent::duration_ns)
      .def_readonly("thread", &MemoryEvent::thread)
      .def_readonly("cache_hit", &MemoryEvent::cache_hit)
      .def_property_readonly(
          "site", [](const MemoryEvent& e) { return e.site != nullptr ? std::string(e.site) : std::string(); },
          "The allocation context at the call (\"file:line in function\" lines, innermost first; \"\" if none).")
      .def_property_readonly("action",
                             [](const MemoryEvent& e) { return std::string(memory::event_action_name(e.action)); })
      .def("__repr__", [](const MemoryEvent& e) {
        return "MemoryEvent(" + std::string(memory::event_action_name(e.action)) + ", address=" +
               std::to_string(e.address) + ", size=" + std::to_string(e.size) +
               ", time_ns=" + std::to_string(e.time_ns) + ")";
      });
}

}  // namespace

void bind_allocator(py::module_& m) {
  bind_event(m);

  py::class_<CachingAllocator, std::unique_ptr<CachingAllocator, py::nodelete>>(
      m, "Allocator", "A Genesis caching allocator (internal: see genesis.device and genesis.testing).")
      .def_property_readonly("key", [](const CachingAllocator& a) { return reinterpret_cast<std::uintptr_t>(&a); },
                             "Identity of the C++ allocator (stable while it lives).")
      .def_property_readonly("name", [](const CachingAllocator& a) { return a.upstream().name(); })
      .def_property_readonly("device", [](const CachingAllocator& a) { return a.upstream().device().str(); })
      .def_property_readonly("kind",
                             [](const CachingAllocator& a) { return memory::memory_kind_name(a.upstream().kind()); })
      .def_property_readonly("is_cuda", [](const CachingAllocator& a) { return a.upstream().is_cuda(); })
      .def_property_readonly("expandable_segments", &CachingAllocator::expandable_segments)
      .def("mem_info",
           [](const CachingAllocator& a) {
             const memory::MemInfo info = a.upstream().mem_info();
             return py::make_tuple(info.free_bytes, info.total_bytes);
           })
      // --- statistics ---
      .def("stats",
           [](const CachingAllocator& a) {
             memory::MemoryStats s;
             {
               py::gil_scoped_release release;
               s = a.stats();
             }
             return stats_to_dict(s);
           })
      .def("memory_summary", &CachingAllocator::memory_summary, py::call_guard<py::gil_scoped_release>())
      .def("snapshot",
           [](const CachingAllocator& a) {
             std::vector<memory::SegmentInfo> segs;
             {
               py::gil_scoped_release release;
               segs = a.snapshot();
             }
             return snapshot_to_list(segs);
           })
      .def(
          "large_allocations",
          [](const CachingAllocator& a, std::size_t min_size) {
            std::vector<memory::AllocationInfo> v;
            {
              py::gil_scoped_release release;
              v = a.large_allocations(min_size);
            }
            return allocations_to_list(v);
          },
          py::arg("min_size") = 0)
      .def("reset_peak_stats", &CachingAllocator::reset_peak_stats)
      .def("reset_memory_stats", &CachingAllocator::reset_memory_stats)
      .def("reset_accumulated_stats", &CachingAllocator::reset_accumulated_stats)
      // --- controls ---
      .def("empty_cache", &CachingAllocator::empty_cache, py::call_guard<py::gil_scoped_release>())
      .def("set_memory_fraction", &CachingAllocator::set_memory_fraction, py::arg("fraction"),
           py::call_guard<py::gil_scoped_release>())
      .def("set_cache_size", py::overload_cast<std::size_t>(&CachingAllocator::set_cache_size), py::arg("bytes"),
           py::call_guard<py::gil_scoped_release>())
      .def("set_cache_size", py::overload_cast<std::string_view>(&CachingAllocator::set_cache_size),
           py::arg("size"), py::call_guard<py::gil_scoped_release>())
      .def("memory_limit", &CachingAllocator::memory_limit)
      .def(
          "warmup",
          [](CachingAllocator& a, const std::vector<std::pair<std::size_t, int>>& sizes, StreamId stream) {
            AllocationSite site;
            py::gil_scoped_release release;
            a.warmup(sizes, stream);
          },
          py::arg("sizes"), py::arg("stream") = 0)
      .def(
          "collect_garbage",
          [](CachingAllocator& a, double max_idle_seconds) {
            const auto idle = seconds_to_ns(max_idle_seconds);
            py::gil_scoped_release release;
            return a.collect_garbage(idle);
          },
          py::arg("max_idle_seconds") = 0.0)
      .def("compact", &CachingAllocator::compact, py::call_guard<py::gil_scoped_release>())
      // --- event history ---
      .def("set_event_recording", &CachingAllocator::set_event_recording, py::arg("on"))
      .def_property_readonly("event_recording", &CachingAllocator::event_recording)
      .def(
          "events",
          [](const CachingAllocator& a, std::uint64_t since_ns) {
            std::vector<MemoryEvent> all;
            {
              py::gil_scoped_release release;
              all = a.events();
            }
            py::list out;
            for (const MemoryEvent& e : all)
              if (e.time_ns >= since_ns) out.append(py::cast(e));
            return out;
          },
          py::arg("since_ns") = 0, "Recorded events with time_ns >= since_ns, oldest first.")
      .def("clear_events", &CachingAllocator::clear_events)
      // Exact session accounting (Note [Exact sessions]).
      .def("event_totals", [](const CachingAllocator& a) { return totals_to_dict(a.event_totals()); })
      .def("mark_recording", &CachingAllocator::mark_recording)
      .def(
          "recording_since",
          [](const CachingAllocator& a, const memory::RecordingMark& mark) {
            const memory::RecordingSummary s = a.recording_since(mark);
            py::dict d;
            d["totals"] = totals_to_dict(s.totals);
            d["allocated_change"] = s.allocated_change;
            d["reserved_change"] = s.reserved_change;
            d["peak_allocated_rise"] = s.peak_allocated_rise;
            d["peak_reserved_rise"] = s.peak_reserved_rise;
            d["largest_alloc"] = s.largest_alloc;
            d["lost_until_ns"] = s.lost_until_ns;
            return d;
          },
          py::arg("mark"), "What was recorded since the mark: a dict of totals, level changes and peaks.")
      .def("release_mark", &CachingAllocator::release_mark, py::arg("mark"))
      // --- raw allocation (testing hooks; tensors and storages use C++) ---
      .def(
          "allocate",
          [](CachingAllocator& a, std::size_t nbytes, StreamId stream) {
            AllocationSite site;
            return reinterpret_cast<std::uintptr_t>(a.allocate(nbytes, stream));
          },
          py::arg("nbytes"), py::arg("stream") = 0,
          "Allocates and returns the address (0 for 0 bytes). The memory is never touched by Python.")
      .def(
          "deallocate", [](CachingAllocator& a, std::uintptr_t ptr) { a.deallocate(as_ptr(ptr)); }, py::arg("ptr"))
      .def(
          "owns", [](const CachingAllocator& a, std::uintptr_t ptr) { return a.owns(as_ptr(ptr)); }, py::arg("ptr"))
      .def(
          "allocation_size",
          [](const CachingAllocator& a, std::uintptr_t ptr) { return a.allocation_size(as_ptr(ptr)); },
          py::arg("ptr"))
      .def(
          "record_stream",
          [](CachingAllocator& a, std::uintptr_t ptr, StreamId stream) { a.record_stream(as_ptr(ptr), stream); },
          py::arg("ptr"), py::arg("stream"));

  // --- the process-wide allocators ---
  m.def("allocator_for", &memory::allocator_for, py::arg("device"), py::return_value_policy::reference,
        "The allocator of a genesis._C.Device (CPU: the host allocator).");
  m.def("host_allocator", &memory::host_allocator, py::return_value_policy::reference);
  m.def("cuda_allocator", &memory::cuda_allocator, py::arg("index"), py::return_value_policy::reference);
  m.def("pinned_allocator", &memory::pinned_allocator, py::return_value_policy::reference);
  m.def("empty_all_caches", &memory::empty_all_caches, py::call_guard<py::gil_scoped_release>());

  // --- clocks and allocation sites ---
  m.def("now_ns", &memory::detail::now_ns, "The steady clock that event time stamps use.");
  m.def("set_capture_locations", &set_capture_locations, py::arg("on"));
  m.def("capture_locations", &capture_locations);
  m.def("set_package_prefix", &set_package_prefix, py::arg("prefix"));
  m.def("caller_location", &python_caller_location);
  m.def("set_site_depth", &set_site_depth, py::arg("depth"));
  m.def("site_depth", &site_depth);
}

}  // namespace genesis::python
