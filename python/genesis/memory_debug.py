"""Leak debugging.

    genesis.enable_memory_debugging(True)     # or genesis.set_memory_debug(True)
    train_model()
    for leak in genesis.check_memory_leaks():
        print(f"{leak.size} bytes at {leak.location}")

While debugging is on, every allocation made through Genesis from Python
records where the Python code made it: up to get_site_depth() frames outside
the genesis package (default 4), innermost first, one per line
("train.py:42 in step\ntrain.py:90 in main"), stored as the block's location
in the C++ allocator (python/src/py_location.h). Allocations made from
C++ carry the location their code declares with ScopedAllocationContext, if
any. The allocators also record events, which stamps every allocation with
its time.

check_memory_leaks() reports the allocations that are still live and were
made since debugging was switched on: live blocks whose allocation time is
not older than the switch (Note [Exact sessions] in
include/genesis/memory/events.h). That needs no event history, so it is exact
in sessions of any length, also for addresses that were live at the switch
and were freed and handed out again since. Called while debugging is off, it
reports every live allocation.
"""

import dataclasses
import threading

from . import _C, _recording
from ._registry import tracked_allocators
from ._sizes import format_bytes, to_bytes

_lock = threading.Lock()
_session = None  # {"start_ns": int, "handles": [...]}


@dataclasses.dataclass(frozen=True)
class MemoryLeak:
    """A live allocation made while memory debugging was on."""

    location: str        # "file.py:42 in f\nfile.py:7 in main" (innermost first), a C++ context, or "0x<address>"
    size: int            # bytes of the block (rounded to 512)
    requested_size: int  # bytes asked for
    address: int
    device: str          # allocator label: 'cpu', 'cuda:0', 'sim:0', ...
    stream: int

    @property
    def frames(self):
        """The location's frames, innermost first (one item for a C++ context)."""
        return self.location.split("\n")

    def __str__(self):
        where = self.location.replace("\n", " <- ")
        return f"{format_bytes(self.size)} at {where} ({self.device}, 0x{self.address:x})"


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
            # Recording is on from here: every allocation after start_ns carries its time.
            start_ns = _C.now_ns()
            _C.set_capture_locations(True)
            _session = {"start_ns": start_ns, "handles": handles}
        elif not enabled and _session is not None:
            _C.set_capture_locations(False)
            for h in _session["handles"]:
                _recording.release(h.allocator)
            _session = None


set_memory_debug = enable_memory_debugging


def is_memory_debugging_enabled():
    return _session is not None


def set_site_depth(depth):
    """How many Python frames (outside genesis) an allocation site names,
    1 to 32 (default 4). Applies to allocations made from now on."""
    if isinstance(depth, bool) or not isinstance(depth, int):
        raise TypeError(f"set_site_depth() takes an int, got {type(depth).__name__}")
    if not 1 <= depth <= 32:
        raise ValueError(f"site depth must be between 1 and 32, got {depth}")
    _C.set_site_depth(depth)


def get_site_depth():
    """The number of Python frames an allocation site names."""
    return _C.site_depth()


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
            live = [a for a in live if a["alloc_time_ns"] >= session["start_ns"]]
        leaks += [MemoryLeak(location=a["location"], size=a["size"], requested_size=a["requested_size"],
                             address=a["address"], device=h.label, stream=a["stream"]) for a in live]
    leaks.sort(key=lambda leak: (-leak.size, leak.device, leak.address))
    return leaks
