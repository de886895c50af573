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
