"""genesis.memory_profiler: profiling switched on and off, and timelines
(allocated and reserved bytes over time).

    genesis.enable_memory_profiling(True)
    ...
    print(genesis.memory_profiler.get_report().summary())

    with genesis.memory_profiler.record():
        ...
    genesis.memory_profiler.get_timeline().plot("memory.png")

get_report() and get_timeline() describe the most recently started session:
the one enable_memory_profiling(True) started, or the latest record() block
(while it runs: up to now).
"""

import contextlib
import threading

from .profiler import MemoryProfile

_lock = threading.Lock()
_enabled = None   # the session of enable_memory_profiling(True), while on
_latest = None    # the most recently started session


def enable_memory_profiling(enabled=True):
    """Starts (True) or stops (False) process-wide memory profiling. Starting
    while on keeps the running session; the report of a stopped session stays
    available through get_report()."""
    global _enabled, _latest
    if not isinstance(enabled, bool):
        raise TypeError(f"enable_memory_profiling() takes True or False, got {type(enabled).__name__}")
    with _lock:
        if enabled and _enabled is None:
            _enabled = MemoryProfile().start()
            _latest = _enabled
        elif not enabled and _enabled is not None:
            _enabled.stop()
            _enabled = None


def is_enabled():
    """True while enable_memory_profiling(True) is in effect."""
    return _enabled is not None


@contextlib.contextmanager
def record():
    """Profiles the block; yields its MemoryProfile. Afterwards get_timeline()
    and get_report() describe it."""
    global _latest
    profile = MemoryProfile().start()
    with _lock:
        _latest = profile
    try:
        yield profile
    finally:
        profile.stop()


def _latest_profile():
    profile = _latest
    if profile is None:
        raise RuntimeError("no memory profile recorded yet: call genesis.enable_memory_profiling(True) "
                           "or use genesis.memory_profiler.record() / genesis.profiler.profile_memory()")
    return profile


def get_report():
    """The MemoryReport of the latest session (.summary(), .peak_memory(), .devices)."""
    return _latest_profile().report()


def get_timeline():
    """The Timeline of the latest session (.plot(path), .allocated(), .peak())."""
    return _latest_profile().timeline()
