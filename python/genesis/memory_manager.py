"""genesis.memory_manager: maintenance of the caching allocators
(garbage collection of the cache, compaction, warm-up).

    genesis.memory_manager.collect_garbage()   # release rarely used cached blocks
    genesis.memory_manager.compact()           # release memory that backs no allocation
    genesis.memory_manager.warmup({'1MB': 8})  # preallocate common sizes

``device=None`` acts on every process-wide allocator (host, each GPU, pinned);
each function returns what the C++ allocators report.
"""

from ._memory_api import empty_cache
from ._registry import process_allocators, resolve

__all__ = ["collect_garbage", "compact", "warmup", "empty_cache"]


def _targets(device):
    return process_allocators() if device is None else [resolve(device)]


def collect_garbage(max_idle=0.0, device=None):
    """Releases cached segments not used for ``max_idle`` seconds (0: every
    wholly free one) and free pages of idle expandable segments. Returns the
    bytes released."""
    return sum(t.collect_garbage(max_idle) for t in _targets(device))


def compact(device=None):
    """Releases physical memory that backs no allocation (free pages inside
    expandable segments, wholly free segments), keeping address ranges so that
    regrowth is cheap. Returns the bytes released."""
    return sum(t.compact() for t in _targets(device))


def warmup(sizes, device=None, stream=0):
    """Reserves memory for common sizes ahead of time on one device (default:
    the default device): {size: count}, [(size, count)] or [size]."""
    resolve(device).warmup(sizes, stream)
