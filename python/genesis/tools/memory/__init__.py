"""genesis.tools.memory: the memory debugger.

    from genesis.tools.memory import MemoryDebugger, MemoryProfiler, OOMDetector

    debugger = MemoryDebugger()
    debugger.start_monitoring()
    train()
    debugger.stop_monitoring()
    print(debugger.get_status_report())

Every tool samples a *source* in the background (one thread per tool, in
C++): by default the allocators of this process (exact figures, and the
allocation sites of tracked allocations); ``source="nvml"`` for the
driver's view of every GPU; ``source=pid`` for another process;
``source=Trace("run.csv", speed="max")`` to analyse a recorded trace, whose
own time stamps then set every time and rate; or a SimulatedAllocator /
genesis.device / a list of them. ``python -m genesis.tools.memory`` runs the
``genesis-mem`` commands with the same flags.
"""

import enum
import inspect
import json
import os
import threading
import time

from ... import _C
from ..._registry import AllocatorHandle, process_allocators, tracked_allocators
from ..._allocator_view import AllocatorView
from .distributed import DistributedMemoryMonitor, metrics_server_port, start_metrics_server, stop_metrics_server

__all__ = [
    "MemoryDebugger", "MemoryProfiler", "OOMDetector", "MemoryLeakDetector", "FragmentationAnalyzer",
    "OOMPrediction", "RiskLevel", "Trace", "open_source", "main",
    "DistributedMemoryMonitor", "start_metrics_server", "stop_metrics_server", "metrics_server_port",
]


class RiskLevel(enum.Enum):
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    CRITICAL = "critical"


class OOMPrediction:
    """What the OOM predictor says about one device."""

    __slots__ = ("device_id", "risk_level", "confidence", "current_usage_percent", "growth_rate_mb_per_sec",
                 "predicted_oom_time_seconds", "recommendations", "time_ns")

    def __init__(self, raw):
        self.device_id = raw["device"]
        self.risk_level = RiskLevel(raw["risk_level"])
        self.confidence = raw["confidence"]
        self.current_usage_percent = raw["current_usage_percent"]
        # MiB (2^20 bytes) per second, as in the JSON reports.
        self.growth_rate_mb_per_sec = raw["growth_rate_bytes_per_sec"] / (1 << 20)
        t = raw["predicted_oom_seconds"]
        self.predicted_oom_time_seconds = None if t < 0 else t
        self.recommendations = list(raw["recommendations"])
        self.time_ns = raw["time_ns"]

    @property
    def recommendation(self):
        return self.recommendations[0] if self.recommendations else ""

    def __repr__(self):
        eta = "none" if self.predicted_oom_time_seconds is None else f"{self.predicted_oom_time_seconds:.1f} s"
        return (f"OOMPrediction(device={self.device_id!r}, risk={self.risk_level.value}, "
                f"usage={self.current_usage_percent:.1f}%, oom_in={eta}, confidence={self.confidence:.2f})")


class Trace:
    """A recorded trace as a source: replayed on the simulated GPU following
    its time stamps at ``speed`` times real speed ("max": as fast as
    possible), on a device of ``capacity`` bytes (default 1 TiB)."""

    def __init__(self, path, speed=1.0, capacity=0, config="genesis"):
        self.path = os.fspath(path)
        self.speed = _C.parse_speed(str(speed))
        self.capacity = capacity
        self.config = config


def _allocator_entry(obj, index):
    if isinstance(obj, AllocatorHandle):
        return (obj.label, obj.label, obj.allocator)
    if isinstance(obj, AllocatorView):
        label = obj._label()
        return (label, label, obj._allocator())
    raise TypeError(f"not an allocator: {obj!r} (use a genesis.device, a SimulatedAllocator or a list of them)")


def _default_entries():
    """The allocators of this process: each GPU's (ids "0", "1", ...) when
    there are GPUs, else every tracked allocator (host, simulated)."""
    handles = process_allocators()
    gpus = [h for h in handles if h.label.startswith("cuda:")]
    if gpus:
        return [(h.label.split(":")[1], h.label, h.allocator) for h in gpus]
    return [(h.label, h.label, h.allocator) for h in tracked_allocators()]


