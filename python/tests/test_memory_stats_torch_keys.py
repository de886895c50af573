"""memory_stats() carries PyTorch's key names where the concept is the same
(Note [PyTorch's statistic names] in python/src/py_convert.cpp), so that
dashboards written for torch.cuda.memory_stats() read Genesis. On a
simulated GPU: the names, and that the values are the Genesis figures they
stand for."""

import pytest

import genesis
from genesis.testing import SimulatedAllocator

MiB = 1 << 20

# torch.cuda.memory_stats() of PyTorch's native allocator (torch/csrc/cuda/Module.cpp):
# per-pool statistics, flattened, and the counters.
ARRAYS = ("allocation", "segment", "active", "inactive_split", "allocated_bytes", "reserved_bytes", "active_bytes",
          "inactive_split_bytes", "requested_bytes")
POOLS = ("all", "small_pool", "large_pool")
FIELDS = ("current", "peak", "allocated", "freed")
COUNTERS = ("num_alloc_retries", "num_ooms", "max_split_size", "num_sync_all_streams", "num_device_alloc",
            "num_device_free")
PYTORCH_KEYS = ({f"{a}.{p}.{f}" for a in ARRAYS for p in POOLS for f in FIELDS} | set(COUNTERS)
                | {f"{o}.{f}" for o in ("oversize_allocations", "oversize_segments") for f in FIELDS})


@pytest.fixture()
def sim():
    return SimulatedAllocator(256 * MiB, expandable=False)


def test_every_pytorch_key_is_there(sim):
    s = sim.memory_stats()
    missing = PYTORCH_KEYS - set(s)
    assert not missing, sorted(missing)
    for k in PYTORCH_KEYS:
        assert isinstance(s[k], int), k
    # Genesis's own names stay.
    for k in ("allocated_bytes", "reserved_bytes", "peak_allocated", "num_cache_hits", "cache_hit_rate"):
        assert k in s


def test_the_values_are_the_figures_they_name(sim):
    s1 = sim.create_stream()
    small = [sim.allocate(1000) for _ in range(3)]
    big = sim.allocate(30 * MiB)
    pending = sim.allocate(4 * MiB)
    sim.record_stream(pending, s1)
    sim.submit_work(s1)
    sim.free(pending)
    sim.free(small[0])
    s = sim.memory_stats()
    assert s["allocated_bytes.all.current"] == s["allocated_bytes"] == 2 * 1024 + 30 * MiB
    assert s["allocated_bytes.small_pool.current"] == 2 * 1024
    assert s["allocated_bytes.large_pool.current"] == 30 * MiB
    assert s["requested_bytes.all.current"] == 2 * 1000 + 30 * MiB
    assert s["active_bytes.all.current"] == s["allocated_bytes"] + 4 * MiB  # the pending block is active
    assert s["allocation.all.current"] == s["active.all.current"] == 3
    assert s["allocation.all.allocated"] == 5 and s["allocation.all.freed"] == 2
    assert s["reserved_bytes.all.current"] == s["reserved_bytes"]
    assert s["segment.all.current"] == s["segment_count"] >= 3
    assert s["num_device_alloc"] == s["num_upstream_allocs"] == s["segment.all.current"]
    assert s["max_split_size"] == -1
    assert s["oversize_allocations.current"] == 0
    sim.free(big)
    sim.complete_all()
    peak = s["reserved_bytes.all.peak"]
    sim.empty_cache()
    s = sim.memory_stats()
    assert s["reserved_bytes.all.peak"] == peak
    assert s["num_device_free"] == s["num_upstream_frees"] > 0
    assert s["num_sync_all_streams"] >= 1


def test_retries_and_ooms_are_counted_as_pytorch_does(sim):
    p = sim.allocate(8 * MiB)
    sim.free(p)
    sim.fail_next_allocations(1)
    q = sim.allocate(40 * MiB)  # refused once, cache released, retried
    s = sim.memory_stats()
    assert s["num_alloc_retries"] == s["num_upstream_failures"] == 1
    with pytest.raises(genesis.OutOfMemoryError):
        sim.allocate(1 << 30)
    assert sim.memory_stats()["num_ooms"] == 1
    sim.free(q)


# Every per-pool statistic in memory_stats(), PyTorch's names and Genesis's
# own (cached_bytes): each has the four fields.
ALL_ARRAYS = ARRAYS + ("cached_bytes",)


def _totals(s):
    return {f"{a}.{p}": (s[f"{a}.{p}.current"], s[f"{a}.{p}.allocated"], s[f"{a}.{p}.freed"])
            for a in ALL_ARRAYS for p in POOLS}


