// Python values -> the C++ value types every binding takes (dtypes, devices,
// integers, shapes) and back. The one argument converter of the bindings:
// storages, tensors, pickling and views all accept the same spellings, raise
// the same errors (naming the argument, what it got and what it expects) and
// return the same Python objects.
//
//   dtype:  a genesis.dtype, a name ('float32', 'half'), a NumPy dtype or
//           scalar type, a torch dtype, or Python's bool/int/float (bool,
//           int64, float64 as in PyTorch)
//   device: 'cpu' / 'cuda' / 'cuda:N', a genesis.device, a _C.Device, or an
//           int (a CUDA index); None too (the CPU) for tensors
//   shape:  an int or a sequence of ints (anything with __index__; never a
//           bool or a str)
// Results go back as the genesis.dtype / genesis.device objects that
// genesis/_tensor.py registers at import (a table lookup, not a call into
// Python) and tuples. All helpers need the GIL.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "genesis/core/device.h"
#include "genesis/core/dtype.h"

namespace genesis::python {

namespace py = pybind11;

/// The name of h's Python type ("int", "ndarray"), for error messages.
std::string type_name_of(py::handle h);

/// A dtype argument. TypeError for anything that is not a dtype (or a NumPy
/// dtype without a genesis equivalent), ValueError for an unknown name.
DType to_dtype(py::handle h);
/// None -> nullopt, anything else as to_dtype.
std::optional<DType> to_opt_dtype(py::handle h);
/// The genesis.dtype object of `t`.
py::object dtype_object(DType t);

/// A device argument of the storage functions (memory is taken at once).
/// TypeError for other types (None included), ValueError for a malformed
/// string or a negative index, CudaError for a well-formed CUDA device on a
/// machine without CUDA.
Device to_device(py::handle h);
/// A device argument of the tensor functions, which follow PyTorch: None is
/// the CPU, and a CUDA device on a machine without one is left to the tensor
/// layer (a ValueError saying there is no CUDA GPU). Parsed strings are
/// cached: `device='cuda'` is on the hot path of empty().
Device to_tensor_device(py::handle h);
/// The genesis.device object of `d` (made once per device, cached).
py::object device_object(Device d);

/// One integer: a Python int, a NumPy integer or anything with __index__.
/// `what` names the argument in errors. TypeError for bool and non-integers,
/// OverflowError for values outside int64.
std::int64_t to_int64(py::handle h, const char* what);
/// An int or a sequence of ints -> dims. `what` names the argument in errors
/// ("shape", "stride"). Negative values pass (the C++ checks say why they are
/// wrong where they are).
std::vector<std::int64_t> to_dims(py::handle h, const char* what);
/// A size given as varargs: ints (`zeros(2, 3)`) or one int or sequence
/// (`zeros((2, 3))`), as to_dims with `what` = "size".
std::vector<std::int64_t> to_shape(py::handle args);
py::tuple dims_to_py(const std::vector<std::int64_t>& dims);

/// NumPy's types, looked up once NumPy is imported; nullptr while it is not
/// (never imported here just to check a type: a program without NumPy pays
/// nothing). Owned for the life of the process.
struct NumpyTypes {
  PyObject* ndarray = nullptr;
  PyObject* generic = nullptr;
  PyObject* bool_ = nullptr;
  PyObject* integer = nullptr;
  PyObject* floating = nullptr;
  PyObject* dtype = nullptr;
};
const NumpyTypes* numpy_types();
/// isinstance(h, type); false when `type` is nullptr.
bool isinstance_of(py::handle h, PyObject* type);

/// Called once by genesis/_tensor.py (through _register_tensor_types): the
/// genesis.dtype objects in DType order and the genesis.device class.
void register_value_types(const py::list& dtypes, const py::object& device_cls);

}  // namespace genesis::python
