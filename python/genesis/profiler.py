"""genesis.profiler: profile the memory of a block of code.

    with genesis.profiler.profile_memory() as prof:
        ...
    print(prof.memory_summary())
    print(f"peak: {prof.peak_memory() / 1e6:.1f} MB")

Every tracked allocator (host, GPUs, pinned, live simulated ones) is recorded
while the block runs; see genesis/_profile_session.py for how.
"""

from ._profile_session import DeviceReport, MemoryReport, ProfileSession, TruncatedHistoryWarning

__all__ = ["profile_memory", "MemoryProfile", "MemoryReport", "DeviceReport", "TruncatedHistoryWarning"]


class MemoryProfile:
    """A profiling session used as a context manager. The results stay
    available after the block; inside it they cover the time so far."""

    def __init__(self):
        self._session = ProfileSession()

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, exc_type, exc, tb):
        self.stop()
        return False

    def start(self):
        self._session.start()
        return self

    def stop(self):
        self._session.stop()

    @property
    def running(self):
        return self._session.running

    def report(self):
        """The MemoryReport of the session."""
        return self._session.report()

    def memory_summary(self):
        """A readable table of what each allocator did."""
        return self.report().summary()

    def peak_memory(self, device=None):
        """Highest allocated bytes during the session (all allocators together,
        or one: a label such as 'cuda:0' or a genesis.device)."""
        return self.report().peak_memory(device)

    def timeline(self):
        """Allocated / reserved bytes over time (a Timeline, with plot())."""
        return self.report().timeline()

    def events(self, device=None):
        """Recorded MemoryEvents: {label: [...]}, or one allocator's list."""
        events = self.report().events
        return events if device is None else events[str(device)]


def profile_memory():
    """A MemoryProfile to use in a ``with`` block."""
    return MemoryProfile()
