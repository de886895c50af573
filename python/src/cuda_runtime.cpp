// CUDA runtime queries that exist in C++ today (cuda/runtime.h). Without a
// GPU they report "no device" (is_available() is False) and the calls that
// need one raise genesis.CudaError.
//
// TODO(issue 6, CUDA runtime bindings): get_device_name, get_device_capability,
// get_device_properties, stream() and device() guards are being written in
// C++ by another engineer. Bind them here as "_cuda_get_device_name",
// "_cuda_get_device_capability", "_cuda_get_device_properties",
// "_cuda_stream" and "_cuda_device_guard"; python/genesis/cuda/_runtime.py
// already looks for exactly these names and raises NotImplementedError until
// they exist.
#include "bindings.h"
#include "genesis/cuda/runtime.h"

namespace genesis::python {

void bind_cuda_runtime(py::module_& m) {
  m.def("cuda_compiled", &cuda::compiled_with_cuda, "True when Genesis was built with CUDA.");
  m.def("cuda_device_count", &cuda::device_count);
  m.def("cuda_is_available", &cuda::is_available);
  m.def("cuda_current_device", &cuda::current_device_or_zero, "The current CUDA device (0 without one).");
  m.def("cuda_synchronize", &cuda::synchronize_device, py::arg("device"),
        py::call_guard<py::gil_scoped_release>());
  m.def(
      "cuda_mem_get_info",
      [](int device) {
        const cuda::DeviceMemInfo info = cuda::mem_get_info(device);
        return py::make_tuple(info.free_bytes, info.total_bytes);
      },
      py::arg("device"));
}

}  // namespace genesis::python
