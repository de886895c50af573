"""Memory functions of genesis.cuda (statistics, limits, pinned memory), PyTorch-style.

``device=None`` is the current CUDA device. Without a GPU every function that
reads or changes a GPU's allocator raises genesis.CudaError; arguments are
checked first, so a bad value raises ValueError / TypeError on any machine.
empty_cache() without a GPU does nothing (there is no cache to empty).
"""

from .. import _C
from .._allocator_view import check_fraction
from .._device import device as _device
from .._errors import require_cuda
from .._sizes import to_bytes
from ._runtime import device_index


def _dev(device, what):
    return _device(f"cuda:{device_index(device, what)}")


def memory_allocated(device=None):
    """Bytes allocated on a GPU (blocks handed out, rounded to 512)."""
    return _dev(device, "genesis.cuda.memory_allocated()").memory_allocated()


def memory_cached(device=None):
    """Bytes cached on a GPU (reserved - allocated)."""
    return _dev(device, "genesis.cuda.memory_cached()").memory_cached()


def memory_reserved(device=None):
    """Bytes reserved from a GPU (segments)."""
    return _dev(device, "genesis.cuda.memory_reserved()").memory_reserved()


def max_memory_allocated(device=None):
    """Peak allocated bytes since the last reset."""
    return _dev(device, "genesis.cuda.max_memory_allocated()").max_memory_allocated()


def max_memory_cached(device=None):
    """Peak cached bytes since the last reset."""
    return _dev(device, "genesis.cuda.max_memory_cached()").max_memory_cached()


def max_memory_reserved(device=None):
    """Peak reserved bytes since the last reset."""
    return _dev(device, "genesis.cuda.max_memory_reserved()").max_memory_reserved()


def memory_stats(device=None):
    """MemoryStats of a GPU's allocator."""
    return _dev(device, "genesis.cuda.memory_stats()").memory_stats()


def memory_summary(device=None):
    """Readable statistics table of a GPU's allocator."""
    return _dev(device, "genesis.cuda.memory_summary()").memory_summary()


def reset_peak_memory_stats(device=None):
    _dev(device, "genesis.cuda.reset_peak_memory_stats()").reset_peak_stats()


def reset_memory_stats(device=None):
    _dev(device, "genesis.cuda.reset_memory_stats()").reset_memory_stats()


def reset_accumulated_memory_stats(device=None):
    """Counters and totals start again; peaks are kept (PyTorch's meaning)."""
    _dev(device, "genesis.cuda.reset_accumulated_memory_stats()").reset_accumulated_memory_stats()


def memory_snapshot(device=None):
    """Segments of every GPU's allocator (device=None) or of one GPU: dicts
    with address, size, state, stream, pool, device and blocks."""
    if device is not None:
        return _dev(device, "genesis.cuda.memory_snapshot()").memory_snapshot()
    require_cuda("genesis.cuda.memory_snapshot()")
    out = []
    for i in range(_C.cuda_device_count()):
        out += _device(f"cuda:{i}").memory_snapshot()
    return out


def empty_cache():
    """Returns the cached memory of every GPU to the driver (no-op without a GPU)."""
    for i in range(_C.cuda_device_count()):
        _C.cuda_allocator(i).empty_cache()


def set_memory_fraction(fraction, device=None):
    """Caps what a GPU's pool may reserve at ``fraction`` (0, 1] of its memory."""
    f = check_fraction(fraction)
    _dev(device, "genesis.cuda.set_memory_fraction()").set_memory_fraction(f)


def set_cache_size(size, device=None):
    """Caps cached-but-unused memory of a GPU's pool: bytes or '2GB'; None removes the cap."""
    n = None if size is None else to_bytes(size, "cache size")
    _dev(device, "genesis.cuda.set_cache_size()").set_cache_size(n)
