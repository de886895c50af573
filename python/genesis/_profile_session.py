"""A memory profiling session over every tracked allocator (SPEC M7, M8),
built on the allocators' own event history (CachingAllocator::events()).

A session acquires event recording on each allocator, notes the start time
and each allocator's statistics, and at the end keeps the events recorded in
between. From them it derives a MemoryReport (counts, bytes, hit rate, peaks,
mean allocation time and lifetime per allocator) and a Timeline. Peaks are
replayed from the events starting at the allocated / reserved bytes of the
start, so they are the session's own peaks and leave the allocators' peak
statistics (max_memory_allocated) alone.

Limits: each allocator thread keeps its last 65536 events (older ones are
overwritten), so a very long session reports only the recent part; an
allocator created during the session is not included.
"""

import dataclasses
import threading

from . import _C, _recording
from ._registry import tracked_allocators
from ._sizes import format_bytes
from ._timeline import Series, Timeline


@dataclasses.dataclass
class DeviceReport:
    """What one allocator did during a session."""

    device: str
    num_allocs: int = 0
    num_frees: int = 0
    bytes_requested: int = 0   # sum of sizes asked for
    bytes_freed: int = 0
    num_cache_hits: int = 0    # allocations served without a new segment
    num_cache_misses: int = 0
    num_ooms: int = 0
    segments_allocated: int = 0
    segment_bytes_allocated: int = 0
    segments_freed: int = 0
    segment_bytes_freed: int = 0
    largest_allocation: int = 0
    mean_alloc_ns: float = 0.0     # time inside the allocator per allocation
    mean_lifetime_ns: float = 0.0  # of blocks allocated and freed in the session
    start_allocated: int = 0
    end_allocated: int = 0
    peak_allocated: int = 0
    start_reserved: int = 0
    peak_reserved: int = 0

    @property
    def cache_hit_rate(self):
        return self.num_cache_hits / self.num_allocs if self.num_allocs else 0.0

    @property
    def active(self):
        return bool(self.num_allocs or self.num_frees or self.segments_allocated or self.segments_freed
                    or self.num_ooms)


class MemoryReport:
    """The result of a profiling session: ``devices`` {label: DeviceReport},
    ``duration_s``, ``peak_memory(device=None)``, ``summary()``, ``timeline()``
    and the raw ``events`` {label: [MemoryEvent]}."""

    def __init__(self, duration_s, devices, events, timeline):
        self.duration_s = duration_s
        self.devices = devices
        self.events = events
        self._timeline = timeline

    def peak_memory(self, device=None):
        """Highest allocated bytes during the session: of one allocator (label
        or genesis.device), or of all of them together (device=None)."""
        return self._timeline.peak(device)

    def timeline(self):
        return self._timeline

    def summary(self):
        """A readable table: one row per allocator that saw activity."""
        rows = [r for r in self.devices.values() if r.active]
        lines = [f"Genesis memory profile: {self.duration_s:.3f} s, "
                 f"peak allocated {format_bytes(self.peak_memory())} (all devices)"]
        if not rows:
            lines.append("  no allocator activity recorded")
            return "\n".join(lines)
        header = (f"{'device':<10} {'allocs':>8} {'frees':>8} {'hit rate':>9} {'requested':>12} "
                  f"{'peak alloc':>12} {'peak resv':>12} {'start->end alloc':>25} {'mean ns':>8} {'OOMs':>5}")
        lines += [header, "-" * len(header)]
        for r in rows:
            change = f"{format_bytes(r.start_allocated)} -> {format_bytes(r.end_allocated)}"
            lines.append(f"{r.device:<10} {r.num_allocs:>8} {r.num_frees:>8} {r.cache_hit_rate:>8.1%} "
                         f"{format_bytes(r.bytes_requested):>12} {format_bytes(r.peak_allocated):>12} "
                         f"{format_bytes(r.peak_reserved):>12} {change:>25} {r.mean_alloc_ns:>8.0f} "
                         f"{r.num_ooms:>5}")
        return "\n".join(lines)

    def __str__(self):
        return self.summary()


