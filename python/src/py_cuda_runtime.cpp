// CUDA runtime queries and the current device, over cuda/runtime.h
// and cuda/device_properties.h. Without a GPU is_available() is False and
// every call that needs one raises genesis.CudaError saying why; the Python
// package (python/genesis/cuda/_runtime.py) checks arguments first.
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <thread>

#include "py_bindings.h"
#include "genesis/cuda/device_properties.h"
#include "genesis/cuda/async_errors.h"
#include "genesis/cuda/runtime.h"

namespace genesis::python {

namespace {

// `with genesis.cuda.device(i):` over cuda::DeviceGuard: entered and exited
// by the Python context manager, on one thread (the current device is
// per-thread state).
struct DeviceGuardObject {
  int device = 0;
  std::optional<cuda::DeviceGuard> guard;
  std::thread::id thread;
};

}  // namespace

void bind_cuda_runtime(py::module_& m) {
  m.def("cuda_compiled", &cuda::compiled_with_cuda, "True when Genesis was built with CUDA.");
  m.def("cuda_device_count", &cuda::device_count);
  m.def("cuda_is_available", &cuda::is_available);
  m.def("cuda_current_device", &cuda::current_device_or_zero, "The current CUDA device (0 without one).");
  m.def("cuda_set_device", &cuda::set_device, py::arg("device"));
  m.def("cuda_synchronize", &cuda::synchronize_device, py::arg("device"), py::call_guard<py::gil_scoped_release>());
  m.def("cuda_sync_index_checks", &cuda::sync_index_checks);
  m.def("cuda_set_sync_index_checks", &cuda::set_sync_index_checks, py::arg("on"));
  m.def(
      "cuda_mem_get_info",
      [](int device) {
        const cuda::DeviceMemInfo info = cuda::mem_get_info(device);
        return py::make_tuple(info.free_bytes, info.total_bytes);
      },
      py::arg("device"));
  m.def(
      "cuda_get_device_name", [](int device) { return cuda::get_device_name(device); }, py::arg("device"));
  m.def(
      "cuda_get_device_capability",
      [](int device) {
        const auto [major, minor] = cuda::get_device_capability(device);
        return py::make_tuple(major, minor);
      },
      py::arg("device"));
  m.def("cuda_can_access_peer", &cuda::can_access_peer, py::arg("device"), py::arg("peer"));
  m.def("cuda_enable_peer_access", &cuda::enable_peer_access, py::arg("device"), py::arg("peer"));

  py::class_<cuda::DeviceProperties>(m, "CudaDeviceProperties", "What a GPU is (genesis.cuda.get_device_properties).")
      .def_readonly("index", &cuda::DeviceProperties::index)
      .def_readonly("name", &cuda::DeviceProperties::name)
      .def_readonly("major", &cuda::DeviceProperties::major)
      .def_readonly("minor", &cuda::DeviceProperties::minor)
      .def_readonly("total_memory", &cuda::DeviceProperties::total_memory)
      .def_readonly("multi_processor_count", &cuda::DeviceProperties::multi_processor_count)
      .def_readonly("max_threads_per_block", &cuda::DeviceProperties::max_threads_per_block)
      .def_readonly("max_threads_per_multi_processor", &cuda::DeviceProperties::max_threads_per_multi_processor)
      .def_readonly("warp_size", &cuda::DeviceProperties::warp_size)
      .def_readonly("shared_memory_per_block", &cuda::DeviceProperties::shared_memory_per_block)
      .def_readonly("shared_memory_per_block_optin", &cuda::DeviceProperties::shared_memory_per_block_optin)
      .def_readonly("registers_per_block", &cuda::DeviceProperties::registers_per_block)
      .def_readonly("l2_cache_size", &cuda::DeviceProperties::l2_cache_size)
      // torch.cuda's spelling of the same figure.
      .def_readonly("L2_cache_size", &cuda::DeviceProperties::l2_cache_size)
      .def_readonly("memory_bus_width", &cuda::DeviceProperties::memory_bus_width)
      .def_readonly("memory_clock_rate", &cuda::DeviceProperties::memory_clock_khz, "kHz")
      .def_readonly("clock_rate", &cuda::DeviceProperties::clock_khz, "kHz")
      .def_readonly("integrated", &cuda::DeviceProperties::integrated)
      .def_readonly("is_integrated", &cuda::DeviceProperties::integrated)
      .def_readonly("managed_memory", &cuda::DeviceProperties::managed_memory)
      .def_readonly("concurrent_managed_access", &cuda::DeviceProperties::concurrent_managed_access)
      .def_readonly("ecc_enabled", &cuda::DeviceProperties::ecc_enabled)
      .def_readonly("pci_bus_id", &cuda::DeviceProperties::pci_bus_id)
      .def_property_readonly("uuid", &cuda::DeviceProperties::uuid_string)
      .def("__repr__", [](const cuda::DeviceProperties& p) {
        return "_CudaDeviceProperties(name='" + p.name + "', major=" + std::to_string(p.major) +
               ", minor=" + std::to_string(p.minor) + ", total_memory=" + std::to_string(p.total_memory >> 20) +
               "MB, multi_processor_count=" + std::to_string(p.multi_processor_count) +
               ", uuid=" + p.uuid_string().substr(4) + ", L2_cache_size=" + std::to_string(p.l2_cache_size >> 20) +
               "MB)";
      });
  // The cached C++ object lives for the whole process: returned by reference.
  m.def("cuda_get_device_properties", &cuda::get_device_properties, py::arg("device"),
        py::return_value_policy::reference);

  py::class_<DeviceGuardObject>(m, "CudaDeviceGuard", "Used by genesis.cuda.device (one per `with` block).")
      .def(py::init([](int device) {
             auto g = std::make_unique<DeviceGuardObject>();
             g->device = device;
             return g;
           }),
           py::arg("device"))
      .def("__enter__",
           [](DeviceGuardObject& g) {
             if (g.guard) throw py::value_error("this device guard is already active");
             g.guard.emplace(g.device);
             g.thread = std::this_thread::get_id();
             return g.guard->previous_device();
           })
      .def("__exit__", [](DeviceGuardObject& g, py::args) {
        if (g.guard && g.thread != std::this_thread::get_id())
          throw py::value_error("genesis.cuda.device: exited on another thread than it was entered on");
        g.guard.reset();
        return false;
      });
}

}  // namespace genesis::python
