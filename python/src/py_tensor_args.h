// Python argument conversion shared by the tensor bindings.
//
// Tensors take and return the public Python objects (genesis.float32,
// genesis.device('cuda')), not the _C internals. Those objects are made in
// Python (python/genesis/_dtype.py, _device.py); genesis/_tensor.py hands
// them to C++ once at import (_C._register_tensor_types), and C++ keeps a table
// of them so that `t.dtype` and `t.device` are a table lookup, not a call
// into Python, and `dtype=genesis.float32` is a pointer comparison.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <pybind11/pybind11.h>

#include "genesis/core/device.h"
#include "genesis/core/dtype.h"
#include "genesis/tensor/tensor.h"

namespace genesis::python {

namespace py = pybind11;

/// The genesis.dtype object of a DType (registered at import).
py::object dtype_object(DType t);
/// The genesis.device object of a Device (made once per device, cached).
py::object device_object(Device d);
/// The namedtuple type of max(dim)/min(dim) results (values, indices).
py::object values_indices(Tensor values, Tensor indices);

/// A dtype argument: a genesis.dtype, a name ('float32', 'half'), a NumPy
/// dtype or scalar type, or Python's bool/int/float (bool, int64, float64 as
/// in PyTorch). TypeError for anything else, ValueError for unknown names.
DType to_dtype(py::handle h);
/// None -> nullopt, anything else as to_dtype.
std::optional<DType> to_opt_dtype(py::handle h);
/// A device argument: None (the CPU), 'cpu' / 'cuda' / 'cuda:N', a
/// genesis.device, a _C.Device, or an int (a CUDA index).
Device to_device(py::handle h);
/// A size: ints as varargs (`zeros(2, 3)`) or one sequence (`zeros((2, 3))`).
/// Negative sizes are left to C++ (ValueError there).
std::vector<std::int64_t> to_shape(py::handle args);
/// One integer: Python int, NumPy integer, or anything with __index__
/// (bool refused: TypeError). Overflow beyond int64: OverflowError.
std::int64_t to_int64(py::handle h, const char* what);
/// An element-wise operand: a Tensor, or a Python/NumPy scalar (a weak
/// scalar for type promotion). nullopt when `h` is neither (the operator
/// then returns NotImplemented).
std::optional<TensorOrScalar> to_operand(py::handle h);
/// A Python scalar (bool, int, float, NumPy scalar, 0-d ndarray) as a Scalar.
std::optional<Scalar> to_scalar(py::handle h);
/// A Tensor from a Tensor or anything genesis.tensor() accepts.
Tensor as_tensor(py::handle h);
/// True when `h` is a genesis.Tensor (a cached type check, no type-table lookup).
bool is_tensor(py::handle h);
/// The Tensor inside a genesis.Tensor object (TypeError for anything else).
Tensor& tensor_ref(py::handle h);

/// The Python object of a Tensor result (py::cast without its per-call
/// type-table lookups: the hot path of genesis.empty).
py::object wrap(Tensor t);

/// Makes genesis.Tensor.__new__ construct an (undefined) C++ Tensor, so no
/// instance ever lacks one (py_tensor.cpp calls it once on the class).
void install_tensor_new(py::handle cls);

/// Registers the Python-side objects (called once by genesis/_tensor.py).
void bind_tensor_args(py::module_& m);

}  // namespace genesis::python

namespace genesis::python {

/// genesis.tensor(data): nested sequences of Python/NumPy scalars, NumPy
/// arrays, Tensors (copied). dtype None = inferred (bool, int64, float32 as
/// PyTorch; a NumPy array keeps its dtype).
Tensor tensor_from_data(py::handle data, std::optional<DType> dtype, Device device);
/// A CPU tensor sharing an ndarray's memory (keeps the array alive).
Tensor from_numpy_array(py::handle array);
/// True when `h` is a numpy.ndarray (without importing NumPy when it is not loaded).
bool is_ndarray(py::handle h);

}  // namespace genesis::python
