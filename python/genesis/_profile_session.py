"""A memory profiling session over every tracked allocator, built on the
allocators' event recording (Note [Event history] and Note [Exact sessions]
in include/genesis/memory/events.h).

A session acquires event recording on each allocator and takes a recording
mark (CachingAllocator.mark_recording()) with the statistics at its start.
Its DeviceReport comes from the allocator's running sums and levels since
the mark, not from the event list: counts, bytes, hit rate, peaks, largest
allocation, mean allocation time and lifetime are exact however long the
session runs. Peaks are the session's own: they leave the allocators' peak
statistics (max_memory_allocated) alone, and overlapping sessions each see
theirs.

The event list and the Timeline drawn from it are a window: each allocator
thread keeps its newest 65536 events. When a session outlives that, the
report is ``truncated`` (per device and as a whole): its events and timeline
start where the complete history starts (levels there are worked back from
the exact ones at the end), ``events_dropped`` counts the events missing, and
a TruncatedHistoryWarning says so. Only the peak over all devices together
can then be inexact (several devices active): it is the sum of their exact
peaks, an upper bound, and ``total_peak_exact`` is False.

An allocator created during the session is not included.
"""

import dataclasses
import threading
import warnings

from . import _C, _recording
from ._registry import tracked_allocators
from ._sizes import format_bytes
from ._timeline import Series, Timeline


