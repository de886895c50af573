"""The memory API shared by everything that has an allocator behind it:
``genesis.device(...)``, ``genesis.testing.SimulatedAllocator``, and through
them the module-level functions: statistics, snapshots, limits and
maintenance.

A subclass provides ``_allocator()`` (a genesis._C.Allocator) and
``_label()`` (the name used in reports). All methods are thin: the numbers
come from the C++ CachingAllocator.
"""

import numbers

from ._sizes import to_bytes, to_count, to_stream
from ._stats import DetailedMemoryStats, MemoryStats, allocations_from_raw

_NO_CACHE_LIMIT = (1 << 64) - 1  # SIZE_MAX in C++: no cap


def check_fraction(fraction):
    """A memory fraction in (0, 1] as a float (TypeError / ValueError otherwise)."""
    if isinstance(fraction, bool) or not isinstance(fraction, numbers.Real):
        raise TypeError(f"memory fraction must be a number in (0, 1], got {type(fraction).__name__}")
    f = float(fraction)
    if not 0.0 < f <= 1.0:  # also rejects NaN
        raise ValueError(f"memory fraction must be in (0, 1], got {fraction!r}")
    return f


def normalize_warmup_sizes(sizes):
    """{size: count}, [(size, count), ...] or [size, ...] -> [(bytes, count)]."""
    if isinstance(sizes, (str, bytes)) or not hasattr(sizes, "__iter__"):
        raise TypeError("warmup sizes must be a dict {size: count} or a list of sizes or (size, count) pairs")
    items = sizes.items() if isinstance(sizes, dict) else sizes
    out = []
    for item in items:
        if isinstance(item, tuple):
            if len(item) != 2:
                raise ValueError(f"warmup: expected (size, count), got {item!r}")
            size, count = item
        else:
            size, count = item, 1
        n = to_bytes(size, "warmup size")
        if n == 0:
            raise ValueError("warmup sizes must be positive")
        out.append((n, to_count(count, "warmup count")))
    return out


class AllocatorView:
    """Memory statistics and controls of one allocator."""

    __slots__ = ()

    def _allocator(self):  # pragma: no cover - provided by subclasses
        raise NotImplementedError

    def _label(self):  # pragma: no cover - provided by subclasses
        raise NotImplementedError

    # --- statistics ---------------------------------------------------------
    def memory_stats(self):
        """All statistics as a MemoryStats (a dict with attribute access)."""
        return MemoryStats(self._allocator().stats(), self._label())

    def detailed_memory_stats(self):
        """memory_stats() plus the live allocations with their locations."""
        a = self._allocator()
        raw = a.stats()
        allocations = allocations_from_raw(a.large_allocations(0), self._label())
        return DetailedMemoryStats(raw, self._label(), allocations)

    def memory_allocated(self):
        """Bytes of blocks handed out and not yet freed (rounded to 512)."""
        return self._allocator().stats()["allocated_bytes"]

    def memory_cached(self):
        """Bytes the cache holds: reserved - allocated."""
        return self._allocator().stats()["cached_bytes"]

    def memory_reserved(self):
        """Bytes obtained from the device (segments)."""
        return self._allocator().stats()["reserved_bytes"]

    def max_memory_allocated(self):
        """Peak of memory_allocated() since the last reset."""
        return self._allocator().stats()["peak_allocated"]

    def max_memory_cached(self):
        """Peak of memory_cached() since the last reset."""
        return self._allocator().stats()["peak_cached"]

    def max_memory_reserved(self):
        """Peak of memory_reserved() since the last reset."""
        return self._allocator().stats()["peak_reserved"]

    def memory_summary(self):
        """A readable table of the statistics."""
        return self._allocator().memory_summary()

    def memory_snapshot(self):
        """Every segment with its blocks: list of dicts (address, size, state,
        stream, pool, blocks, ...)."""
        label = self._label()
        segments = self._allocator().snapshot()
        for s in segments:
            s["device"] = label
        return segments

    def large_allocations(self, min_size=0):
        """Live allocations of at least ``min_size`` bytes, largest first."""
        raw = self._allocator().large_allocations(to_bytes(min_size, "min_size"))
        return allocations_from_raw(raw, self._label())

    def reset_memory_stats(self):
        """Counters, totals and peaks start again from the current state."""
        self._allocator().reset_memory_stats()

    def reset_peak_stats(self):
        """Peaks become the current values."""
        self._allocator().reset_peak_stats()

    def reset_accumulated_memory_stats(self):
        """Counters and totals (every statistic's "allocated" and "freed",
        hits, OOMs, driver calls) start again; peaks are kept."""
        self._allocator().reset_accumulated_stats()

    reset_peak_memory_stats = reset_peak_stats  # PyTorch's name

    # --- controls -----------------------------------------------------------
    def empty_cache(self):
        """Returns cached memory that fills whole segments to the device."""
        self._allocator().empty_cache()

    def set_memory_fraction(self, fraction):
        """Caps reserved memory at ``fraction`` (0, 1] of the device's total."""
        self._allocator().set_memory_fraction(check_fraction(fraction))

    def set_cache_size(self, size):
        """Caps cached memory (reserved - allocated): bytes or '2GB'; None
        removes the cap."""
        self._allocator().set_cache_size(_NO_CACHE_LIMIT if size is None else to_bytes(size, "cache size"))

    def memory_limit(self):
        """The cap on reserved bytes from set_memory_fraction (None: no cap)."""
        limit = self._allocator().memory_limit()
        return None if limit >= _NO_CACHE_LIMIT else limit

    def collect_garbage(self, max_idle=0.0):
        """Releases cached segments unused for ``max_idle`` seconds; returns
        the bytes released."""
        if isinstance(max_idle, bool) or not isinstance(max_idle, numbers.Real):
            raise TypeError(f"max_idle must be a number of seconds, got {type(max_idle).__name__}")
        return self._allocator().collect_garbage(float(max_idle))

    def compact(self):
        """Releases memory that backs no allocation (free pages, free
        segments) but keeps address ranges; returns the bytes released."""
        return self._allocator().compact()

    def warmup(self, sizes, stream=0):
        """Allocates and frees the given sizes so later requests hit the cache:
        {size: count}, [(size, count)] or [size]; sizes as bytes or '1MB'."""
        self._allocator().warmup(normalize_warmup_sizes(sizes), to_stream(stream))
