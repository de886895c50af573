"""Profiling: profile_memory(), enable_memory_profiling(),
memory_profiler.record() / get_report() / get_timeline(), Timeline.plot()."""

import json

import pytest

import genesis
from conftest import MiB
from genesis import testing


def test_profile_memory_peak_and_summary(sim):
    keep = sim.allocate(10 * MiB)
    with genesis.profiler.profile_memory() as prof:
        a = sim.allocate(20 * MiB)
        b = sim.allocate(30 * MiB)
        sim.free(a)
        sim.free(b)
        c = sim.allocate(5 * MiB)
        sim.free(c)
    sim.free(keep)  # after the block: not part of the profile
    assert prof.peak_memory(sim.label) == 60 * MiB  # 10 before + 20 + 30
    report = prof.report()
    r = report.devices[sim.label]
    assert (r.num_allocs, r.num_frees) == (3, 3)
    assert r.bytes_requested == 55 * MiB and r.largest_allocation == 30 * MiB
    assert r.start_allocated == r.end_allocated == 10 * MiB
    assert r.num_cache_hits + r.num_cache_misses == 3
    assert r.mean_alloc_ns > 0 and r.mean_lifetime_ns > 0
    summary = prof.memory_summary()
    assert sim.label in summary and "60.00 MiB" in summary
    assert not prof.running
    # The whole-process peak includes every tracked allocator.
    assert prof.peak_memory() >= 60 * MiB
    # Events are the allocator's own records.
    actions = [e.action for e in prof.events(sim.label)]
    assert actions.count("alloc") == 3 and actions.count("free_requested") == 3


def test_profiling_leaves_peak_statistics_alone(sim):
    sim.free(sim.allocate(100 * MiB))
    with genesis.profiler.profile_memory() as prof:
        sim.free(sim.allocate(MiB))
    assert sim.max_memory_allocated() == 100 * MiB
    assert prof.peak_memory(sim.label) == MiB


def test_recording_is_restored_after_profiling(sim):
    allocator = sim._allocator()
    assert not allocator.event_recording
    with genesis.profiler.profile_memory():
        assert allocator.event_recording
        with genesis.profiler.profile_memory():  # nested sessions share recording
            pass
        assert allocator.event_recording
    assert not allocator.event_recording


def test_oom_counted_in_profile(sim):
    with genesis.profiler.profile_memory() as prof:
        with pytest.raises(genesis.OutOfMemoryError):
            sim.allocate("4GiB")
    assert prof.report().devices[sim.label].num_ooms == 1


def test_enable_memory_profiling_and_get_report(host):
    genesis.enable_memory_profiling(True)
    assert genesis.memory_profiler.is_enabled()
    p = testing.host_allocate(3 * MiB)
    testing.host_free(p)
    live = genesis.memory_profiler.get_report()  # while running: up to now
    assert live.devices["cpu"].num_allocs == 1
    genesis.enable_memory_profiling(False)
    assert not genesis.memory_profiler.is_enabled()
    report = genesis.memory_profiler.get_report()
    assert report.devices["cpu"].num_allocs == 1 and report.devices["cpu"].num_frees == 1
    assert report.peak_memory("cpu") == 3 * MiB
    text = report.summary()
    assert "cpu" in text and "3.00 MiB" in text
    with pytest.raises(TypeError):
        genesis.enable_memory_profiling("on")


def test_record_and_timeline(sim):
    with genesis.memory_profiler.record():
        ptrs = [sim.allocate(8 * MiB) for _ in range(3)]
        for p in ptrs:
            sim.free(p)
    timeline = genesis.memory_profiler.get_timeline()
    allocated = timeline.allocated(sim.label)
    # Segment events add points where only the reserved bytes change.
    changes = [a for i, a in enumerate(allocated) if i == 0 or a != allocated[i - 1]]
    assert changes == [0, 8 * MiB, 16 * MiB, 24 * MiB, 16 * MiB, 8 * MiB, 0]
    times = timeline.times(sim.label)
    assert times == sorted(times) and times[0] == 0.0
    assert timeline.peak(sim.label) == 24 * MiB
    assert max(timeline.reserved(sim.label)) >= 24 * MiB
    assert sim.label in timeline.devices and len(timeline) >= 7
    json.dumps(timeline.to_dict())  # plain data
    assert genesis.memory_profiler.get_report().peak_memory(sim.label) == 24 * MiB
    with pytest.raises(KeyError):
        timeline.series("cuda:7")


def test_timeline_plot_writes_an_image(sim, tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib (python3-matplotlib) is not installed")
    with genesis.memory_profiler.record():
        p = sim.allocate(4 * MiB)
        sim.free(p)
    path = tmp_path / "timeline.png"
    fig = genesis.memory_profiler.get_timeline().plot(path)
    assert path.stat().st_size > 1000
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    labels = [line.get_label() for line in fig.axes[0].get_lines()]
    assert f"{sim.label} allocated" in labels


def test_profile_without_activity_says_so():
    with genesis.profiler.profile_memory() as prof:
        pass
    assert "no allocator activity" in prof.memory_summary()


def test_reports_need_a_session(monkeypatch):
    monkeypatch.setattr(genesis.memory_profiler, "_latest", None)
    with pytest.raises(RuntimeError, match="enable_memory_profiling"):
        genesis.memory_profiler.get_report()
    with pytest.raises(RuntimeError):
        genesis.memory_profiler.get_timeline()


def test_enable_twice_keeps_the_running_session(host):
    genesis.enable_memory_profiling(True)
    p = testing.host_allocate(4096)
    genesis.enable_memory_profiling(True)  # no restart: the allocation stays in the report
    testing.host_free(p)
    genesis.enable_memory_profiling(False)
    assert genesis.memory_profiler.get_report().devices["cpu"].num_allocs == 1


def test_timeline_plot_without_a_path_shows(sim, monkeypatch):
    # The short spelling, timeline.plot(), shows the figure: headless, with
    # the non-interactive Agg backend, showing does nothing.
    pytest.importorskip("matplotlib", reason="matplotlib (python3-matplotlib) is not installed")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    import warnings

    import matplotlib.pyplot as plt

    with genesis.memory_profiler.record():
        sim.free(sim.allocate(MiB))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Agg is non-interactive, cannot show"
        fig = genesis.memory_profiler.get_timeline().plot()
    assert fig.axes and fig.axes[0].get_title() == "Genesis memory timeline"
    plt.close(fig)
    fig = genesis.memory_profiler.get_timeline().plot(show=False, device=sim.label)
    assert len(fig.axes[0].get_lines()) == 2  # allocated and reserved of one allocator
