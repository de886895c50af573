// The parts of the genesis.Tensor binding, one file each (one concern per file).
// bind_tensor (py_tensor.cpp, declared in py_bindings.h) makes the class and calls
// these in order.
#pragma once

#include <pybind11/pybind11.h>

#include "genesis/tensor/tensor.h"

namespace genesis::python {

namespace py = pybind11;
using TensorClass = py::class_<Tensor>;

/// genesis.tensor, empty, zeros, ones, full, arange, rand, randn, randint,
/// *_like, manual_seed (py_tensor_creation.cpp).
void bind_tensor_creation(py::module_& m);
/// Operators, math, reductions, matmul (py_tensor_ops.cpp).
void bind_tensor_ops(py::module_& m, TensorClass& cls);
/// view, reshape, transpose, ... and stack, cat, split, chunk (py_tensor_shape.cpp).
void bind_tensor_shape(py::module_& m, TensorClass& cls);
/// __getitem__ / __setitem__ (py_tensor_index.cpp).
void bind_tensor_index(TensorClass& cls);
/// numpy(), __array__, from_numpy (py_tensor_numpy.cpp).
void bind_tensor_numpy(py::module_& m, TensorClass& cls);
/// __dlpack__, __dlpack_device__, from_dlpack (py_dlpack.cpp).
void bind_dlpack(py::module_& m, TensorClass& cls);

/// A shape as a Python tuple of ints.
py::tuple shape_tuple(const Shape& s);
/// A Scalar as a Python bool, int or float.
py::object scalar_object(const Scalar& s);

}  // namespace genesis::python
