// genesis._C.Device: binds genesis::Device (core/device.h) and parse_bytes.
// The public `genesis.device` (python/genesis/_device.py) wraps it and adds
// the memory methods.
#include <string>

#include "py_bindings.h"
#include "genesis/core/bytes.h"
#include "genesis/core/device.h"
#include "genesis/cuda/device.h"

namespace genesis::python {

void bind_device(py::module_& m) {
  py::class_<Device>(m, "Device")
      // Parses and validates: "cpu", "cuda", "cuda:N". ValueError otherwise,
      // including a CUDA device this machine does not have.
      .def(py::init([](const std::string& text) { return genesis::cuda::parse_device(text); }), py::arg("text"))
      .def_property_readonly("type", [](const Device& d) { return d.is_cpu() ? "cpu" : "cuda"; })
      .def_property_readonly("index", [](const Device& d) { return d.index(); })
      .def("__str__", &Device::str)
      .def("__repr__", [](const Device& d) { return "_C.Device('" + d.str() + "')"; })
      .def("__eq__", [](const Device& a, const Device& b) { return a == b; })
      .def("__hash__", [](const Device& d) { return std::hash<Device>()(d); });

  m.def(
      "parse_bytes", [](const std::string& text) { return parse_bytes(text); }, py::arg("text"),
      "Parses '2GB', '512MiB', '4096' into bytes (ValueError for anything else).");
}

}  // namespace genesis::python
