// The allocator configuration text (genesis/memory/alloc_conf.h) for Python:
// parse it, list its keys, and configure the process-wide GPU allocators
// (genesis.torch.use_genesis_allocator, genesis.cupy.allocator).
#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "py_bindings.h"
#include "genesis/memory/alloc_conf.h"

namespace genesis::python {

namespace {

py::dict options_to_dict(const memory::AllocatorOptions& o) {
  using Expandable = memory::AllocatorOptions::Expandable;
  py::dict d;
  d["expandable_segments"] = o.expandable_segments == Expandable::kAuto ? py::object(py::str("auto"))
                                                                         : py::object(py::bool_(o.expandable_segments == Expandable::kOn));
  d["memory_fraction"] = o.memory_fraction;
  d["cache_size"] = o.cache_size_limit == SIZE_MAX ? py::object(py::none()) : py::object(py::int_(o.cache_size_limit));
  d["thread_cache"] = o.thread_cache.is_auto() ? py::object(py::str("auto")) : py::object(py::bool_(o.thread_cache.resolve(true)));
  d["thread_cache_size"] = o.thread_cache_bytes;
  d["thread_cache_small_count"] = o.thread_cache_small_count;
  d["thread_cache_large_count"] = o.thread_cache_large_count;
  d["thread_cache_large_park"] = o.thread_cache_large_park;
  d["thread_cache_flush_at_peak"] = o.thread_cache_flush_at_peak;
  d["thread_cache_near_fit"] = o.thread_cache_near_fit;
  d["stream_borrow"] = o.stream_borrow;
  d["classic_release_at_mark"] = o.classic_release_at_mark;
  d["chunk_pages"] = o.chunk_pages;
  d["chunk_strand_pages"] = o.chunk_strand_pages == memory::AllocatorOptions::kAutoStrandPages
                                ? py::object(py::str("auto"))
                                : py::object(py::int_(o.chunk_strand_pages));
  d["idle_release"] = o.idle_release_ms == 0 ? py::object(py::none()) : py::object(py::float_(o.idle_release_ms / 1000.0));
  d["release_slack"] = o.release_slack < 0 ? py::object(py::str("auto")) : py::object(py::float_(o.release_slack));
  d["arenas"] = o.arenas;
  d["arena_move_window"] = o.arena_move_window;
  d["record_events"] = o.record_events;
  d["event_capacity"] = o.event_capacity_per_thread;
  return d;
}

}  // namespace

void bind_alloc_conf(py::module_& m) {
  m.def(
      "parse_alloc_conf",
      [](const std::string& text, const std::string& source) {
        return options_to_dict(memory::parse_alloc_conf(text, {}, source));
      },
      py::arg("text"), py::arg("source") = "allocator configuration",
      "The options a configuration text sets, as a dict (ValueError for malformed text).");
  m.def(
      "alloc_conf_keys",
      [] {
        std::vector<py::tuple> out;
        for (const memory::AllocConfKey& k : memory::alloc_conf_keys())
          out.push_back(py::make_tuple(k.name, k.form, k.meaning));
        return out;
      },
      "(name, value form, meaning) of every configuration key.");
  m.def(
      "format_alloc_conf", [](const std::string& text) { return memory::format_alloc_conf(memory::parse_alloc_conf(text)); },
      py::arg("text"), "The canonical text of a configuration (only what differs from the defaults).");
  m.def("cuda_alloc_conf", &memory::cuda_alloc_conf,
        "The configuration process-wide GPU allocators are created with (GENESIS_ALLOC_CONF plus what was added).");
  m.def("configure_cuda_allocators", &memory::configure_cuda_allocators, py::arg("text"),
        py::arg("source") = "allocator configuration", py::call_guard<py::gil_scoped_release>(),
        "Adds to the configuration of the process-wide GPU allocators (see genesis/memory/alloc_conf.h).");
  m.attr("FRAMEWORK_ALLOC_DEFAULTS") = std::string(memory::kFrameworkAllocDefaults);
  m.def("prefer_framework_allocator_defaults", &memory::prefer_framework_allocator_defaults, py::arg("device"),
        py::arg("source"), py::call_guard<py::gil_scoped_release>(),
        "The PyTorch and CuPy adaptors' defaults (expandable segments) where CUDA device `device` maps pages; "
        "False where it cannot or an allocator exists (see genesis/memory/alloc_conf.h).");
  m.def("prefer_cuda_allocator_defaults", &memory::prefer_cuda_allocator_defaults, py::arg("text"), py::arg("source"),
        py::call_guard<py::gil_scoped_release>(),
        "A front end's defaults for the keys the user left alone, while no process-wide GPU allocator exists; "
        "False once one does (see genesis/memory/alloc_conf.h).");
}

}  // namespace genesis::python