def _replay(label, start_ns, start_allocated, start_reserved, events):
    """DeviceReport and Series of one allocator from its events."""
    r = DeviceReport(device=label, start_allocated=start_allocated, start_reserved=start_reserved)
    allocated, reserved = start_allocated, start_reserved
    times, alloc_curve, resv_curve = [0.0], [allocated], [reserved]
    peak_a, peak_r = allocated, reserved
    alloc_ns = lifetimes = n_lifetimes = 0
    for e in events:
        action = e.action
        if action == "alloc":
            r.num_allocs += 1
            r.bytes_requested += e.size
            r.largest_allocation = max(r.largest_allocation, e.size)
            if e.cache_hit:
                r.num_cache_hits += 1
            else:
                r.num_cache_misses += 1
            alloc_ns += e.duration_ns
            allocated += e.block_size
        elif action == "free_requested":
            r.num_frees += 1
            r.bytes_freed += e.size
            if e.duration_ns:
                lifetimes += e.duration_ns
                n_lifetimes += 1
            allocated -= e.block_size
        elif action == "segment_alloc":
            r.segments_allocated += 1
            r.segment_bytes_allocated += e.size
            reserved += e.size
        elif action == "segment_free":
            r.segments_freed += 1
            r.segment_bytes_freed += e.size
            reserved -= e.size
        elif action == "oom":
            r.num_ooms += 1
            continue
        else:
            continue
        peak_a, peak_r = max(peak_a, allocated), max(peak_r, reserved)
        times.append((e.time_ns - start_ns) / 1e9)
        alloc_curve.append(allocated)
        resv_curve.append(reserved)
    r.peak_allocated, r.peak_reserved = peak_a, peak_r
    r.mean_alloc_ns = alloc_ns / r.num_allocs if r.num_allocs else 0.0
    r.mean_lifetime_ns = lifetimes / n_lifetimes if n_lifetimes else 0.0
    return r, Series(label, times, alloc_curve, resv_curve)


def _total_series(series_by_label):
    """Allocated and reserved summed over all allocators, point by point in
    time order (point 0 of each series is the session start)."""
    allocated = sum(s.allocated[0] for s in series_by_label.values())
    reserved = sum(s.reserved[0] for s in series_by_label.values())
    merged = []
    for label, s in series_by_label.items():
        merged += [(t, label, i) for i, t in enumerate(s.times[1:], start=1)]
    merged.sort()
    times, alloc_curve, resv_curve = [0.0], [allocated], [reserved]
    for t, label, i in merged:
        s = series_by_label[label]
        allocated += s.allocated[i] - s.allocated[i - 1]
        reserved += s.reserved[i] - s.reserved[i - 1]
        times.append(t)
        alloc_curve.append(allocated)
        resv_curve.append(reserved)
    return Series("total", times, alloc_curve, resv_curve)


class ProfileSession:
    """start() ... stop(); report() works while running (up to now) and after."""

    def __init__(self):
        self._lock = threading.Lock()
        self._handles = []
        self._start_stats = {}
        self.start_ns = None
        self.end_ns = None
        self._events = None  # {label: [MemoryEvent]} once stopped

    @property
    def running(self):
        return self.start_ns is not None and self.end_ns is None

    def start(self):
        with self._lock:
            if self.start_ns is not None:
                raise RuntimeError("a profiling session can be started once")
            self._handles = tracked_allocators()
            for h in self._handles:
                _recording.acquire(h.allocator)
            self.start_ns = _C.now_ns()
            self._start_stats = {h.label: h.allocator.stats() for h in self._handles}
        return self

    def stop(self):
        with self._lock:
            if not self.running:
                return
            self.end_ns = _C.now_ns()
            self._events = self._collect(self.end_ns)
            for h in self._handles:
                _recording.release(h.allocator)
            self._handles = []  # do not keep simulated allocators alive

    def _collect(self, until_ns):
        return {h.label: [e for e in h.allocator.events(self.start_ns) if e.time_ns <= until_ns]
                for h in self._handles}

    def report(self):
        with self._lock:
            if self.start_ns is None:
                raise RuntimeError("this profiling session was never started")
            end = self.end_ns if self.end_ns is not None else _C.now_ns()
            events = self._events if self._events is not None else self._collect(end)
        devices, series = {}, {}
        for label, evs in events.items():
            st = self._start_stats[label]
            devices[label], series[label] = _replay(label, self.start_ns, st["allocated_bytes"],
                                                    st["reserved_bytes"], evs)
            devices[label].end_allocated = series[label].allocated[-1]
        timeline = Timeline(list(series.values()), _total_series(series))
        return MemoryReport((end - self.start_ns) / 1e9, devices, events, timeline)
