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
