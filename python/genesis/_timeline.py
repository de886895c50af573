"""Memory over time: genesis.memory_profiler.get_timeline().

A Timeline holds, per allocator, the allocated and reserved bytes after each
recorded event of a profiling session, and the sum over all allocators.
``plot(path)`` draws it with matplotlib (imported only when plotting).
"""

from ._sizes import format_bytes


class Series:
    """One allocator's curve: times (seconds since the session start) and the
    allocated / reserved bytes from that moment on."""

    __slots__ = ("label", "times", "allocated", "reserved")

    def __init__(self, label, times, allocated, reserved):
        self.label, self.times, self.allocated, self.reserved = label, times, allocated, reserved

    def peak(self):
        return max(self.allocated) if self.allocated else 0


class Timeline:
    """Allocated and reserved bytes over time, per allocator and in total."""

    def __init__(self, series, total):
        self._series = {s.label: s for s in series}
        self.total = total  # Series labelled "total" (allocated and reserved summed)

    @property
    def devices(self):
        """Labels of the allocators in the timeline ('cpu', 'cuda:0', 'sim:0', ...)."""
        return list(self._series)

    def series(self, device=None):
        """The Series of one allocator (by label or genesis.device), or the total."""
        if device is None:
            return self.total
        key = str(device)
        if key not in self._series:
            raise KeyError(f"no allocator {key!r} in this timeline (have {self.devices})")
        return self._series[key]

    def times(self, device=None):
        return list(self.series(device).times)

    def allocated(self, device=None):
        return list(self.series(device).allocated)

    def reserved(self, device=None):
        return list(self.series(device).reserved)

    def peak(self, device=None):
        """Highest allocated bytes."""
        return self.series(device).peak()

    def __len__(self):
        return len(self.total.times)

    def to_dict(self):
        """Plain data (JSON-ready): {label: {times, allocated, reserved}}, with 'total'."""
        out = {label: {"times": s.times, "allocated": s.allocated, "reserved": s.reserved}
               for label, s in self._series.items()}
        out["total"] = {"times": self.total.times, "allocated": self.total.allocated,
                        "reserved": self.total.reserved}
        return out

    def __repr__(self):
        return f"Timeline({len(self)} points, devices={self.devices}, peak={format_bytes(self.peak())})"

    def plot(self, path=None, device=None, show=None):
        """Draws allocated and reserved bytes over time, one pair of curves per
        allocator that saw activity (or only ``device``). With ``path`` the
        figure is written there (format from the extension) without opening
        a window; without it the figure is shown (``show=False``: neither).
        Returns the matplotlib Figure. Needs matplotlib (python3-matplotlib)."""
        try:
            from matplotlib.figure import Figure
        except ImportError as e:  # pragma: no cover - depends on the machine
            raise ImportError("Timeline.plot() needs matplotlib (apt install python3-matplotlib)") from e
        if device is not None:
            chosen = [self.series(device)]
        else:
            chosen = [s for s in self._series.values() if len(s.times) > 1] or [self.total]
        if path is None and show is not False:
            import matplotlib.pyplot as plt  # a window needs pyplot's backend
            fig = plt.figure(figsize=(10, 5))
        else:
            fig = Figure(figsize=(10, 5))  # no pyplot: works headless, no global state
        ax = fig.add_subplot(1, 1, 1)
        for s in chosen:
            ax.step(s.times, [b / 2**20 for b in s.allocated], where="post", label=f"{s.label} allocated")
            ax.step(s.times, [b / 2**20 for b in s.reserved], where="post", linestyle="--",
                    label=f"{s.label} reserved")
        ax.set_xlabel("time since start (s)")
        ax.set_ylabel("MiB")
        ax.set_title("Genesis memory timeline")
        ax.legend(loc="best")
        ax.grid(True, alpha=0.3)
        if path is not None:
            fig.savefig(str(path))
        elif show is not False:
            import matplotlib.pyplot as plt
            plt.show()
        return fig
