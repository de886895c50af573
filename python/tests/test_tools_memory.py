"""genesis.tools.memory: the memory debugger's Python API over recorded traces
(replayed at max speed, figures known from memtrace.py) and over simulated
allocators that Python allocates from while the tools sample."""

import inspect
import json
import time

import pytest

import memtrace
from memtrace import MiB
from genesis.testing import SimulatedAllocator
from genesis.tools.memory import (FragmentationAnalyzer, MemoryDebugger, MemoryLeakDetector, MemoryProfiler,
                                  OOMDetector, OOMPrediction, RiskLevel, Trace)


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    return memtrace.make_traces(tmp_path_factory.mktemp("api_traces"))


def run_to_end(tool):
    tool.start_monitoring()
    assert tool.wait(timeout=30), "the trace did not finish replaying"
    assert not tool.is_monitoring
    return tool


# --- over a trace -------------------------------------------------------------

def test_profiler_over_a_trace(traces, tmp_path):
    info = traces["steady"]
    prof = run_to_end(MemoryProfiler(sampling_interval=0.5, source=Trace(info.path, speed="max")))
    out = tmp_path / "profile.json"
    r = prof.generate_report(out)
    assert json.loads(out.read_text()) == r
    dev = r["devices"]["0"]
    assert dev["peak_memory"] == info.peak_block_bytes
    assert dev["current_memory"]["allocated"] == info.live_at_end_block_bytes
    assert dev["statistics"]["duration_seconds"] == pytest.approx(info.duration_s)
    assert dev["statistics"]["num_snapshots"] in (int(info.duration_s / 0.5) + 1, int(info.duration_s / 0.5) + 2)
    png = prof.plot(tmp_path / "profile.png")
    assert (tmp_path / "profile.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png == tmp_path / "profile.png"


def test_profiler_duration_and_capacity(traces):
    prof = run_to_end(MemoryProfiler(sampling_interval=1.0, duration=30,
                                     source=Trace(traces["steady"].path, speed="max", capacity=4 << 30)))
    dev = prof.generate_report()["devices"]["0"]
    assert dev["statistics"]["num_snapshots"] == 31
    assert dev["current_memory"]["total"] == 4 << 30


def test_oom_detector_calls_back_with_device_and_prediction(traces):
    info = traces["growth"]
    capacity = 4400 * MiB
    truth = (capacity - info.peak_block_bytes) / info.growth_bytes_per_s
    calls, one_arg = [], []
    det = OOMDetector(threshold=85, warning_callback=lambda dev, p: calls.append((dev, p)), sampling_interval=0.1,
                      source=Trace(info.path, speed="max", capacity=capacity))
    det.add_warning_callback(lambda p: one_arg.append(p))
    run_to_end(det)
    assert calls, "no warning on a job that runs out of memory in under two minutes"
    device, warned = calls[-1]
    assert device == "0"
    assert isinstance(warned, OOMPrediction)
    assert warned.risk_level in (RiskLevel.HIGH, RiskLevel.CRITICAL)
    assert len(one_arg) == len(calls)
    p = det.predict()
    assert p.device_id == "0"
    assert p.risk_level is RiskLevel.HIGH
    assert p.predicted_oom_time_seconds == pytest.approx(truth, rel=0.2)
    assert p.growth_rate_mb_per_sec == pytest.approx(info.growth_bytes_per_s / MiB, rel=0.05)
    assert 70 < p.current_usage_percent < 85
    assert p.recommendation == p.recommendations[0]
    r = det.generate_report()["devices"]["0"]
    assert r["risk_assessment"]["growth_rate_mb_per_sec"] == pytest.approx(p.growth_rate_mb_per_sec)
    assert r["warnings"]


def test_leak_detector_over_a_trace_names_the_site(traces):
    info = traces["leaky"]
    det = run_to_end(MemoryLeakDetector(threshold_mb_per_min=10, window=60, sampling_interval=0.5,
                                        source=Trace(info.path, speed="max")))
    dev = det.check()["devices"]["0"]
    assert dev["leak_detected"] is True
    assert dev["growth_rate_mb_per_min"] == pytest.approx(info.leak_rate_mib_per_min, rel=0.2)
    assert dev["sites"][0]["frames"] == memtrace.LEAK_FRAMES
    # Between minute 2 and minute 4, the leaking site grew by two minutes of leak.
    changes = det.diff(120 * 10**9, 240 * 10**9)
    top = changes[0]
    assert top["frames"] == memtrace.LEAK_FRAMES
    assert top["bytes_delta"] == pytest.approx(2 * info.leak_rate_mib_per_min * MiB, rel=0.05)
    assert top["count_delta"] == pytest.approx(120, abs=3)  # one block per one-second step
    assert top["bytes_after"] - top["bytes_before"] == top["bytes_delta"]


@pytest.mark.parametrize("name", ["steady", "warmup"])
def test_leak_detector_no_leak(traces, name):
    det = run_to_end(MemoryLeakDetector(sampling_interval=0.5, source=Trace(traces[name].path, speed="max")))
    assert det.generate_report()["devices"]["0"]["leak_detected"] is False


def test_fragmentation_analyzer_over_a_trace(traces):
    frag = run_to_end(FragmentationAnalyzer(interval=0.5, source=Trace(traces["fragmenting"].path, speed="max")))
    dev = frag.generate_report()["devices"]["0"]
    assert dev["num_samples"] == len(dev["samples"]) >= 100
    assert 10 < dev["avg_fragmentation"] <= dev["max_fragmentation"] <= 100
    assert dev["samples"][-1]["allocated"] == traces["fragmenting"].live_at_end_block_bytes


def test_memory_debugger_status_and_exports(traces, tmp_path):
    dbg = run_to_end(MemoryDebugger(sampling_interval=0.5, source=Trace(traces["leaky"].path, speed="max")))
    status = dbg.get_status_report()
    for key in ("timestamp", "source", "running", "elapsed_seconds", "sampler", "profile", "oom", "leak", "fragment"):
        assert key in status, key
    assert status["running"] is False
    assert status["elapsed_seconds"] == pytest.approx(traces["leaky"].duration_s)
    assert status["leak"]["devices"]["0"]["leak_detected"] is True
    assert dbg.cost()["rounds"] >= 1200
    html = dbg.html_report(tmp_path / "r.html", title="API <report>")
    assert (tmp_path / "r.html").read_text() == html
    assert "API &lt;report&gt;" in html and "<svg" in html
    ct = dbg.chrome_trace(tmp_path / "r.trace.json")
    assert json.loads((tmp_path / "r.trace.json").read_text()) == ct
    assert any(e["ph"] == "C" for e in ct["traceEvents"])


# --- over a simulated allocator, allocating from Python -------------------------

def test_profiler_sees_python_allocations(tmp_path):
    sim = SimulatedAllocator("4GB", index=7)
    prof = MemoryProfiler(sampling_interval=0.01, source=sim)
    with prof:
        ptrs = [sim.allocate(3 * MiB + 100) for _ in range(10)]
        time.sleep(0.1)
        for p in ptrs:
            sim.free(p)
        time.sleep(0.05)
    dev = prof.generate_report()["devices"][sim.label]
    # The allocator's own peak: every block rounded to 512, even between samples.
    assert dev["peak_memory"] == 10 * memtrace.block_bytes(3 * MiB + 100)
    assert dev["current_memory"]["allocated"] == 0
    assert dev["current_memory"]["total"] == 4 * 10**9 or dev["current_memory"]["total"] == sim.capacity
    assert dev["statistics"]["num_snapshots"] >= 5


def leaky_helper(sim, held):
    held.append(sim.allocate(MiB))


LEAK_LINE = inspect.getsourcelines(leaky_helper)[1] + 1


def test_leak_detector_tracks_python_sites():
    sim = SimulatedAllocator("4GB", index=6)
    held = []
    det = MemoryLeakDetector(threshold_mb_per_min=1, window=0.5, enable_tracking=True, sampling_interval=0.01,
                             source=sim)
    det.start_monitoring()
    try:
        for _ in range(60):
            leaky_helper(sim, held)
            time.sleep(0.01)
    finally:
        det.stop_monitoring()
    dev = det.generate_report()["devices"][sim.label]
    assert dev["tracking"] is True
    top = dev["sites"][0]
    assert top["growth_bytes"] > 0
    assert top["frames"][0].endswith(f"test_tools_memory.py:{LEAK_LINE} in leaky_helper"), top["frames"]
    assert "in test_leak_detector_tracks_python_sites" in top["frames"][1]
    assert top["count"] == len(held) and top["bytes"] == len(held) * MiB
    for p in held:
        sim.free(p)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_callback_that_raises_type_error_is_called_once_with_both_arguments(traces):
    info = traces["growth"]
    seen, plain = [], []

    def strict(device, prediction):
        seen.append((device, prediction))
        raise TypeError("the callback's own error")

    det = OOMDetector(threshold=85, warning_callback=strict, sampling_interval=0.1,
                      source=Trace(info.path, speed="max", capacity=4400 * MiB))
    det.add_warning_callback(lambda device, prediction: plain.append(device))
    run_to_end(det)
    assert plain, "no warning on a job that runs out of memory in under two minutes"
    assert len(seen) == len(plain)
    assert all(device == "0" and isinstance(p, OOMPrediction) for device, p in seen)


def test_tracking_gives_back_the_capture_state_it_found():
    from genesis import _C

    before = _C.capture_locations()
    _C.set_capture_locations(True)  # a program that debugs memory itself
    try:
        det = MemoryLeakDetector(enable_tracking=True, sampling_interval=0.05,
                                 source=SimulatedAllocator("1GB", index=5))
        det.start_monitoring()
        det.stop_monitoring()
        assert _C.capture_locations() is True
    finally:
        _C.set_capture_locations(before)


def test_tracking_is_off_after_stop():
    from genesis import _C

    det = MemoryLeakDetector(enable_tracking=True, sampling_interval=0.05, source=SimulatedAllocator("1GB", index=5))
    assert _C.capture_locations() is True
    det.start_monitoring()
    det.stop_monitoring()
    assert _C.capture_locations() is False


# --- bad arguments --------------------------------------------------------------

@pytest.mark.parametrize("make, words", [
    (lambda: OOMDetector(threshold=0), "threshold"),
    (lambda: OOMDetector(threshold=101), "threshold"),
    (lambda: MemoryLeakDetector(threshold_mb_per_min=0), "threshold"),
    (lambda: MemoryLeakDetector(window=0), "window"),
    (lambda: MemoryDebugger(oom_threshold=0), "oom_threshold"),
    (lambda: MemoryProfiler(sampling_interval=0), "interval"),
    (lambda: FragmentationAnalyzer(interval=-1), "interval"),
    (lambda: MemoryProfiler(source="bogus"), "unknown source 'bogus'"),
    (lambda: Trace("x.csv", speed="fast"), "speed 'fast'"),
])
def test_bad_arguments_raise_at_once(make, words):
    with pytest.raises(ValueError, match=words):
        make()


def test_bad_trace_raises_at_start(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.csv"):
        MemoryProfiler(source=Trace(tmp_path / "missing.csv", speed="max")).start_monitoring()
    with pytest.raises(ValueError, match="device '9'"):
        MemoryProfiler(devices=["9"], source=SimulatedAllocator("1GB", index=4)).start_monitoring()
    with pytest.raises(TypeError):
        MemoryProfiler(source=object()).start_monitoring()


def test_reports_need_a_start():
    with pytest.raises(RuntimeError, match="start_monitoring"):
        MemoryProfiler(source=SimulatedAllocator("1GB", index=3)).generate_report()
