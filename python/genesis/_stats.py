"""Statistics objects returned by memory_stats() and detailed_memory_stats()
(current, peak and cumulative figures of one allocator).

User code reads statistics in two ways, and both work:
``stats['allocated_bytes']`` (as a dict, PyTorch-style) and ``stats.allocated_bytes``
(as attributes). Likewise ``stats.fragmentation_ratio()`` (a call, on
memory_stats) and ``f"{stats.fragmentation_ratio:.2%}"`` (a value, on
detailed_memory_stats): ratios are ``Ratio`` values, floats that can also be
called.
"""

import dataclasses

from ._sizes import format_bytes, to_bytes

_RATIO_KEYS = ("cache_hit_rate", "fragmentation_ratio")


class Ratio(float):
    """A float that returns itself when called, so that ``stats.x`` and
    ``stats.x()`` both give the value."""

    __slots__ = ()

    def __call__(self):
        return float(self)


class MemoryStats(dict):
    """Every statistic of one allocator, as a dict that also allows attribute
    access. Keys: allocated_bytes, cached_bytes, reserved_bytes, active_bytes,
    inactive_split_bytes (= inactive_bytes), requested_bytes, peak_allocated,
    peak_cached, peak_reserved, peak_active, num_allocations (= num_allocs),
    num_frees, num_cache_hits, num_cache_misses, cache_hit_rate,
    fragmentation_ratio, total_allocated, num_ooms, ... and the per-pool
    "<stat>.<all|small_pool|large_pool>.<current|peak|allocated|freed>".
    ``device`` (an attribute, not a key) names the allocator."""

    def __init__(self, raw, device=None):
        super().__init__(raw)
        for key in _RATIO_KEYS:
            if key in self:
                self[key] = Ratio(self[key])
        self.__dict__["device"] = device

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"{type(self).__name__} has no statistic '{name}'") from None

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is read-only (it is a snapshot)")

    def pool(self, which):
        """The statistics of one pool, 'small' or 'large' (or 'all'), as a dict
        {stat: {current, peak, allocated, freed}}."""
        if which not in ("small", "large", "all"):
            raise ValueError(f"pool must be 'small', 'large' or 'all', got {which!r}")
        tag = "all" if which == "all" else f"{which}_pool"
        out = {}
        for key, value in self.items():
            parts = key.split(".")
            if len(parts) == 3 and parts[1] == tag:
                out.setdefault(parts[0], {})[parts[2]] = value
        return out

    def __repr__(self):
        return (f"{type(self).__name__}(device={self.device!r}, "
                f"allocated={format_bytes(self['allocated_bytes'])}, "
                f"reserved={format_bytes(self['reserved_bytes'])}, "
                f"cached={format_bytes(self['cached_bytes'])}, "
                f"peak_allocated={format_bytes(self['peak_allocated'])}, "
                f"num_allocations={self['num_allocations']}, "
                f"cache_hit_rate={float(self['cache_hit_rate']):.3f}, "
                f"fragmentation_ratio={float(self['fragmentation_ratio']):.3f})")

    # A snapshot is a value: copies keep the class.
    def copy(self):
        return type(self)(dict(self), self.device)

    def __reduce__(self):
        return (type(self), (dict(self), self.device))


@dataclasses.dataclass(frozen=True)
class LargeAllocation:
    """A live allocation (in the detailed statistics): where it was made and how big."""

    location: str        # "file.py:42 in f" (memory debugging on), a C++ context, or "0x<address>"
    size: int            # bytes of the block (rounded to 512)
    requested_size: int  # bytes asked for
    address: int
    stream: int
    device: str

    def __str__(self):
        return f"{format_bytes(self.size)} at {self.location} ({self.device}, 0x{self.address:x})"


class DetailedMemoryStats(MemoryStats):
    """MemoryStats plus the live allocations at the time it was taken:
    ``get_large_allocations(min_size)`` (largest first) and ``pools``."""

    def __init__(self, raw, device=None, allocations=()):
        super().__init__(raw, device)
        self.__dict__["allocations"] = tuple(allocations)

    @property
    def pools(self):
        return {"small": self.pool("small"), "large": self.pool("large")}

    def get_large_allocations(self, min_size=0):
        """Live allocations of at least ``min_size`` bytes (int or '100MB'),
        largest first."""
        limit = to_bytes(min_size, "min_size")
        return [a for a in self.allocations if a.size >= limit]

    def copy(self):
        return type(self)(dict(self), self.device, self.allocations)

    def __reduce__(self):
        return (type(self), (dict(self), self.device, self.allocations))


def allocations_from_raw(raw_list, device):
    """_C.Allocator.large_allocations() dicts -> LargeAllocation objects."""
    return [LargeAllocation(location=a["location"], size=a["size"], requested_size=a["requested_size"],
                            address=a["address"], stream=a["stream"], device=device) for a in raw_list]