def _unknown_source(source):
    return ValueError(f"unknown source {source!r}: expected None or 'genesis' (this process's allocators), "
                      "'nvml', a pid, genesis.tools.memory.Trace(path), or allocators")


def _check_source_name(source):
    """Rejects a source string open_source() would not know, before any sampling starts."""
    if isinstance(source, str) and source not in ("genesis", "nvml") and not source.startswith("trace:"):
        raise _unknown_source(source)


def _positive(value, what):
    v = float(value)
    if not v > 0:
        raise ValueError(f"{what} must be > 0, got {value!r}")
    return v


def open_source(source=None, devices=None):
    """A genesis._C.MemorySource for ``source`` (see the module docstring)."""
    gpu_ids = [int(d) for d in (devices or []) if str(d).isdigit()]
    if isinstance(source, _C.MemorySource):
        return source
    if source is None or source == "genesis":
        return _C.open_allocator_source(_default_entries())
    if isinstance(source, str):
        if source == "nvml":
            return _C.open_nvml_source(gpu_ids)
        if source.startswith("trace:"):
            return _C.open_trace_source(source[6:], 1.0, 0, "genesis")
        raise _unknown_source(source)
    if isinstance(source, Trace):
        return _C.open_trace_source(source.path, source.speed, source.capacity, source.config)
    if isinstance(source, bool):
        raise TypeError("source must not be a bool")
    if isinstance(source, int):
        return _C.open_process_source(source, gpu_ids)
    if isinstance(source, (list, tuple)):
        return _C.open_allocator_source([_allocator_entry(o, i) for i, o in enumerate(source)])
    return _C.open_allocator_source([_allocator_entry(source, 0)])


def _write(path, text):
    if path is not None:
        _C.write_report(os.fspath(path), text)


class _Tool:
    """One C++ MemoryDebugger with some tools switched on, started and
    stopped from Python."""

    _tools = {}

    def __init__(self, interval, source, devices, duration=0.0, **options):
        _check_source_name(source)
        self._source_arg = source
        self._devices = [str(d) for d in (devices or [])]
        self._interval = float(interval)
        if not self._interval > 0:
            raise ValueError(f"sampling interval must be > 0 seconds, got {interval!r}")
        self._duration = float(duration)
        self._options = dict(self._tools)
        self._options.update(options)
        self._callbacks = []
        self._lock = threading.Lock()
        self._debugger = None
        self._source = None

    def _make(self):
        self._source = open_source(self._source_arg, self._devices)
        d = _C.MemoryDebugger(self._source, interval=self._interval, devices=self._devices,
                              duration=self._duration, **self._options)
        if self._options.get("oom", False):
            d.on_oom_warning(self._warn)
        return d

    def _warn(self, device, raw):
        prediction = OOMPrediction(raw)
        # Every callback hears the warning even when one fails; the first
        # failure is then raised (Python reports it as unraisable: it comes
        # from the sampling thread).
        error = None
        for fn in list(self._callbacks):
            try:
                if _takes_one_argument(fn):
                    fn(prediction)
                else:
                    fn(device, prediction)
            except Exception as e:  # noqa: BLE001 - re-raised below
                error = error or e
        if error is not None:
            raise error

    def start_monitoring(self):
        """Starts sampling in the background (a fresh run each time)."""
        with self._lock:
            if self._debugger is not None and self._debugger.running:
                return self
            self._debugger = self._make()
            self._debugger.start()
        return self

    def stop_monitoring(self):
        """Stops sampling; the results stay available."""
        with self._lock:
            d = self._debugger
        if d is not None:
            d.stop()
        return self

    def wait(self, timeout=None):
        """Waits until the duration has passed or the source ended (a trace
        replayed to its end). Ctrl-C interrupts the wait."""
        d = self._require()
        deadline = None if timeout is None else time.monotonic() + timeout
        while d.running:
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(0.01)
        d.wait()
        return True

    def _require(self):
        if self._debugger is None:
            raise RuntimeError(f"{type(self).__name__}: call start_monitoring() first")
        return self._debugger

    @property
    def is_monitoring(self):
        return self._debugger is not None and self._debugger.running

    def cost(self):
        """The sampler's CPU cost: {'percent_of_core', 'rounds', ...}."""
        return self._require().cost()

    def html_report(self, path=None, title="Genesis memory report"):
        """A self-contained HTML page (charts and tables); written to ``path`` if given."""
        text = self._require().html_report(title)
        _write(path, text)
        return text

    def chrome_trace(self, path=None):
        """The sampled figures as Chrome-trace / Perfetto JSON (counter tracks)."""
        text = self._require().chrome_trace()
        _write(path, text)
        return json.loads(text)

    def __enter__(self):
        return self.start_monitoring()

    def __exit__(self, *exc):
        self.stop_monitoring()
        return False

    def __del__(self):
        d = getattr(self, "_debugger", None)
        if d is not None:
            try:
                d.stop()
            except Exception:  # noqa: BLE001 - interpreter shutdown
                pass


