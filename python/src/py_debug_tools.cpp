// genesis._C bindings of the memory debugger (genesis/debug/): memory
// sources, the MemoryDebugger with its tools and reports, and genesis-mem's
// commands for `python -m genesis.tools.memory`. The Python classes of
// genesis.tools.memory are built on these; reports cross as JSON text.
//
// Threads: the debugger samples on its own thread. Python callbacks (OOM
// warnings, sample listeners) run there with the GIL taken for the call.
// Everything that waits for that thread (stop, wait, destruction) releases
// the GIL first, or a callback waiting for the GIL would never finish.
#include <memory>
#include <string>
#include <vector>

#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "py_bindings.h"
#include "genesis/core/error.h"
#include "genesis/debug/memory_debugger.h"
#include "genesis/debug/memory_source.h"
#include "genesis/debug/reports.h"
#include "genesis/memory/caching_allocator.h"

#if GENESIS_WITH_MEM_CLI
#include "cli.h"
#endif

namespace genesis::python {

namespace {

using debug::MemoryDebugger;
using debug::MemorySample;
using debug::MemorySource;

// A source and the Python objects (allocators) it reads from.
struct PySource {
  std::unique_ptr<MemorySource> source;
  std::vector<py::object> keep_alive;
};

py::dict sample_dict(const MemorySample& s) {
  py::dict d;
  d["time_ns"] = s.time_ns;
  d["total"] = s.total;
  d["used"] = s.used;
  d["free"] = s.free;
  d["allocated"] = s.allocated;
  d["reserved"] = s.reserved;
  d["active"] = s.active;
  d["cached"] = s.cached;
  d["largest_free_block"] = s.largest_free_block;
  d["free_blocks"] = s.free_blocks;
  d["num_ooms"] = s.num_ooms;
  d["num_allocs"] = s.num_allocs;
  d["host_rss"] = s.host_rss;
  d["exact"] = s.exact;
  d["fragmentation"] = s.fragmentation();
  d["utilization"] = s.utilization_percent();
  return d;
}

py::list sites_list(const std::vector<debug::SiteStat>& sites) {
  py::list out;
  for (const debug::SiteStat& s : sites) {
    py::dict d;
    d["site"] = s.site;
    d["bytes"] = s.bytes;
    d["count"] = s.count;
    out.append(d);
  }
  return out;
}

py::dict prediction_dict(const debug::OOMPrediction& p) {
  py::dict d;
  d["device"] = p.device;
  d["time_ns"] = p.time_ns;
  d["risk_level"] = std::string(debug::risk_level_name(p.risk_level));
  d["confidence"] = p.confidence;
  d["current_usage_percent"] = p.current_usage_percent;
  d["growth_rate_bytes_per_sec"] = p.growth_rate_bytes_per_sec;
  d["predicted_oom_seconds"] = p.predicted_oom_seconds;
  d["recommendations"] = p.recommendations;
  return d;
}

// A Python callable that is released with the GIL held, wherever the last
// reference goes (the sampler thread may drop it).
std::shared_ptr<py::function> hold(py::function f) {
  return std::shared_ptr<py::function>(new py::function(std::move(f)), [](py::function* p) {
    py::gil_scoped_acquire gil;
    delete p;
  });
}

void call_unraisable(const py::function& f, const char* where, const auto&... args) {
  try {
    f(args...);
  } catch (py::error_already_set& e) {
    e.discard_as_unraisable(where);
  }
}

struct PyDebugger {
  py::object source_owner;  // the PySource, alive as long as the debugger
  std::unique_ptr<MemoryDebugger> debugger;

