"""Profiling and leak checks stay exact in sessions longer than the event
history (over ten million events; Note [Exact sessions] in
include/genesis/memory/events.h), and allocation sites name several frames.

The long sessions drive the allocator through SimulatedAllocator.warmup(),
whose loop runs in C++ (1000 allocations and 1000 frees per call), so ten
million events take about a second, not minutes of Python calls."""

import inspect
import os
import warnings

import pytest

import genesis
from conftest import MiB

THIS_FILE = os.path.basename(__file__)
ROUNDS = 5_100  # x 2000 events: 10.2 million, far beyond the 65536-event rings


def _line(fn, text):
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if text in line)


def _churn(sim):
    for _ in range(ROUNDS):
        sim.warmup([(4096, 1000)])


def test_profile_of_ten_million_events_is_exact(sim):
    keep = sim.allocate(10 * MiB)
    with pytest.warns(genesis.profiler.TruncatedHistoryWarning, match=sim.label):
        with genesis.profiler.profile_memory() as prof:
            sim.free(sim.allocate(300 * MiB))  # the session's peak, long overwritten by the end
            _churn(sim)
        report = prof.report()
    r = report.devices[sim.label]
    assert r.num_allocs + r.num_frees > 10_000_000
    assert (r.num_allocs, r.num_frees) == (1 + ROUNDS * 1000, 1 + ROUNDS * 1000)
    assert r.bytes_requested == 300 * MiB + ROUNDS * 1000 * 4096 == r.bytes_freed
    assert r.largest_allocation == 300 * MiB
    assert r.num_cache_hits + r.num_cache_misses == r.num_allocs
    assert r.start_allocated == r.end_allocated == 10 * MiB
    assert r.peak_allocated == 310 * MiB == report.peak_memory(sim.label)
    assert r.mean_alloc_ns > 0 and r.mean_lifetime_ns > 0
    # The history is a window, and the report says so.
    assert r.truncated and report.truncated
    assert r.events_dropped > 0
    kept = prof.events(sim.label)
    assert len(kept) + r.events_dropped == r.num_allocs + r.num_frees + r.segments_allocated + r.segments_freed
    assert all(e.time_ns >= prof._session.start_ns for e in kept)
    assert "no longer in the history" in report.summary()
    # The timeline covers the window with exact levels: it ends where the session did.
    timeline = report.timeline()
    assert timeline.allocated(sim.label)[-1] == 10 * MiB
    assert timeline.times(sim.label)[0] == pytest.approx(r.window_start_s)
    # Only this allocator moved: the total peak is still exact.
    assert report.total_peak_exact
    others = sum(d.start_allocated for label, d in report.devices.items() if label != sim.label)
    assert report.peak_memory() == others + 310 * MiB
    sim.free(keep)


def _plant(sim):
    return sim.allocate(3 * MiB)  # PLANTED


def test_leak_planted_early_survives_ten_million_events(sim):
    before = sim.allocate(3 * MiB)  # live when debugging starts
    genesis.enable_memory_debugging(True)
    sim.free(before)
    leak = _plant(sim)
    assert leak == before  # an address the session started with, handed out again
    _churn(sim)
    leaks = [x for x in genesis.check_memory_leaks() if x.device == sim.label]
    assert [(x.address, x.size, x.requested_size) for x in leaks] == [(leak, 3 * MiB, 3 * MiB)]
    frames = leaks[0].frames
    assert frames[0].endswith(f"{THIS_FILE}:{_line(_plant, 'PLANTED')} in _plant")
    assert frames[1].endswith(f"in test_leak_planted_early_survives_ten_million_events")
    assert len(frames) == genesis.get_site_depth() == 4
    assert " <- " in str(leaks[0])
    sim.free(leak)
    assert not [x for x in genesis.check_memory_leaks() if x.device == sim.label]


def _inner(sim):
    return sim.allocate(MiB)  # INNER


def _middle(sim):
    return _inner(sim)  # MIDDLE


def _outer(sim):
    return _middle(sim)  # OUTER


def test_sites_name_several_frames_innermost_first(sim):
    genesis.enable_memory_debugging(True)
    p = _outer(sim)
    q = _inner(sim)  # the same innermost line, another caller: another site
    try:
        by_address = {x.address: x for x in genesis.check_memory_leaks() if x.device == sim.label}
        lines = by_address[p].location.split("\n")
        assert lines[:3] == [f"{_path()}:{_line(_inner, 'INNER')} in _inner",
                             f"{_path()}:{_line(_middle, 'MIDDLE')} in _middle",
                             f"{_path()}:{_line(_outer, 'OUTER')} in _outer"]
        assert lines[3].endswith("in test_sites_name_several_frames_innermost_first")
        other = by_address[q].location.split("\n")
        assert other[0] == lines[0] and other[1] != lines[1]
    finally:
        sim.free(p)
        sim.free(q)


def _path():
    return os.path.abspath(__file__)


def test_site_depth_is_configurable(sim):
    genesis.enable_memory_debugging(True)
    try:
        genesis.set_site_depth(1)
        p = _outer(sim)
        genesis.set_site_depth(2)
        q = _outer(sim)
        by_address = {x.address: x for x in genesis.check_memory_leaks() if x.device == sim.label}
        assert by_address[p].location == f"{_path()}:{_line(_inner, 'INNER')} in _inner"
        assert by_address[q].location.split("\n")[1].endswith(f":{_line(_middle, 'MIDDLE')} in _middle")
        assert len(by_address[q].frames) == 2
        sim.free(p)
        sim.free(q)
        with pytest.raises(ValueError):
            genesis.set_site_depth(0)
        with pytest.raises(ValueError):
            genesis.set_site_depth(33)
        with pytest.raises(TypeError):
            genesis.set_site_depth(2.0)
    finally:
        genesis.set_site_depth(4)
    assert genesis.get_site_depth() == 4


def test_overlapping_sessions_each_see_their_peak(sim):
    with genesis.profiler.profile_memory() as outer:
        sim.free(sim.allocate(100 * MiB))
        with genesis.profiler.profile_memory() as inner:
            sim.free(sim.allocate(10 * MiB))
    assert inner.peak_memory(sim.label) == 10 * MiB
    assert outer.peak_memory(sim.label) == 100 * MiB
    assert inner.report().devices[sim.label].num_allocs == 1
    assert outer.report().devices[sim.label].num_allocs == 2


def test_short_sessions_are_not_truncated(sim):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with genesis.profiler.profile_memory() as prof:
            sim.free(sim.allocate(MiB))
        report = prof.report()
    assert not report.truncated and report.total_peak_exact
    assert report.devices[sim.label].events_dropped == 0