class TruncatedHistoryWarning(RuntimeWarning):
    """A profiling session outlived the event history: its events and
    timeline cover only the end (totals, peaks and leaks stay exact)."""


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
    truncated: bool = False   # the events / timeline lack the session's start
    events_dropped: int = 0   # events of the session missing from ``events``
    window_start_s: float = 0.0  # where the events / timeline start (seconds since the session start)

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
    and the raw ``events`` {label: [MemoryEvent]}. ``truncated``: some
    device's events and timeline lack the session's start (see the module
    docstring); ``total_peak_exact``: peak_memory() over all devices is exact."""

    def __init__(self, duration_s, devices, events, timeline):
        self.duration_s = duration_s
        self.devices = devices
        self.events = events
        self._timeline = timeline
        self.truncated = any(r.truncated for r in devices.values())
        active = [r for r in devices.values() if r.num_allocs or r.num_frees]
        self.total_peak_exact = not self.truncated or len(active) <= 1

    def peak_memory(self, device=None):
        """Highest allocated bytes during the session: of one allocator (label
        or genesis.device), exact; or of all of them together (device=None),
        exact unless ``total_peak_exact`` is False (then an upper bound)."""
        if device is not None:
            key = str(device)
            if key not in self.devices:
                raise KeyError(f"no allocator {key!r} in this report (have {list(self.devices)})")
            return self.devices[key].peak_allocated
        if not self.truncated:
            return self._timeline.peak(None)
        # Inactive allocators hold their start level throughout.
        return sum(r.peak_allocated if (r.num_allocs or r.num_frees) else r.start_allocated
                   for r in self.devices.values())

    def timeline(self):
        return self._timeline

    def summary(self):
        """A readable table: one row per allocator that saw activity."""
        rows = [r for r in self.devices.values() if r.active]
        lines = [f"Genesis memory profile: {self.duration_s:.3f} s, "
                 f"peak allocated {format_bytes(self.peak_memory())} (all devices"
                 f"{'' if self.total_peak_exact else ', upper bound'})"]
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
        for r in rows:
            if r.truncated:
                lines.append(f"note: {r.device}: events and timeline start at {r.window_start_s:.3f} s "
                             f"({r.events_dropped} events of the session no longer in the history); "
                             f"the figures above are exact")
        return "\n".join(lines)

    def __str__(self):
        return self.summary()


def _device_report(label, start_stats, summary):
    """The exact DeviceReport of one allocator from its recording summary."""
    t = summary["totals"]
    start_allocated, start_reserved = start_stats["allocated_bytes"], start_stats["reserved_bytes"]
    r = DeviceReport(device=label, start_allocated=start_allocated, start_reserved=start_reserved)
    r.num_allocs, r.num_frees = t["alloc"], t["free_requested"]
    r.bytes_requested, r.bytes_freed = t["alloc_bytes"], t["free_requested_bytes"]
    r.num_cache_hits = t["cache_hits"]
    r.num_cache_misses = r.num_allocs - r.num_cache_hits
    r.num_ooms = t["oom"]
    r.segments_allocated, r.segment_bytes_allocated = t["segment_alloc"], t["segment_alloc_bytes"]
    r.segments_freed, r.segment_bytes_freed = t["segment_free"], t["segment_free_bytes"]
    r.largest_allocation = summary["largest_alloc"]
    r.mean_alloc_ns = t["alloc_ns"] / r.num_allocs if r.num_allocs else 0.0
    r.mean_lifetime_ns = t["lifetime_ns"] / t["lifetimes"] if t["lifetimes"] else 0.0
    r.end_allocated = start_allocated + summary["allocated_change"]
    r.peak_allocated = start_allocated + summary["peak_allocated_rise"]
    r.peak_reserved = start_reserved + summary["peak_reserved_rise"]
    return r


def _series(label, start_ns, r, end_reserved, events, window_ns):
    """The Series of one allocator over its events. When the window starts
    after the session (window_ns > start_ns), its first point holds the
    levels there, worked back from the exact levels at the end."""
    deltas = []
    for e in events:
        action = e.action
        if action == "alloc":
            deltas.append((e.time_ns, e.block_size, 0))
        elif action == "free_requested":
            deltas.append((e.time_ns, -e.block_size, 0))
        elif action == "segment_alloc":
            deltas.append((e.time_ns, 0, e.size))
        elif action == "segment_free":
            deltas.append((e.time_ns, 0, -e.size))
    if window_ns > start_ns:
        allocated = r.end_allocated - sum(d[1] for d in deltas)
        reserved = end_reserved - sum(d[2] for d in deltas)
    else:
        allocated, reserved = r.start_allocated, r.start_reserved
    times = [max(0, window_ns - start_ns) / 1e9]
    alloc_curve, resv_curve = [allocated], [reserved]
    for t, da, dr in deltas:
        allocated += da
        reserved += dr
        times.append((t - start_ns) / 1e9)
        alloc_curve.append(allocated)
        resv_curve.append(reserved)
    return Series(label, times, alloc_curve, resv_curve)


def _total_series(series_by_label):
    """Allocated and reserved summed over all allocators, point by point in
    time order (point 0 of each series is where its window starts)."""
    allocated = sum(s.allocated[0] for s in series_by_label.values())
    reserved = sum(s.reserved[0] for s in series_by_label.values())
    first = max((s.times[0] for s in series_by_label.values()), default=0.0)
    merged = []
    for label, s in series_by_label.items():
        merged += [(t, label, i) for i, t in enumerate(s.times[1:], start=1)]
    merged.sort()
    times, alloc_curve, resv_curve = [first], [allocated], [reserved]
    for t, label, i in merged:
        s = series_by_label[label]
        allocated += s.allocated[i] - s.allocated[i - 1]
        reserved += s.reserved[i] - s.reserved[i - 1]
        if t < first:  # before every window is complete: only the sums move
            alloc_curve[0], resv_curve[0] = allocated, reserved
            continue
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
        self._marks = {}
        self.start_ns = None
        self.end_ns = None
        self._final = None  # (summaries, events) once stopped
        self._warned = False

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
            self._marks = {h.label: h.allocator.mark_recording() for h in self._handles}
            self.start_ns = _C.now_ns()
            self._start_stats = {h.label: h.allocator.stats() for h in self._handles}
        return self

    def stop(self):
        with self._lock:
            if not self.running:
                return
            self.end_ns = _C.now_ns()
            self._final = self._collect(self.end_ns)
            for h in self._handles:
                h.allocator.release_mark(self._marks[h.label])
                _recording.release(h.allocator)
            self._handles = []  # do not keep simulated allocators alive

    def _collect(self, until_ns):
        summaries, events = {}, {}
        for h in self._handles:
            events[h.label] = [e for e in h.allocator.events(self.start_ns) if e.time_ns <= until_ns]
            summaries[h.label] = h.allocator.recording_since(self._marks[h.label])
        return summaries, events

    def report(self):
        with self._lock:
            if self.start_ns is None:
                raise RuntimeError("this profiling session was never started")
            end = self.end_ns if self.end_ns is not None else _C.now_ns()
            summaries, events = self._final if self._final is not None else self._collect(end)
        devices, series = {}, {}
        for label, evs in events.items():
            summary = summaries[label]
            r = _device_report(label, self._start_stats[label], summary)
            window_ns = self.start_ns
            if summary["lost_until_ns"] >= self.start_ns:
                # Only events after the newest lost one form a complete history.
                window_ns = summary["lost_until_ns"] + 1
                evs = [e for e in evs if e.time_ns >= window_ns]
                events[label] = evs
                r.truncated = True
                r.events_dropped = max(0, summary["totals"]["events"] - len(evs))
                r.window_start_s = (window_ns - self.start_ns) / 1e9
            end_reserved = r.start_reserved + summary["reserved_change"]
            devices[label], series[label] = r, _series(label, self.start_ns, r, end_reserved, evs, window_ns)
        truncated = [r for r in devices.values() if r.truncated]
        if truncated and not self._warned:
            self._warned = True
            names = ", ".join(f"{r.device} ({r.events_dropped} events)" for r in truncated)
            warnings.warn(f"genesis profiler: the event history lost the start of this session on {names}: "
                          f"events and timeline cover only its end; totals, peaks and leaks are exact",
                          TruncatedHistoryWarning, stacklevel=3)
        timeline = Timeline(list(series.values()), _total_series(series))
        return MemoryReport((end - self.start_ns) / 1e9, devices, events, timeline)