class MemoryProfiler(_Tool):
    """Samples memory every ``sampling_interval`` seconds with a bounded
    history (``max_history_mb`` per device; older samples are merged, never
    dropped)."""

    _tools = {"profile": True, "oom": False, "leak": False, "fragment": False, "tracking": False}

    def __init__(self, sampling_interval=0.1, devices=None, source=None, duration=0.0, max_history_mb=5):
        super().__init__(sampling_interval, source, devices, duration,
                         history_bytes=int(max_history_mb * (1 << 20)))

    def generate_report(self, path=None):
        """The profile report (a dict: devices.<id>.current_memory, peak_memory,
        statistics, summary); also written to ``path`` as JSON."""
        text = self._require().profile_report()
        _write(path, text)
        return json.loads(text)

    def plot(self, path):
        """Draws memory and fragmentation over time into a PNG (matplotlib)."""
        from . import plot as _plot
        report = {"profile": self.generate_report()}
        tmp = f"{os.fspath(path)}.json.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(report, f)
        try:
            if _plot.main(["plot", tmp, os.fspath(path)]) != 0:
                raise RuntimeError(f"could not draw {path}")
        finally:
            os.unlink(tmp)
        return path


class OOMDetector(_Tool):
    """Warns before memory runs out. ``warning_callback(device_id,
    prediction)`` (or ``(prediction)``) is called from the sampling thread
    when the risk reaches high or critical (rate-limited)."""

    _tools = {"profile": False, "oom": True, "leak": False, "fragment": False, "tracking": True}

    def __init__(self, threshold=85.0, warning_callback=None, sampling_interval=0.1, devices=None, source=None,
                 duration=0.0):
        if not 0 < float(threshold) <= 100:
            raise ValueError(f"threshold must be a percentage in (0, 100], got {threshold!r}")
        super().__init__(sampling_interval, source, devices, duration, oom_threshold=float(threshold))
        self.threshold = float(threshold)
        if warning_callback is not None:
            self.add_warning_callback(warning_callback)

    def add_warning_callback(self, fn):
        if not callable(fn):
            raise TypeError("warning callback must be callable")
        self._callbacks.append(fn)

    def predict(self, device=None):
        """The current OOMPrediction of ``device`` (default: the first)."""
        d = self._require()
        ids = d.device_ids()
        return OOMPrediction(d.predict(str(device) if device is not None else ids[0]))

    def generate_report(self, path=None):
        text = self._require().oom_report()
        _write(path, text)
        return json.loads(text)