  ~PyDebugger() {
    if (debugger) {
      py::gil_scoped_release release;
      debugger.reset();
    }
  }
};

std::unique_ptr<PySource> wrap(std::unique_ptr<MemorySource> s) {
  auto out = std::make_unique<PySource>();
  out->source = std::move(s);
  return out;
}

}  // namespace

void bind_debug_tools(py::module_& m) {
  m.def("nvml_available", &debug::nvml_available, "True when the NVIDIA driver's NVML library can be used.");
  m.def("parse_speed", &debug::parse_speed, py::arg("text"));

  py::class_<PySource>(m, "MemorySource", "Where the memory debugger's figures come from.")
      .def("describe", [](const PySource& s) { return s.source->describe(); })
      .def("devices",
           [](const PySource& s) {
             py::list out;
             for (const debug::SourceDevice& d : s.source->devices()) {
               py::dict e;
               e["id"] = d.id;
               e["name"] = d.name;
               e["total"] = d.total;
               out.append(e);
             }
             return out;
           })
      .def("sample", [](PySource& s, const std::string& device) {
        MemorySample sample;
        {
          py::gil_scoped_release release;
          sample = s.source->sample(device);
        }
        return sample_dict(sample);
      }, py::arg("device"))
      .def("sites", [](PySource& s, const std::string& device) {
        std::vector<debug::SiteStat> sites;
        {
          py::gil_scoped_release release;
          sites = s.source->sites(device);
        }
        return sites_list(sites);
      }, py::arg("device"))
      .def_property_readonly("has_sites", [](const PySource& s) { return s.source->has_sites(); })
      .def("now_ns", [](const PySource& s) { return s.source->now_ns(); })
      .def("advance_to", [](PySource& s, std::uint64_t t) {
        debug::StopFlag never{false};
        py::gil_scoped_release release;
        return s.source->advance_to(t, never);
      }, py::arg("time_ns"))
      .def_property_readonly("ended", [](const PySource& s) { return s.source->ended(); })
      .def_property_readonly("end_reason", [](const PySource& s) { return s.source->end_reason(); });

  m.def("open_nvml_source", [](const std::vector<int>& devices) { return wrap(debug::open_nvml_source(devices)); },
        py::arg("devices") = std::vector<int>{});
  m.def("open_trace_source",
        [](const std::string& path, double speed, std::size_t capacity, const std::string& config) {
          debug::TraceSourceOptions o;
          o.speed = speed;
          o.capacity = capacity;
          o.config = config;
          py::gil_scoped_release release;
          return wrap(debug::open_trace_source(path, o));
        },
        py::arg("path"), py::arg("speed") = 0.0, py::arg("capacity") = 0, py::arg("config") = "genesis");
  m.def("open_process_source",
        [](int pid, const std::vector<int>& devices) { return wrap(debug::open_process_source(pid, devices)); },
        py::arg("pid"), py::arg("devices") = std::vector<int>{});
  m.def("open_child_source",
        [](const std::vector<std::string>& argv, const std::vector<int>& devices) {
          return wrap(debug::open_child_source(argv, devices));
        },
        py::arg("argv"), py::arg("devices") = std::vector<int>{});
  // entries: [(id, name, Allocator object)]; the Allocator objects are kept
  // alive by the source (a SimulatedAllocator's allocator keeps its owner).
  m.def("open_allocator_source", [](const py::list& entries) {
    std::vector<debug::NamedAllocator> named;
    std::vector<py::object> keep;
    for (const py::handle& e : entries) {
      auto t = e.cast<py::tuple>();
      GENESIS_CHECK(t.size() == 3, "allocator source entries are (id, name, allocator)");
      debug::NamedAllocator n;
      n.id = t[0].cast<std::string>();
      n.name = t[1].cast<std::string>();
      n.allocator = &t[2].cast<memory::CachingAllocator&>();
      named.push_back(std::move(n));
      keep.push_back(py::reinterpret_borrow<py::object>(t[2]));
    }
    auto out = wrap(debug::open_allocator_source(std::move(named)));
    out->keep_alive = std::move(keep);
    return out;
  }, py::arg("entries"));

  py::class_<PyDebugger>(m, "MemoryDebugger", "Samples a MemorySource and runs the analysis tools.")
      .def(py::init([](py::object source, double interval, const std::vector<std::string>& devices, double duration,
                       bool profile, bool oom, bool leak, bool fragment, double oom_threshold, double leak_threshold,
                       double leak_window, bool tracking, std::size_t sites_every, std::size_t history_bytes) {
             PySource& s = source.cast<PySource&>();
             debug::DebugOptions o;
             o.interval_s = interval;
             o.devices = devices;
             o.duration_s = duration;
             o.profile = profile;
             o.oom = oom;
             o.leak = leak;
             o.fragment = fragment;
             o.oom_threshold_percent = oom_threshold;
             o.leak_threshold_mb_per_min = leak_threshold;
             o.leak_window_s = leak_window;
             o.tracking = tracking;
             o.sites_every = sites_every;
             o.history_bytes_per_device = history_bytes;
             auto d = std::make_unique<PyDebugger>();
             d->source_owner = source;
             d->debugger = std::make_unique<MemoryDebugger>(*s.source, o);
             return d;
           }),
           py::arg("source"), py::arg("interval") = 0.1, py::arg("devices") = std::vector<std::string>{},
           py::arg("duration") = 0.0, py::arg("profile") = true, py::arg("oom") = true, py::arg("leak") = true,
           py::arg("fragment") = true, py::arg("oom_threshold") = 85.0, py::arg("leak_threshold") = 10.0,
           py::arg("leak_window") = 60.0, py::arg("tracking") = true, py::arg("sites_every") = 10,
           py::arg("history_bytes") = debug::SampleHistory::kDefaultMaxBytes)
      .def("start", [](PyDebugger& d) { d.debugger->start(); })
      .def("stop", [](PyDebugger& d) {
        py::gil_scoped_release release;
        d.debugger->stop();
      })
      .def("request_stop", [](PyDebugger& d) { d.debugger->stop_flag().store(true); })
      .def("wait", [](PyDebugger& d) {
        py::gil_scoped_release release;
        d.debugger->wait();
      })
      .def_property_readonly("running", [](const PyDebugger& d) { return d.debugger->running(); })
      .def("on_oom_warning", [](PyDebugger& d, py::function f) {
        auto held = hold(std::move(f));
        d.debugger->on_oom_warning([held](const std::string& device, const debug::OOMPrediction& p) {
          py::gil_scoped_acquire gil;
          call_unraisable(*held, "OOM warning callback", device, prediction_dict(p));
        });
      })
      .def("on_sample", [](PyDebugger& d, py::function f) {
        auto held = hold(std::move(f));
        d.debugger->on_sample([held](const std::string& device, const MemorySample& s) {
          py::gil_scoped_acquire gil;
          call_unraisable(*held, "sample listener", device, sample_dict(s));
        });
      })
      .def("status_report", [](const PyDebugger& d) { return d.debugger->status_report(); })
      .def("profile_report", [](const PyDebugger& d) {
        auto lock = d.debugger->lock();
        GENESIS_CHECK(d.debugger->profiler() != nullptr, "this debugger does not profile (profile=False)");
        return debug::profile_report_json(*d.debugger->profiler(), d.debugger->source().describe());
      })
      .def("oom_report", [](const PyDebugger& d) {
        auto lock = d.debugger->lock();
        GENESIS_CHECK(d.debugger->oom_detector() != nullptr, "this debugger does not predict OOM (oom=False)");
        return debug::oom_report_json(*d.debugger->oom_detector());
      })
      .def("leak_report", [](const PyDebugger& d) {
        auto lock = d.debugger->lock();
        GENESIS_CHECK(d.debugger->leak_detector() != nullptr, "this debugger does not look for leaks (leak=False)");
        return debug::leak_report_json(*d.debugger->leak_detector());
      })
      .def("fragment_report", [](const PyDebugger& d) {
        auto lock = d.debugger->lock();
        GENESIS_CHECK(d.debugger->fragmentation() != nullptr,
                      "this debugger does not analyse fragmentation (fragment=False)");
        return debug::fragment_report_json(*d.debugger->fragmentation());
      })
      .def("html_report", [](const PyDebugger& d, const std::string& title) {
        auto lock = d.debugger->lock();
        debug::HtmlReportInput in;
        in.title = title;
        in.source = d.debugger->source().describe();
        in.profiler = d.debugger->profiler();
        in.fragmentation = d.debugger->fragmentation();
        in.oom = d.debugger->oom_detector();
        in.leak = d.debugger->leak_detector();
        return debug::html_report(in);
      }, py::arg("title") = "Genesis memory report")
      .def("chrome_trace", [](const PyDebugger& d) {
        auto lock = d.debugger->lock();
        GENESIS_CHECK(d.debugger->profiler() != nullptr, "the timeline needs the profiler (profile=True)");
        return debug::chrome_trace_json(*d.debugger->profiler());
      })
      .def("predict", [](const PyDebugger& d, const std::string& device) {
        auto lock = d.debugger->lock();
        GENESIS_CHECK(d.debugger->oom_detector() != nullptr, "this debugger does not predict OOM (oom=False)");
        return prediction_dict(d.debugger->oom_detector()->predict(device));
      }, py::arg("device"))
      .def("leak_diff", [](const PyDebugger& d, const std::string& device, std::uint64_t t0, std::uint64_t t1) {
        auto lock = d.debugger->lock();
        GENESIS_CHECK(d.debugger->leak_detector() != nullptr, "this debugger does not look for leaks (leak=False)");
        py::list out;
        for (const debug::SiteDelta& s : d.debugger->leak_detector()->diff(device, t0, t1)) {
          py::dict e;
          e["site"] = s.site;
          e["frames"] = s.frames;
          e["bytes_before"] = s.bytes_before;
          e["bytes_after"] = s.bytes_after;
          e["bytes_delta"] = s.bytes_delta;
          e["count_delta"] = s.count_delta;
          out.append(e);
        }
        return out;
      }, py::arg("device"), py::arg("t0_ns"), py::arg("t1_ns"))
      .def("cost", [](const PyDebugger& d) {
        const debug::SamplerCost c = d.debugger->cost();
        py::dict e;
        e["rounds"] = c.rounds;
        e["sampling_cpu_ns"] = c.sampling_cpu_ns;
        e["thread_cpu_ns"] = c.thread_cpu_ns;
        e["source_elapsed_ns"] = c.source_elapsed_ns;
        e["percent_of_core"] = c.percent_of_core();
        return e;
      })
      .def("elapsed_seconds", [](const PyDebugger& d) { return d.debugger->elapsed_seconds(); })
      .def("device_ids", [](const PyDebugger& d) {
        std::vector<std::string> ids;
        for (const debug::SourceDevice& dev : d.debugger->devices()) ids.push_back(dev.id);
        return ids;
      });

  m.def("write_report", &debug::write_report, py::arg("path"), py::arg("text"));

  m.def("genesis_mem_main", [](std::vector<std::string> argv) {
#if GENESIS_WITH_MEM_CLI
    std::vector<char*> args;
    for (std::string& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    py::gil_scoped_release release;
    std::fflush(nullptr);
    const int status = tools::genesis_mem_main(static_cast<int>(argv.size()), args.data());
    std::fflush(nullptr);
    return status;
#else
    (void)argv;
    GENESIS_THROW(Error, "this build of genesis has no command line (build with the tools: CLI11, nlohmann-json)");
#endif
  }, py::arg("argv"));
}

}  // namespace genesis::python
