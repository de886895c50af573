"""Tensors: ``genesis.Tensor`` and the functions that make and
combine them. Everything is C++ (python/src/py_tensor*.cpp, py_dlpack.cpp); this
module only registers the Python objects the bindings hand out (dtypes,
devices, the (values, indices) result type) and re-exports the functions
under their public names. ``genesis.empty`` is the C++ function itself: no
Python frame sits on the allocation hot path.
"""

from collections import namedtuple as _namedtuple

from . import _C
from ._device import device as _device
from ._dtype import dtype as _dtype

# max(dim) / min(dim): a named tuple, as torch.return_types.max.
values_indices = _namedtuple("values_indices", ["values", "indices"])
values_indices.__module__ = "genesis"

_C._register_tensor_types([_dtype._by_value[v] for v in sorted(_dtype._by_value)], _device, values_indices)

Tensor = _C.Tensor
Tensor.__module__ = "genesis"

_FUNCTIONS = (
    # creation
    "tensor", "empty", "zeros", "ones", "full", "arange", "rand", "randn", "randint",
    "empty_like", "zeros_like", "ones_like", "full_like", "rand_like", "randn_like",
    "manual_seed", "initial_seed", "from_numpy", "from_dlpack",
    # math
    "add", "sub", "mul", "div", "pow", "floor_divide", "remainder", "eq", "ne", "lt", "le", "gt", "ge",
    "logical_and", "logical_or", "logical_not", "maximum", "minimum", "fmod",
    "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "bitwise_left_shift", "bitwise_right_shift",
    "neg", "abs", "exp", "log", "sqrt", "relu", "sigmoid", "tanh", "sin", "cos", "where", "matmul",
    "nonzero", "count_nonzero", "equal", "allclose",
    # reductions
    "sum", "prod", "mean", "max", "min", "argmax", "argmin",
    # shapes
    "stack", "cat", "split", "chunk", "broadcast_to", "transpose", "flatten", "reshape",
)
globals().update({name: getattr(_C, name) for name in _FUNCTIONS})

__all__ = ["Tensor", "values_indices", *_FUNCTIONS]