class MemoryLeakDetector(_Tool):
    """Steady growth above ``threshold_mb_per_min`` over ``window`` seconds,
    told apart from a training step's sawtooth and from warm-up. With
    tracking on, the allocation sites that hold the growth."""

    _tools = {"profile": False, "oom": False, "leak": True, "fragment": False}

    def __init__(self, threshold_mb_per_min=10.0, window=60.0, enable_tracking=False, sampling_interval=0.1,
                 devices=None, source=None, duration=0.0):
        super().__init__(sampling_interval, source, devices, duration,
                         leak_threshold=_positive(threshold_mb_per_min, "leak threshold (MB per minute)"),
                         leak_window=_positive(window, "leak window (seconds)"), tracking=True)
        self._tracking = False
        self._capture_before = None  # the process's site capture before tracking switched it on
        if enable_tracking:
            self.enable_tracking()

    def enable_tracking(self, enabled=True):
        """Records the Python call stack of each allocation made through
        Genesis (several frames deep), so reports name the lines that leak.
        Turning it off gives site capture back the state it had before (a
        program that debugs memory itself keeps its sites)."""
        if enabled and not self._tracking:
            self._capture_before = _C.capture_locations()
            _C.set_capture_locations(True)
        elif not enabled and self._tracking:
            _C.set_capture_locations(bool(self._capture_before))
        self._tracking = bool(enabled)

    def check(self):
        """The leak report now (a dict per device: leak_detected,
        growth_rate_mb_per_min, sites)."""
        return json.loads(self._require().leak_report())

    def generate_report(self, path=None):
        text = self._require().leak_report()
        _write(path, text)
        return json.loads(text)

    def diff(self, t0_ns, t1_ns, device=None):
        """Per-site changes between two source times (ns), largest growth first."""
        d = self._require()
        return d.leak_diff(str(device) if device is not None else d.device_ids()[0], int(t0_ns), int(t1_ns))

    def stop_monitoring(self):
        super().stop_monitoring()
        if self._tracking:
            self.enable_tracking(False)
        return self


def _takes_one_argument(fn):
    """True for a warning callback written as fn(prediction) rather than
    fn(device, prediction), judged from its signature once per call, not
    by calling it and catching TypeError (which its own body may raise)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # no signature (some builtins): the documented two-argument form
        return False
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) == 1


class FragmentationAnalyzer(_Tool):
    """Fragmentation over time: cached vs reserved, the largest free block
    against free memory, the number of free blocks."""

    _tools = {"profile": True, "oom": False, "leak": False, "fragment": True, "tracking": False}

    def __init__(self, interval=1.0, devices=None, source=None, duration=0.0):
        super().__init__(interval, source, devices, duration)

    def generate_report(self, path=None):
        text = self._require().fragment_report()
        _write(path, text)
        return json.loads(text)

    def plot(self, path):
        return MemoryProfiler.plot(self, path)


class MemoryDebugger(_Tool):
    """Every tool at once: profile, OOM prediction, leaks and fragmentation."""

    _tools = {"profile": True, "oom": True, "leak": True, "fragment": True, "tracking": True}

    def __init__(self, sampling_interval=0.1, devices=None, source=None, duration=0.0, oom_threshold=85.0,
                 leak_threshold_mb_per_min=10.0, leak_window=60.0, warning_callback=None):
        if not 0 < float(oom_threshold) <= 100:
            raise ValueError(f"oom_threshold must be a percentage in (0, 100], got {oom_threshold!r}")
        super().__init__(sampling_interval, source, devices, duration, oom_threshold=float(oom_threshold),
                         leak_threshold=_positive(leak_threshold_mb_per_min, "leak threshold (MB per minute)"),
                         leak_window=_positive(leak_window, "leak window (seconds)"))
        if warning_callback is not None:
            self.add_warning_callback(warning_callback)

    def add_warning_callback(self, fn):
        if not callable(fn):
            raise TypeError("warning callback must be callable")
        self._callbacks.append(fn)

    def get_status_report(self):
        """Every tool's findings in one dict."""
        return json.loads(self._require().status_report())

    def generate_report(self, path=None):
        text = self._require().status_report()
        _write(path, text)
        return json.loads(text)


def main(argv=None):
    """Runs ``genesis-mem ARGV...`` in this process; returns the exit status."""
    import sys
    args = list(sys.argv[1:] if argv is None else argv)
    # The plotter is this package's plot.py (there is no genesis-mem
    # executable to find it next to).
    os.environ.setdefault("GENESIS_MEM_PLOT_SCRIPT", os.path.join(os.path.dirname(__file__), "plot.py"))
    # This interpreter draws the plots when it can; GENESIS_MEM_PYTHON is the
    # only one tried once set, so it is set only to one that has matplotlib
    # (else genesis-mem looks for a python3 that has it).
    import importlib.util
    if importlib.util.find_spec("matplotlib") is not None:
        os.environ.setdefault("GENESIS_MEM_PYTHON", sys.executable)
    return _C.genesis_mem_main(["python -m genesis.tools.memory"] + args)
