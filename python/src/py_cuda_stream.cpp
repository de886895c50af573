// CUDA streams, events and the per-thread current stream
// (`with genesis.cuda.stream(s):`), over cuda/stream.h. The public classes
// genesis.cuda.Stream / Event (python/genesis/cuda/_streams.py) wrap these.
// Waiting calls release the GIL. Without a GPU they raise genesis.CudaError.
#include <pybind11/stl.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <thread>

#include "py_bindings.h"
#include "genesis/cuda/stream.h"

namespace genesis::python {

namespace {

using cuda::Event;
using cuda::Stream;

// `with genesis.cuda.stream(s):` over cuda::StreamGuard (stream and device
// restored on exit, exceptions included).
struct StreamGuardObject {
  Stream stream;
  std::optional<cuda::StreamGuard> guard;
  std::thread::id thread;
};

}  // namespace

void bind_cuda_stream(py::module_& m) {
  py::class_<Stream>(m, "CudaStream", "A CUDA stream (internal: see genesis.cuda.Stream).")
      .def_static("create", &Stream::create, py::arg("device"), py::arg("priority") = 0, py::arg("non_blocking") = true)
      .def_static("from_id", &Stream::from_id, py::arg("id"))
      .def_static("current", &cuda::current_stream, py::arg("device"))
      .def_static("default", &cuda::default_stream, py::arg("device"))
      .def_property_readonly("id", &Stream::id)
      .def_property_readonly("device", &Stream::device)
      .def_property_readonly("priority", &Stream::priority)
      .def_property_readonly("is_default", &Stream::is_default)
      .def("synchronize", &Stream::synchronize, py::call_guard<py::gil_scoped_release>())
      .def("query", &Stream::query)
      .def("wait", &Stream::wait, py::arg("event"))
      .def("__eq__", [](const Stream& a, const Stream& b) { return a == b; })
      .def("__hash__", [](const Stream& s) {
        return std::hash<std::uint64_t>()(static_cast<std::uint64_t>(s.id())) ^ static_cast<std::size_t>(s.device());
      });

  m.def("cuda_set_current_stream", &cuda::set_current_stream, py::arg("stream"));
  m.def(
      "cuda_priority_range",
      [](int device) {
        const auto [least, greatest] = cuda::priority_range(device);
        return py::make_tuple(least, greatest);
      },
      py::arg("device"));
  m.def("cuda_per_thread_default_stream", &cuda::per_thread_default_stream);

  py::class_<Event>(m, "CudaEvent", "A CUDA event (internal: see genesis.cuda.Event).")
      .def(py::init<bool>(), py::arg("enable_timing") = false)
      .def("record", py::overload_cast<const Stream&>(&Event::record), py::arg("stream"))
      .def("record_current", py::overload_cast<>(&Event::record))
      .def("synchronize", &Event::synchronize, py::call_guard<py::gil_scoped_release>())
      .def("query", &Event::query)
      .def("elapsed_ms", &Event::elapsed_ms, py::arg("end"))
      .def_property_readonly("is_created", &Event::is_created)
      .def_property_readonly("timing_enabled", &Event::timing_enabled)
      .def_property_readonly("device", &Event::device)
      .def_property_readonly("id", &Event::id);

  py::class_<StreamGuardObject>(m, "CudaStreamGuard", "Used by genesis.cuda.stream (one per `with` block).")
      .def(py::init([](const Stream& s) {
             auto g = std::make_unique<StreamGuardObject>();
             g->stream = s;
             return g;
           }),
           py::arg("stream"))
      .def("__enter__",
           [](StreamGuardObject& g) {
             if (g.guard) throw py::value_error("this stream guard is already active");
             g.guard.emplace(g.stream);
             g.thread = std::this_thread::get_id();
           })
      .def("__exit__", [](StreamGuardObject& g, py::args) {
        if (g.guard && g.thread != std::this_thread::get_id())
          throw py::value_error("genesis.cuda.stream: exited on another thread than it was entered on");
        g.guard.reset();
        return false;
      });
}

}  // namespace genesis::python
