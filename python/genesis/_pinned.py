"""Pinned (page-locked) host memory: genesis.allocate_pinned(n)
and genesis.is_pinned(x).

allocate_pinned returns a genesis.PinnedBuffer from the pinned pool: it
supports the buffer protocol (memoryview(buf), numpy.frombuffer(buf, ...))
and data_ptr(), and goes back to the pool when it and every view of it are
gone. It needs a
GPU (pinning needs a CUDA context): without one it raises genesis.CudaError.
"""

from . import _C
from ._errors import require_cuda
from ._sizes import to_address, to_bytes

PinnedBuffer = _C.PinnedBuffer


def allocate_pinned(nbytes):
    """A PinnedBuffer of ``nbytes`` (int or '64MB') from the pinned pool."""
    n = to_bytes(nbytes, "nbytes")
    if n == 0:
        raise ValueError("allocate_pinned: nbytes must be positive")
    require_cuda("genesis.allocate_pinned()")
    return PinnedBuffer(n)


def _address_of(obj):
    if isinstance(obj, int) and not isinstance(obj, bool):
        return to_address(obj, "address")
    data_ptr = getattr(obj, "data_ptr", None)
    if callable(data_ptr):  # PinnedBuffer; storages and tensors later
        return to_address(data_ptr(), "data_ptr()")
    interface = getattr(obj, "__array_interface__", None)  # numpy arrays
    if isinstance(interface, dict) and "data" in interface:
        return to_address(interface["data"][0], "array data")
    raise TypeError(f"is_pinned() takes an address (int) or an object with data_ptr() or "
                    f"__array_interface__, got {type(obj).__name__}")


def is_pinned(obj):
    """True when ``obj`` (an address, a PinnedBuffer, a numpy array, ...)
    points into page-locked host memory. Always False without a GPU."""
    return _C.is_pinned(_address_of(obj))
