"""Module-level memory functions of the current device: genesis.memory_stats(),
genesis.empty_cache(), genesis.detailed_memory_stats(), ...

``device=None`` means the default device: the current CUDA device when a
GPU is usable, else the CPU (host allocator).
"""

from . import _C
from ._registry import resolve


def memory_stats(device=None):
    """MemoryStats of a device's allocator (dict and attribute access)."""
    return resolve(device).memory_stats()


def detailed_memory_stats(device=None):
    """memory_stats() plus total_allocated, pools and
    get_large_allocations(min_size) with each allocation's location and size."""
    return resolve(device).detailed_memory_stats()


def memory_summary(device=None):
    """A readable table of a device's statistics."""
    return resolve(device).memory_summary()


def memory_snapshot(device=None):
    """Segments and blocks of a device's allocator."""
    return resolve(device).memory_snapshot()


def empty_cache(device=None):
    """Returns cached memory to the system: every allocator (device=None) or one device's."""
    if device is None:
        _C.empty_all_caches()
    else:
        resolve(device).empty_cache()
