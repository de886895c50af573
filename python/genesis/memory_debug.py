"""Leak debugging (SPEC M9).

    genesis.enable_memory_debugging(True)     # or genesis.set_memory_debug(True)
    train_model()
    for leak in genesis.check_memory_leaks():
        print(f"{leak.size} bytes at {leak.location}")

While debugging is on, every allocation made through Genesis from Python
records the Python line that made it (file:line in function) as the block's
location in the C++ allocator (ScopedAllocationContext; see
python/src/python_location.h), and the allocators record events.

check_memory_leaks() reports the allocations that are still live and were
made since debugging was switched on: those not live at that moment, plus
those whose address was freed and handed out again since (seen in the event
history). Called while debugging is off, it reports every live allocation.
"""

import dataclasses
import threading

from . import _C, _recording
from ._registry import tracked_allocators
from ._sizes import format_bytes, to_bytes

_lock = threading.Lock()
_session = None  # {"start_ns": int, "baseline": {key: set(addresses)}, "handles": [...]}


@dataclasses.dataclass(frozen=True)
class MemoryLeak:
    """A live allocation made while memory debugging was on."""

    location: str        # "file.py:42 in f", a C++ allocation context, or "0x<address>"
    size: int            # bytes of the block (rounded to 512)
    requested_size: int  # bytes asked for
    address: int
    device: str          # allocator label: 'cpu', 'cuda:0', 'sim:0', ...
    stream: int

    def __str__(self):
        return f"{format_bytes(self.size)} at {self.location} ({self.device}, 0x{self.address:x})"


def enable_memory_debugging(enabled=True):
    """Switches leak debugging on (True) or off (False)."""
    global _session
    if not isinstance(enabled, bool):
        raise TypeError(f"enable_memory_debugging() takes True or False, got {type(enabled).__name__}")
    with _lock:
        if enabled and _session is None:
            handles = tracked_allocators()
            for h in handles:
                _recording.acquire(h.allocator)
            start_ns = _C.now_ns()
            baseline = {h.allocator.key: {a["address"] for a in h.allocator.large_allocations(0)}
                        for h in handles}
            _C.set_capture_locations(True)
            _session = {"start_ns": start_ns, "baseline": baseline, "handles": handles}
        elif not enabled and _session is not None:
            _C.set_capture_locations(False)
            for h in _session["handles"]:
                _recording.release(h.allocator)
            _session = None


set_memory_debug = enable_memory_debugging


def is_memory_debugging_enabled():
    return _session is not None


def check_memory_leaks(min_size=0):
    """Live allocations of at least ``min_size`` bytes made since
    enable_memory_debugging(True), largest first (see the module docstring)."""
    limit = to_bytes(min_size, "min_size")
    with _lock:
        session = _session
    handles = session["handles"] if session is not None else tracked_allocators()
    leaks = []
    for h in handles:
        live = h.allocator.large_allocations(limit)
        if session is not None:
            baseline = session["baseline"].get(h.allocator.key, set())
            reused = {e.address for e in h.allocator.events(session["start_ns"]) if e.action == "alloc"}
            live = [a for a in live if a["address"] not in baseline or a["address"] in reused]
        leaks += [MemoryLeak(location=a["location"], size=a["size"], requested_size=a["requested_size"],
                             address=a["address"], device=h.label, stream=a["stream"]) for a in live]
    leaks.sort(key=lambda leak: (-leak.size, leak.device, leak.address))
    return leaks
