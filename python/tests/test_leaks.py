"""Leak debugging: enable_memory_debugging / set_memory_debug,
check_memory_leaks() with Python locations and sizes."""

import inspect
import os

import genesis
from conftest import MiB
from genesis import testing

THIS_FILE = os.path.basename(__file__)


def _line_of(text):
    lines, start = inspect.getsourcelines(_leaky)
    return start + next(i for i, line in enumerate(lines) if text in line)


def _leaky(sim):
    kept = sim.allocate(6 * MiB)  # LEAK-SITE
    sim.free(sim.allocate(2 * MiB))
    return kept


def test_leak_reports_python_location_and_size(sim):
    before = sim.allocate(MiB)  # live before debugging: not a leak
    genesis.enable_memory_debugging(True)
    assert genesis.memory_debug.is_memory_debugging_enabled()
    kept = _leaky(sim)
    leaks = [leak for leak in genesis.check_memory_leaks() if leak.device == sim.label]
    assert [(leak.address, leak.size) for leak in leaks] == [(kept, 6 * MiB)]
    leak = leaks[0]
    # Innermost frame first, then its callers.
    assert leak.frames[0].endswith(f"{THIS_FILE}:{_line_of('LEAK-SITE')} in _leaky")
    assert leak.frames[1].endswith("in test_leak_reports_python_location_and_size")
    assert leak.requested_size == 6 * MiB
    assert "6.00 MiB" in str(leak)
    sim.free(kept)
    assert not [leak for leak in genesis.check_memory_leaks() if leak.device == sim.label]
    genesis.enable_memory_debugging(False)
    sim.free(before)


def test_reused_address_counts_as_leak(sim):
    p = sim.allocate(3 * MiB)
    genesis.set_memory_debug(True)
    sim.free(p)
    q = sim.allocate(3 * MiB)  # the cache hands the same block out again
    assert q == p
    leaks = [leak for leak in genesis.check_memory_leaks() if leak.device == sim.label]
    assert [leak.address for leak in leaks] == [q]
    genesis.set_memory_debug(False)
    sim.free(q)


def test_min_size_and_host_allocator(host):
    genesis.enable_memory_debugging(True)
    small = testing.host_allocate(4096)
    big = testing.host_allocate(3 * MiB)
    try:
        cpu_leaks = [leak for leak in genesis.check_memory_leaks() if leak.device == "cpu"]
        assert {leak.address for leak in cpu_leaks} == {small, big}
        assert all(THIS_FILE in leak.location for leak in cpu_leaks)
        only_big = [leak for leak in genesis.check_memory_leaks(min_size="1MiB") if leak.device == "cpu"]
        assert [leak.address for leak in only_big] == [big]
    finally:
        testing.host_free(small)
        testing.host_free(big)
    assert not [leak for leak in genesis.check_memory_leaks() if leak.device == "cpu"]


def test_locations_only_while_debugging(sim):
    genesis.enable_memory_debugging(False)
    p = sim.allocate(2 * MiB)
    try:
        # Without debugging every live allocation is reported, located by address.
        leaks = [leak for leak in genesis.check_memory_leaks() if leak.device == sim.label]
        assert [leak.location for leak in leaks] == [f"0x{p:x}"]
    finally:
        sim.free(p)
