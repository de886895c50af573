"""genesis.memory_manager: collect_garbage, compact, warmup."""

import pytest

import genesis
from conftest import MiB
from genesis import testing


def test_collect_garbage_releases_cached_host_memory(host):
    testing.host_free(testing.host_allocate(5 * MiB))
    cached = host.memory_cached()
    assert cached > 0
    assert genesis.memory_manager.collect_garbage(max_idle=3600) == 0  # recently used: kept
    released = genesis.memory_manager.collect_garbage()
    assert released >= cached - 2 * MiB  # whole free segments (a thread cache may keep a block)
    assert host.memory_cached() < cached


def test_compact_releases_unbacked_memory(host):
    testing.host_free(testing.host_allocate(5 * MiB))
    before = host.memory_reserved()
    released = genesis.memory_manager.compact()
    assert released > 0
    assert host.memory_reserved() == before - released


def test_compact_keeps_live_allocations(sim):
    keep = sim.allocate(10 * MiB)
    sim.free(sim.allocate(40 * MiB))
    released = genesis.memory_manager.compact(device=sim)
    assert released >= 40 * MiB
    assert sim.memory_allocated() == 10 * MiB
    sim.free(keep)


def test_warmup_on_a_device(host):
    genesis.memory_manager.warmup([("1MiB", 2), 4096], device="cpu")
    stats = host.memory_stats()
    assert stats.allocated_bytes == 0
    assert stats.reserved_bytes >= 2 * MiB
    assert stats.num_allocations == 3


def test_warmup_larger_than_the_device_fails_before_allocating(sim):
    with pytest.raises(ValueError) as info:
        sim.warmup({"1MiB": 10**9})  # a petabyte of 1 MiB blocks: would run for minutes
    msg = str(info.value)
    assert msg.startswith("warmup: the blocks asked for total 953.67 TiB (1048576000000000 bytes), more than the "
                          "total memory of "), msg
    assert "1.00 GiB (1073741824 bytes)" in msg, msg
    assert sim.memory_stats().num_allocations == 0 and sim.memory_reserved() == 0
    sim.set_memory_fraction(0.5)
    with pytest.raises(ValueError, match="more than the memory_fraction cap of"):
        sim.warmup([("400MiB", 2)])
    sim.warmup([("400MiB", 1)])  # fits under the cap
    assert sim.memory_reserved() >= 400 * MiB


def test_warmup_larger_than_the_host_fails_at_once(host):
    with pytest.raises(ValueError, match="^warmup: the blocks asked for total .* more than the "):
        genesis.memory_manager.warmup({"1MB": 10**9}, device="cpu")
    with pytest.raises(ValueError, match="more than 2\\^64 bytes"):
        genesis.memory_manager.warmup([(2**62, 2**30)], device="cpu")
    assert host.memory_stats().num_allocations == 0


def test_empty_cache_alias(host):
    testing.host_free(testing.host_allocate(3 * MiB))
    genesis.memory_manager.empty_cache()
    assert host.memory_reserved() == 0


def test_bad_arguments():
    with pytest.raises(TypeError):
        genesis.memory_manager.collect_garbage(max_idle="soon")
    with pytest.raises(ValueError):
        genesis.memory_manager.collect_garbage(max_idle=float("nan"))
    with pytest.raises(ValueError):
        genesis.memory_manager.warmup([(1024, -1)], device="cpu")
