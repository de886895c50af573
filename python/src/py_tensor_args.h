// Tensor arguments and results of the tensor bindings: operands (a Tensor or
// a scalar), the Tensor inside a genesis.Tensor, and the Python object of a
// Tensor result. Dtypes, devices and shapes go through the converter of every
// binding (py_values.h).
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
#include "py_values.h"

namespace genesis::python {

namespace py = pybind11;

/// The namedtuple type of max(dim)/min(dim) results (values, indices).
py::object values_indices(Tensor values, Tensor indices);

/// "integer 123" for a Python int (or anything with __index__); a number
/// too long to print is named by its size in bits.
std::string integer_text(py::handle i);

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
/// PyTorch; a NumPy array or scalar keeps its dtype). `what` names the
/// caller in errors.
Tensor tensor_from_data(py::handle data, std::optional<DType> dtype, Device device,
                        const char* what = "genesis.tensor()");
/// True when `h` is a NumPy scalar (np.float64(1), np.bool_(True), ...).
bool is_numpy_scalar(py::handle h);
/// A CPU tensor sharing an ndarray's memory (keeps the array alive).
Tensor from_numpy_array(py::handle array);
/// True when `h` is a numpy.ndarray (without importing NumPy when it is not loaded).
bool is_ndarray(py::handle h);

}  // namespace genesis::python
