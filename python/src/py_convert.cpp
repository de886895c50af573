#include "py_convert.h"

#include <string>

namespace genesis::python {

py::dict stats_to_dict(const memory::MemoryStats& s) {
  using memory::kStatAggregate;
  py::dict d;
  const auto& all = [](const memory::StatArray& a) -> const memory::Stat& { return a[kStatAggregate]; };
  // Current values (Genesis's key names; "inactive_bytes" and "num_allocs" are
  // second spellings of the same figures, kept for code written against them).
  d["allocated_bytes"] = all(s.allocated_bytes).current;
  d["requested_bytes"] = all(s.requested_bytes).current;
  d["reserved_bytes"] = all(s.reserved_bytes).current;
  d["cached_bytes"] = all(s.cached_bytes).current;
  d["active_bytes"] = all(s.active_bytes).current;
  d["inactive_split_bytes"] = all(s.inactive_split_bytes).current;
  d["inactive_bytes"] = all(s.inactive_split_bytes).current;
  d["allocation_count"] = all(s.allocation_count).current;
  d["segment_count"] = all(s.segment_count).current;
  d["inactive_split_count"] = all(s.inactive_split_count).current;
  // Peaks since the last reset.
  d["peak_allocated"] = all(s.allocated_bytes).peak;
  d["peak_cached"] = all(s.cached_bytes).peak;
  d["peak_reserved"] = all(s.reserved_bytes).peak;
  d["peak_active"] = all(s.active_bytes).peak;
  d["peak_requested"] = all(s.requested_bytes).peak;
  // Counters since the last reset_memory_stats().
  d["num_allocations"] = s.num_allocs;
  d["num_allocs"] = s.num_allocs;
  d["num_frees"] = s.num_frees;
  d["num_cache_hits"] = s.num_cache_hits;
  d["num_cache_misses"] = s.num_cache_misses;
  d["num_thread_cache_hits"] = s.num_thread_cache_hits;
  d["num_ooms"] = s.num_ooms;
  d["num_upstream_allocs"] = s.num_upstream_allocs;
  d["num_upstream_frees"] = s.num_upstream_frees;
  d["num_upstream_failures"] = s.num_upstream_failures;
  d["num_cache_flushes"] = s.num_cache_flushes;
  d["num_stream_borrows"] = s.num_stream_borrows;
  d["total_allocated"] = s.total_allocated;
  d["cache_hit_rate"] = s.cache_hit_rate();
  d["fragmentation_ratio"] = s.fragmentation_ratio();
  d["largest_free_block"] = s.largest_free_block;
  d["memory_limit"] = s.memory_limit;
  d["cache_limit"] = s.cache_limit;

  struct Named {
    const char* name;
    const memory::StatArray* stat;
  };
  const Named arrays[] = {
      {"allocated_bytes", &s.allocated_bytes},   {"requested_bytes", &s.requested_bytes},
      {"reserved_bytes", &s.reserved_bytes},     {"active_bytes", &s.active_bytes},
      {"inactive_split_bytes", &s.inactive_split_bytes}, {"cached_bytes", &s.cached_bytes},
      {"allocation", &s.allocation_count},       {"segment", &s.segment_count},
      {"inactive_split", &s.inactive_split_count},
  };
  static const char* pools[memory::kNumStatTypes] = {"all", "small_pool", "large_pool"};
  // Note [PyTorch's statistic names]: dashboards written for
  // torch.cuda.memory_stats() read Genesis too. The per-pool arrays above
  // already use PyTorch's names where the concept is the same (allocated,
  // requested, reserved, active and inactive-split bytes; allocation,
  // segment and inactive_split counts); these add the rest PyTorch reports:
  //   active.*            active blocks: Genesis counts live allocations; a
  //                       block freed while another stream still uses it is
  //                       in active_bytes but not in this count
  //   num_alloc_retries   upstream refusals that led to freeing the cache and
  //                       retrying (num_upstream_failures)
  //   num_device_alloc/free  segments (or expandable pages) taken from and
  //                       given back to the driver
  //   num_sync_all_streams  releases of the cache, each of which first waits
  //                       for the work recorded on other streams (PyTorch
  //                       counts the same waits in empty_cache and OOM retry)
  //   max_split_size      -1: Genesis splits blocks of any size (PyTorch's
  //                       default, which it also reports as -1)
  //   oversize_*          0: nothing is oversize without a split limit
  d["num_alloc_retries"] = s.num_upstream_failures;
  d["num_device_alloc"] = s.num_upstream_allocs;
  d["num_device_free"] = s.num_upstream_frees;
  d["num_sync_all_streams"] = s.num_cache_flushes;
  d["max_split_size"] = -1;
  for (const char* name : {"oversize_allocations", "oversize_segments"})
    for (const char* field : {"current", "peak", "allocated", "freed"})
      d[py::str(std::string(name) + "." + field)] = 0;
  for (int p = 0; p < memory::kNumStatTypes; ++p) {
    const memory::Stat& st = s.allocation_count[p];
    const std::string base = std::string("active.") + pools[p] + ".";
    d[py::str(base + "current")] = st.current;
    d[py::str(base + "peak")] = st.peak;
    d[py::str(base + "allocated")] = st.allocated;
    d[py::str(base + "freed")] = st.freed;
  }
  for (const Named& n : arrays) {
    for (int p = 0; p < memory::kNumStatTypes; ++p) {
      const memory::Stat& st = (*n.stat)[p];
      const std::string base = std::string(n.name) + "." + pools[p] + ".";
      d[py::str(base + "current")] = st.current;
      d[py::str(base + "peak")] = st.peak;
      d[py::str(base + "allocated")] = st.allocated;
      d[py::str(base + "freed")] = st.freed;
    }
  }
  return d;
}

py::list snapshot_to_list(const std::vector<memory::SegmentInfo>& segments) {
  py::list out;
  for (const memory::SegmentInfo& seg : segments) {
    py::list blocks;
    for (const memory::BlockInfo& b : seg.blocks) {
      py::dict bd;
      bd["address"] = b.address;
      bd["size"] = b.size;
      bd["requested_size"] = b.requested;
      bd["state"] = b.state;
      bd["stream"] = b.stream;
      blocks.append(std::move(bd));
    }
    py::dict sd;
    sd["address"] = seg.address;
    sd["size"] = seg.size;
    sd["total_size"] = seg.size;
    sd["state"] = seg.allocated_bytes > 0 ? "allocated" : "free";
    sd["stream"] = seg.stream;
    sd["pool"] = seg.pool;
    sd["segment_type"] = seg.pool;
    sd["allocated_size"] = seg.allocated_bytes;
    sd["expandable"] = seg.expandable;
    sd["mapped_bytes"] = seg.mapped_bytes;
    py::list ranges;
    for (const auto& [addr, bytes] : seg.mapped_ranges) ranges.append(py::make_tuple(addr, bytes));
    sd["mapped_ranges"] = std::move(ranges);
    sd["blocks"] = std::move(blocks);
    out.append(std::move(sd));
  }
  return out;
}

py::list allocations_to_list(const std::vector<memory::AllocationInfo>& allocations) {
  py::list out;
  for (const memory::AllocationInfo& a : allocations) {
    py::dict d;
    d["address"] = a.address;
    d["size"] = a.size;
    d["requested_size"] = a.requested;
    d["stream"] = a.stream;
    d["location"] = a.location;
    d["alloc_time_ns"] = a.alloc_time_ns;
    out.append(std::move(d));
  }
  return out;
}

}  // namespace genesis::python
