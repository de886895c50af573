"""genesis.cpu: host memory (pageable and pinned).

enable_pinned_memory(True) makes host buffers that feed GPU copies come from
the pinned pool (copies then run at DMA speed); it needs a GPU. The host
allocator's statistics are those of genesis.device('cpu').
"""

from . import _C
from ._device import device as _device
from ._errors import require_cuda


def enable_pinned_memory(enabled=True):
    """Turns pinned host memory for transfers on or off. Turning it on without
    a GPU raises genesis.CudaError; turning it off always works."""
    if not isinstance(enabled, bool):
        raise TypeError(f"enable_pinned_memory() takes True or False, got {type(enabled).__name__}")
    if enabled:
        require_cuda("genesis.cpu.enable_pinned_memory(True)")
    _C.set_pinned_host_memory(enabled)


def pinned_memory_enabled():
    """True after enable_pinned_memory(True)."""
    return _C.pinned_host_memory_enabled()


def memory_stats():
    """MemoryStats of the host allocator."""
    return _device("cpu").memory_stats()


def memory_allocated():
    """Bytes allocated from the host allocator."""
    return _device("cpu").memory_allocated()


def empty_cache():
    """Returns the host allocator's cached memory to the system."""
    _device("cpu").empty_cache()
