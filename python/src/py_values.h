// Python values <-> the C++ value types that storage and CUDA bindings take:
// dtypes, devices, shapes. One place, so that every binding accepts the same
// spellings and returns the same Python objects as the rest of the package.
//
//   dtype:  genesis.dtype, or anything genesis.dtype() accepts (a name such as
//           'float16', a NumPy dtype or scalar type, a torch dtype)
//   device: genesis.device, genesis._C.Device, 'cpu' / 'cuda' / 'cuda:N', an
//           int (a CUDA index)
//   shape:  an int or a sequence of ints (anything with __index__)
// Results go back as genesis.dtype / genesis.device objects and tuples.
// All helpers need the GIL.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <vector>

#include "genesis/core/device.h"
#include "genesis/core/dtype.h"

namespace genesis::python {

namespace py = pybind11;

/// Parses a dtype through genesis.dtype(); TypeError / ValueError otherwise.
DType dtype_from_py(py::handle obj);
/// The genesis.dtype singleton of `t`.
py::object dtype_to_py(DType t);

/// Parses a device; TypeError for other types, ValueError for a bad string or
/// a CUDA device this machine does not have.
Device device_from_py(py::handle obj);
/// genesis.device(str(d)).
py::object device_to_py(const Device& d);

/// An int or a sequence of ints -> a shape. `what` names the argument in
/// errors ("shape", "stride"). TypeError for non-integers, OverflowError for
/// values outside int64. Negative values pass (the C++ checks say why they
/// are wrong where they are).
std::vector<std::int64_t> dims_from_py(py::handle obj, const char* what);
py::tuple dims_to_py(const std::vector<std::int64_t>& dims);

}  // namespace genesis::python
