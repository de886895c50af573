"""CUDA runtime functions of genesis.cuda: devices and their properties.

Without a GPU, is_available() is False, device_count() is 0 and every call
that needs a GPU raises genesis.CudaError saying why (arguments are checked
first, so a bad argument is a ValueError / TypeError on any machine).

    genesis.cuda.get_device_name()            # 'NVIDIA H200'
    genesis.cuda.get_device_capability()      # (9, 0)
    genesis.cuda.get_device_properties().total_memory
    with genesis.cuda.device(1): ...          # restores the previous device on exit
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


def set_device(device):
    """Makes ``device`` the calling thread's current CUDA device."""
    _C.cuda_set_device(device_index(device, "genesis.cuda.set_device()"))


def synchronize(device=None):
    """Waits for all work queued on a CUDA device (default: the current one)."""
    _C.cuda_synchronize(device_index(device, "genesis.cuda.synchronize()"))


def sync_index_checks():
    """Whether GPU gathers (``x[idx]``) and assignments raise IndexError at the call.

    False by default: the gather kernel checks every index itself, never reads
    through one out of range, and the IndexError (naming the index, the
    dimension and its size, as on the CPU) is raised at the next
    synchronisation: ``synchronize()``, ``Stream.synchronize()``,
    ``Event.synchronize()``, ``.cpu()``, ``.item()``, ``.numpy()``, printing.
    No hidden device-to-host wait, no dead CUDA context. The environment
    variable GENESIS_SYNC_INDEX_CHECKS=1 makes True the default.
    """
    return _C.cuda_sync_index_checks()


def set_sync_index_checks(on):
    """True: every GPU gather and index assignment waits for its kernel and
    raises at the call (for debugging, like CUDA_LAUNCH_BLOCKING). Either way
    an assignment with an index out of range writes nothing."""
    if not isinstance(on, bool):
        raise TypeError(f"set_sync_index_checks() expects a bool, got {type(on).__name__}")
    _C.cuda_set_sync_index_checks(on)


def mem_get_info(device=None):
    """(free, total) bytes of a GPU as the driver reports them."""
    return _C.cuda_mem_get_info(device_index(device, "genesis.cuda.mem_get_info()"))


def get_device_name(device=None):
    """The GPU's name, e.g. 'NVIDIA H200'."""
    return _C.cuda_get_device_name(device_index(device, "genesis.cuda.get_device_name()"))


def get_device_capability(device=None):
    """(major, minor) compute capability, e.g. (9, 0) on Hopper."""
    return _C.cuda_get_device_capability(device_index(device, "genesis.cuda.get_device_capability()"))


def get_device_properties(device=None):
    """What a GPU is: name, major, minor, total_memory, multi_processor_count,
    warp_size, L2_cache_size, uuid, pci_bus_id, ... (as torch.cuda's)."""
    return _C.cuda_get_device_properties(device_index(device, "genesis.cuda.get_device_properties()"))


def can_device_access_peer(device, peer_device):
    """True when kernels on ``device`` can access memory of ``peer_device``
    (a device always reaches its own memory)."""
    what = "genesis.cuda.can_device_access_peer()"
    return _C.cuda_can_access_peer(device_index(device, what), device_index(peer_device, what))


class device:
    """``with genesis.cuda.device(1):`` makes GPU 1 current inside the block and
    restores the previous current device on exit, exceptions included.

    ``device`` is an int, 'cuda:N' or a genesis.device; None or -1 make the
    block a no-op (as in torch). Nesting and reusing one object are fine.
    Without a GPU, entering raises genesis.CudaError."""

    def __init__(self, device):
        if device is None or (isinstance(device, int) and not isinstance(device, bool) and device == -1):
            self.idx = -1
        else:
            self.idx = device_index(device, "genesis.cuda.device()")
        self._guards = []  # one C++ guard per active `with` (nesting the same object)

    def __enter__(self):
        if self.idx == -1:
            self._guards.append(None)
            return self
        guard = _C.CudaDeviceGuard(self.idx)
        guard.__enter__()
        self._guards.append(guard)
        return self

    def __exit__(self, *exc):
        guard = self._guards.pop()
        if guard is not None:
            guard.__exit__(*exc)
        return False

    def __repr__(self):
        return f"genesis.cuda.device({self.idx})"
