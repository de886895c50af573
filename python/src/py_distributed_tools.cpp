// Bindings of the metrics endpoint and the distributed memory monitor
// (metrics_server.h, distributed_roles.h): thin, the roles run in C++
// threads. Everything that joins those threads releases the GIL.
#include <pybind11/stl.h>

#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "py_bindings.h"
#include "genesis/core/error.h"
#include "genesis/debug/distributed_roles.h"
#include "genesis/debug/memory_source.h"
#include "genesis/debug/metrics_server.h"
#include "genesis/memory/device_allocators.h"

namespace genesis::python {

namespace {

using namespace genesis::debug;

// A worker and the source it watches (the source must outlive it).
struct PyWorker {
  std::unique_ptr<MemorySource> source;
  std::unique_ptr<DistributedWorker> worker;
  ~PyWorker() {
    py::gil_scoped_release release;
    worker.reset();
  }
};

std::unique_ptr<MemorySource> open_worker_source(const std::string& kind, const std::string& trace, double speed,
                                                 std::size_t capacity, const std::string& config, int pid) {
  if (kind == "process") {
    std::vector<NamedAllocator> allocators = process_cuda_allocators();
    allocators.push_back(NamedAllocator{"host", "host (pageable)", &memory::host_allocator()});
    return open_allocator_source(std::move(allocators));
  }
  if (kind == "nvml") return open_nvml_source();
  if (kind == "trace") {
    TraceSourceOptions o;
    o.speed = speed;
    o.capacity = capacity;
    o.config = config;
    return open_trace_source(trace, o);
  }
  if (kind == "pid") return open_process_source(pid);
  GENESIS_THROW(InvalidArgumentError, "unknown source kind '", kind, "': expected process, nvml, trace or pid");
}

}  // namespace

void bind_distributed_tools(py::module_& m) {
  m.def("start_metrics_server", &start_metrics_server, py::arg("port") = 9464, py::arg("bind") = "127.0.0.1",
        "Serves this process's memory figures on http://bind:port/metrics; returns the port.");
  m.def("stop_metrics_server", [] {
    py::gil_scoped_release release;
    stop_metrics_server();
  });
  m.def("metrics_server_port", &metrics_server_port);
  m.def("start_metrics_server_from_environment", &start_metrics_server_from_environment);

  py::class_<DistributedMaster>(m, "DistributedMaster", "The master of the distributed memory monitor.")
      .def(py::init([](int port, const std::string& bind, const std::string& token, const std::string& sd_file,
                       double down_after_intervals, std::size_t max_body_bytes) {
             MasterConfig c;
             c.server.port = port;
             c.server.bind = bind;
             c.server.token = token;
             c.server.max_body_bytes = max_body_bytes;
             c.state.down_after_intervals = down_after_intervals;
             c.sd_file = sd_file;
             return std::make_unique<DistributedMaster>(c);
           }),
           py::arg("port"), py::arg("bind"), py::arg("token"), py::arg("sd_file"), py::arg("down_after_intervals"),
           py::arg("max_body_bytes"))
      .def_property_readonly("port", &DistributedMaster::port)
      .def("status_json", &DistributedMaster::status_json)
      .def("metrics_text", &DistributedMaster::metrics_text)
      .def("table", &DistributedMaster::table)
      .def("tick", &DistributedMaster::tick)
      .def("stop", [](DistributedMaster& d) {
        py::gil_scoped_release release;
        d.stop();
      });

  py::class_<PyWorker>(m, "DistributedWorker", "A worker of the distributed memory monitor.")
      .def(py::init([](const std::string& kind, const std::string& trace, double speed, std::size_t capacity,
                       const std::string& config, int pid, const std::string& master_host, int port,
                       const std::string& token, double interval, double max_backoff, const std::string& node_name,
                       const std::vector<std::string>& devices, int metrics_port, const std::string& metrics_bind,
                       bool verbose) {
             auto w = std::make_unique<PyWorker>();
             w->source = open_worker_source(kind, trace, speed, capacity, config, pid);
             WorkerConfig c;
             c.report.master_host = master_host;
             c.report.port = port;
             c.report.token = token;
             c.report.interval_s = interval;
             c.report.max_backoff_s = max_backoff;
             c.node_name = node_name;
             c.devices = devices;
             c.metrics_port = metrics_port;
             c.metrics_bind = metrics_bind;
             DistributedWorker::Log log;
             if (verbose) {
               log = [](const std::string& line) { std::fprintf(stderr, "genesis distributed worker: %s\n", line.c_str()); };
             }
             w->worker = std::make_unique<DistributedWorker>(*w->source, c, log);
             return w;
           }),
           py::arg("kind"), py::arg("trace"), py::arg("speed"), py::arg("capacity"), py::arg("config"),
           py::arg("pid"), py::arg("master_host"), py::arg("port"), py::arg("token"), py::arg("interval"),
           py::arg("max_backoff"), py::arg("node_name"), py::arg("devices"), py::arg("metrics_port"),
           py::arg("metrics_bind"), py::arg("verbose"))
      .def("start", [](PyWorker& w) { w.worker->start(); })
      .def("stop", [](PyWorker& w) {
        py::gil_scoped_release release;
        w.worker->stop();
      })
      .def("wait", [](PyWorker& w) {
        py::gil_scoped_release release;
        w.worker->wait();
      })
      .def_property_readonly("running", [](const PyWorker& w) { return w.worker->running(); })
      .def_property_readonly("reports_sent", [](const PyWorker& w) { return w.worker->reports_sent(); })
      .def_property_readonly("metrics_endpoint", [](const PyWorker& w) { return w.worker->metrics_endpoint(); })
      .def_property_readonly("describe", [](const PyWorker& w) { return w.source->describe(); });
}

}  // namespace genesis::python
