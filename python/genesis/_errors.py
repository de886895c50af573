"""Genesis exception types and the "needs a GPU" check.

The C++ exception translator (python/src/py_errors.cpp) raises these types, so
they are defined in genesis._C and re-exported here:

- ``OutOfMemoryError`` (a ``RuntimeError``): the allocator could not satisfy a
  request after releasing its cache; on a GPU the message contains ``CUDA OOM``.
- ``CudaError`` (a ``RuntimeError``): a CUDA call failed, or a GPU is needed
  and there is none; ``code`` is the raw CUDA error code.
- ``InvalidArgumentError`` (a ``ValueError`` and a ``RuntimeError``): a wrong
  value, such as shapes that do not broadcast. NumPy users catch ValueError,
  PyTorch users RuntimeError: both work.
- ``TypeMismatchError`` (a ``TypeError`` and a ``RuntimeError``): a wrong
  dtype, such as a bitwise operation on floating tensors.
- ``DivisionByZeroError`` (a ``ZeroDivisionError`` and a ``RuntimeError``):
  an integer ``//``, ``%``, ``fmod`` or ``div(rounding_mode=...)`` by zero.

Bad indices raise IndexError, other C++ errors RuntimeError. Messages say
what was wrong without the C++ source location of the check; that is the
exception's ``cpp_location`` attribute ("shape_ops.cpp:120"), and
GENESIS_DEBUG_ERRORS=1 in the environment appends it to messages too.
"""

from . import _C

OutOfMemoryError = _C.OutOfMemoryError
CudaError = _C.CudaError
InvalidArgumentError = _C.InvalidArgumentError
TypeMismatchError = _C.TypeMismatchError
DivisionByZeroError = _C.DivisionByZeroError

# cudaErrorNoDevice: the code C++ uses when CUDA is not usable at all.
_NO_DEVICE_CODE = 100


def require_cuda(what):
    """Raises CudaError explaining why ``what`` cannot run, unless a GPU is usable."""
    if _C.cuda_is_available():
        return
    why = ("no CUDA GPU is available on this machine" if _C.cuda_compiled()
           else "Genesis was built without CUDA")
    err = CudaError(f"{what} needs a CUDA GPU, but {why} (genesis.cuda.is_available() is False)")
    err.code = _NO_DEVICE_CODE
    raise err