def _check_totals(s, before, at_reset, step):
    """allocated and freed never go down, and current - allocated + freed is
    the value at the last reset (0 for an allocator whose statistics were
    never reset)."""
    now = _totals(s)
    for key, (cur, alloc, freed) in now.items():
        assert alloc >= before[key][1] and freed >= before[key][2], (step, key, now[key], before[key])
        assert cur - alloc + freed == at_reset[key][0], (step, key, now[key], at_reset[key])
    for a in ALL_ARRAYS:
        for f in ("allocated", "freed"):
            assert s[f"{a}.all.{f}"] == s[f"{a}.small_pool.{f}"] + s[f"{a}.large_pool.{f}"], (step, a, f)
    return now


@pytest.mark.parametrize("expandable", [False, True])
@pytest.mark.parametrize("thread_cache", [False, True])
def test_every_statistic_keeps_running_totals(expandable, thread_cache):
    sim = SimulatedAllocator(256 * MiB, expandable=expandable, thread_cache=thread_cache)
    zero = _totals(sim.memory_stats())
    assert all(v == (0, 0, 0) for v in zero.values())
    s1 = sim.create_stream()
    before, at_reset = zero, zero

    def step(name):
        nonlocal before
        before = _check_totals(sim.memory_stats(), before, at_reset, name)

    def workload(tag):
        sizes = [700, 1000, 4096, 70_000, 3 * MiB + 5, 1000, 12 * MiB, 300]
        first = [sim.allocate(n) for n in sizes]
        step(f"{tag}: allocated")
        for p in first[::2]:
            sim.free(p)
        step(f"{tag}: every other freed")
        second = [sim.allocate(n // 2 + 1) for n in sizes]
        step(f"{tag}: reallocated")
        pending = sim.allocate(2 * MiB)
        sim.record_stream(pending, s1)
        sim.submit_work(s1)
        sim.free(pending)
        step(f"{tag}: freed while another stream uses it")
        with pytest.raises(genesis.OutOfMemoryError):
            sim.allocate(1 << 30)
        sim.complete_all()
        for p in first[1::2] + second:
            sim.free(p)
        step(f"{tag}: all freed")
        sim.empty_cache()
        step(f"{tag}: empty_cache")

    workload("first")
    s = sim.memory_stats()
    # The figures themselves, not only their balance: every byte asked for
    # was given back, and the segments taken were all released.
    assert s["requested_bytes.all.allocated"] == s["requested_bytes.all.freed"] > 0
    assert s["active_bytes.all.allocated"] == s["allocated_bytes.all.allocated"] > 0
    assert s["active_bytes.all.freed"] == s["active_bytes.all.allocated"]
    assert s["segment.all.allocated"] == s["segment.all.freed"] > 0
    assert s["segment.large_pool.allocated"] >= 1 and s["segment.small_pool.allocated"] >= 1
    if not expandable:
        # A classic segment is one upstream allocation (an expandable one
        # maps its pages in several).
        assert s["segment.all.allocated"] == s["num_device_alloc"]
        # Expandable segments' free pages are releasable: never split blocks.
        assert s["inactive_split.all.allocated"] > 0 and s["inactive_split_bytes.all.allocated"] > 0
    assert s["inactive_split.all.current"] == 0
    assert s["cached_bytes.all.allocated"] == s["reserved_bytes.all.allocated"] + s["allocated_bytes.all.freed"]

    # Blocks live across the resets; reset_accumulated_memory_stats zeroes
    # the totals and keeps currents and peaks, as PyTorch's does.
    live = [sim.allocate(3000), sim.allocate(5 * MiB)]
    peak = sim.memory_stats()["allocated_bytes.all.peak"]
    sim.reset_accumulated_memory_stats()
    s = sim.memory_stats()
    assert all(s[f"{k}.allocated"] == 0 and s[f"{k}.freed"] == 0 for k in _totals(s)), s
    assert s["allocated_bytes.all.peak"] == peak and s["allocated_bytes.all.current"] > 0
    before = at_reset = _totals(s)
    workload("after reset_accumulated_memory_stats")
    sim.reset_memory_stats()
    before = at_reset = _totals(sim.memory_stats())
    workload("after reset_memory_stats")
    for p in live:
        sim.free(p)
    sim.empty_cache()
    step("end")
    s = sim.memory_stats()
    assert s["allocated_bytes.all.current"] == s["reserved_bytes.all.current"] == 0
