"""CUDA runtime functions of genesis.cuda (SPEC T6) that exist in C++ today.

Without a GPU, is_available() is False, device_count() is 0 and the calls that
need a GPU raise genesis.CudaError.

TODO(issue 6, CUDA runtime): get_device_name, get_device_capability,
get_device_properties and the stream() / device() context managers are being
written in C++ by another engineer. The hooks below call the bindings
``_C._cuda_get_device_name`` etc. (see python/src/cuda_runtime.cpp) once they
exist and raise NotImplementedError until then. Replace each hook with its
real Python wrapper when its binding lands.
"""

from .. import _C
from .._device import device as _device
from .._errors import require_cuda


def is_available():
    """True when at least one CUDA GPU can be used."""
    return _C.cuda_is_available()


def device_count():
    """Number of usable CUDA GPUs (0 without CUDA or a GPU)."""
    return _C.cuda_device_count()


def current_device():
    """Index of the calling thread's current CUDA device. CudaError without a GPU."""
    require_cuda("genesis.cuda.current_device()")
    return _C.cuda_current_device()


def device_index(device, what):
    """None (current device), an int, 'cuda:N' or a genesis.device -> a CUDA
    index that exists. Raises CudaError without a GPU, ValueError / TypeError
    for a bad device."""
    if device is None:
        require_cuda(what)
        return _C.cuda_current_device()
    d = device if isinstance(device, _device) else None
    if d is None:
        if isinstance(device, bool) or not isinstance(device, (int, str)):
            raise TypeError(f"{what}: device must be None, an int, a string such as 'cuda:0' or a "
                            f"genesis.device, got {type(device).__name__}")
        if isinstance(device, int) and device < 0:
            raise ValueError(f"{what}: device index must be >= 0, got {device}")
        if isinstance(device, str) and not device.startswith("cuda"):
            raise ValueError(f"{what}: expected a CUDA device, got {device!r}")
        require_cuda(what)
        d = _device(device)
    if d.type != "cuda":
        raise ValueError(f"{what}: expected a CUDA device, got {d}")
    return d.index


def synchronize(device=None):
    """Waits for all work queued on a CUDA device (default: the current one)."""
    _C.cuda_synchronize(device_index(device, "genesis.cuda.synchronize()"))


def mem_get_info(device=None):
    """(free, total) bytes of a GPU as the driver reports them."""
    return _C.cuda_mem_get_info(device_index(device, "genesis.cuda.mem_get_info()"))


# --- TODO hooks (see the module docstring) ------------------------------------
def _hook(binding, public_name):
    def call(*args, **kwargs):
        fn = getattr(_C, binding, None)
        if fn is None:
            raise NotImplementedError(
                f"genesis.cuda.{public_name}() is not available yet: its C++ binding "
                f"genesis._C.{binding} is still being written (issue 6)")
        return fn(*args, **kwargs)

    call.__name__ = public_name
    call.__qualname__ = public_name
    call.__doc__ = f"TODO(issue 6): forwards to genesis._C.{binding} once it exists."
    return call


get_device_name = _hook("_cuda_get_device_name", "get_device_name")
get_device_capability = _hook("_cuda_get_device_capability", "get_device_capability")
get_device_properties = _hook("_cuda_get_device_properties", "get_device_properties")
stream = _hook("_cuda_stream", "stream")
device = _hook("_cuda_device_guard", "device")
