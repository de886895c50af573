"""Element types: ``genesis.float32``, ``genesis.dtype('half')``, ...

One immutable object per C++ ``genesis::DType``, built from the C++ table, so
names, sizes and aliases are defined once (include/genesis/core/dtype.h).
Compare with ``==`` or ``is`` (each dtype exists once); ``repr`` is
``genesis.float16``. ``_value`` is the C++ enum value, for bindings that take
a dtype (tensors and storages, later).
"""

from . import _C


class dtype:
    """An element type. ``genesis.dtype(name)`` returns the dtype of a name or
    alias ('float32', 'float', 'half', 'bf16', 'torch.int64', ...), of a NumPy
    dtype (numpy.float16, numpy.dtype('int8')) or of a torch dtype; ValueError
    for unknown names."""

    __slots__ = ("name", "itemsize", "is_floating_point", "is_signed", "_value")
    _by_value = {}

    def __new__(cls, spec):
        if isinstance(spec, dtype):
            return spec
        if not isinstance(spec, str):
            spec = _foreign_name(spec)
        spec.encode("utf-8")  # lone surrogates: UnicodeEncodeError (a ValueError)
        return cls._by_value[_C.dtype_from_name(spec)]

    @classmethod
    def _make(cls, value, name, itemsize, is_floating_point):
        obj = object.__new__(cls)
        object.__setattr__(obj, "_value", value)
        object.__setattr__(obj, "name", name)
        object.__setattr__(obj, "itemsize", itemsize)
        object.__setattr__(obj, "is_floating_point", is_floating_point)
        object.__setattr__(obj, "is_signed", is_floating_point or name.startswith("int"))
        cls._by_value[value] = obj
        return obj

    def __setattr__(self, name, value):
        raise AttributeError("genesis.dtype objects are immutable")

    def __repr__(self):
        return f"genesis.{self.name}"

    __str__ = __repr__

    def __reduce__(self):
        # Unpickling returns the same singleton.
        return (dtype, (self.name,))

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self


def _foreign_name(spec):
    """The name of a NumPy dtype or scalar type (numpy.float16, numpy.dtype('int32'),
    Python's float -> float64, as NumPy reads them) or of a torch dtype
    ('torch.float32'), so that storages and tensors accept them as dtypes."""
    module = getattr(type(spec), "__module__", "") or ""
    if module.startswith("torch"):
        return str(spec)
    if isinstance(spec, type) or module.startswith("numpy"):
        try:
            import numpy
            return numpy.dtype(spec).name
        except (ImportError, TypeError):
            pass
    raise TypeError(f"genesis.dtype() takes a dtype name (str), a genesis.dtype, a NumPy dtype or a torch "
                    f"dtype, got {type(spec).__name__}")


_table = {name: dtype._make(value, name, itemsize, is_float)
          for value, name, itemsize, is_float in _C.dtype_table()}

bool = _table["bool"]  # noqa: A001 (genesis.bool, like torch.bool)
uint8 = _table["uint8"]
int8 = _table["int8"]
int16 = _table["int16"]
int32 = _table["int32"]
int64 = _table["int64"]
float16 = _table["float16"]
bfloat16 = _table["bfloat16"]
float32 = _table["float32"]
float64 = _table["float64"]
# PyTorch's short names.
half = float16
float = float32  # noqa: A001
double = float64
short = int16
int = int32  # noqa: A001
long = int64

all_dtypes = tuple(dtype._by_value[v] for v in sorted(dtype._by_value))

__all__ = ["dtype", "bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
           "float32", "float64", "half", "float", "double", "short", "int", "long", "all_dtypes"]
