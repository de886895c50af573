"""Module-level statistics: genesis.memory_stats(),
detailed_memory_stats(), empty_cache(), on the host allocator and on a
simulated GPU."""

import pickle

import pytest

import genesis
from conftest import MiB
from genesis import testing

M2_KEYS = ["allocated_bytes", "cached_bytes", "reserved_bytes", "active_bytes", "inactive_split_bytes",
           "inactive_bytes", "peak_allocated", "peak_cached", "num_allocations", "num_allocs", "num_frees",
           "num_cache_hits", "num_cache_misses", "cache_hit_rate", "fragmentation_ratio", "total_allocated"]


def test_memory_stats_has_every_m2_key(host):
    stats = genesis.memory_stats("cpu")
    for key in M2_KEYS:
        assert key in stats, key
    assert "allocated_bytes.small_pool.current" in stats
    assert "reserved_bytes.large_pool.peak" in stats


def test_stats_dict_and_attribute_access_agree(host):
    p = testing.host_allocate(100_000)
    try:
        stats = genesis.memory_stats("cpu")
        assert stats.allocated_bytes == stats["allocated_bytes"] == 100_352
        assert stats.num_allocs == stats.num_allocations == 1
        assert stats.inactive_bytes == stats.inactive_split_bytes
        assert stats.cached_bytes == stats.reserved_bytes - stats.allocated_bytes
        # Both spellings of the ratio: a call and a value.
        expected = (stats.reserved_bytes - stats.allocated_bytes) / stats.reserved_bytes
        assert stats.fragmentation_ratio() == pytest.approx(expected)
        assert f"{stats.fragmentation_ratio:.2%}" == f"{expected:.2%}"
        with pytest.raises(AttributeError):
            stats.no_such_stat
        with pytest.raises(AttributeError):
            stats.allocated_bytes = 0
    finally:
        testing.host_free(p)


def test_stats_are_a_snapshot(host):
    before = genesis.memory_stats("cpu")
    p = testing.host_allocate(4096)
    after = genesis.memory_stats("cpu")
    testing.host_free(p)
    assert before.allocated_bytes == 0 and after.allocated_bytes == 4096
    assert pickle.loads(pickle.dumps(after)) == after
    assert after.copy().device == "cpu"


def test_cache_hits_move(host):
    p = testing.host_allocate(8192)
    testing.host_free(p)
    # The first request misses unless blocks that earlier tests in this
    # process still hold keep a segment (with free room) that empty_cache()
    # could not release; the second is served from the cache either way.
    first = genesis.memory_stats("cpu")
    assert first.num_cache_misses + first.num_cache_hits == 1
    q = testing.host_allocate(8192)
    testing.host_free(q)
    stats = genesis.memory_stats("cpu")
    assert stats.num_allocations == 2
    assert stats.num_cache_hits == first.num_cache_hits + 1
    assert stats.num_cache_misses == first.num_cache_misses
    assert stats.cache_hit_rate == pytest.approx(stats.num_cache_hits / 2)
    assert stats.total_allocated == 2 * 8192


def test_pools_split_small_and_large(host):
    small = testing.host_allocate(4096)
    large = testing.host_allocate(4 * MiB)
    try:
        stats = genesis.memory_stats("cpu")
        assert stats["allocated_bytes.small_pool.current"] == 4096
        assert stats["allocated_bytes.large_pool.current"] == 4 * MiB
        assert stats.pool("small")["allocated_bytes"]["current"] == 4096
        assert stats.pool("large")["allocated_bytes"]["current"] == 4 * MiB
        with pytest.raises(ValueError):
            stats.pool("medium")
    finally:
        testing.host_free(small)
        testing.host_free(large)


def test_empty_cache_releases_everything_cached(host):
    p = testing.host_allocate(3 * MiB)
    testing.host_free(p)
    assert genesis.memory_stats("cpu").cached_bytes > 0
    genesis.empty_cache()
    stats = genesis.memory_stats("cpu")
    assert stats.cached_bytes == 0 and stats.reserved_bytes == 0
    assert stats.num_cache_flushes >= 1


def test_empty_cache_keeps_allocated_memory(host):
    p = testing.host_allocate(3 * MiB)
    try:
        genesis.empty_cache("cpu")
        assert genesis.memory_stats("cpu").allocated_bytes == 3 * MiB
    finally:
        testing.host_free(p)


def test_detailed_memory_stats_large_allocations(sim):
    big = sim.allocate(150 * MiB)
    small = sim.allocate(3 * MiB)
    try:
        stats = genesis.detailed_memory_stats(sim)
        assert stats.total_allocated == 153 * MiB
        assert stats.peak_allocated == 153 * MiB
        assert 0.0 <= stats.fragmentation_ratio <= 1.0
        assert f"{stats.cache_hit_rate:.2%}".endswith("%")
        large = stats.get_large_allocations(min_size=100 * MiB)
        assert [(a.address, a.size) for a in large] == [(big, 150 * MiB)]
        assert large[0].location.startswith("0x")  # no allocation context was set
        both = stats.get_large_allocations("1MB")
        assert [a.address for a in both] == [big, small]  # largest first
        assert stats.pools["large"]["allocated_bytes"]["current"] == 153 * MiB
    finally:
        sim.free(big)
        sim.free(small)
    # A snapshot in time: the stats object still shows the allocations.
    assert len(stats.get_large_allocations()) == 2


def test_memory_summary_module_level(sim):
    p = sim.allocate(5 * MiB)
    text = genesis.memory_summary(sim)
    sim.free(p)
    assert "sim:0" in text and "5.00 MiB" in text


def test_memory_snapshot_module_level(sim):
    p = sim.allocate(5 * MiB)
    try:
        segs = genesis.memory_snapshot(sim)
        assert sum(s["allocated_size"] for s in segs) == 5 * MiB
        seg = next(s for s in segs if s["allocated_size"])
        for key in ("address", "size", "state", "stream", "blocks", "pool", "device"):
            assert key in seg
        assert seg["state"] == "allocated"
        block = next(b for b in seg["blocks"] if b["state"] == "allocated")
        assert block["address"] == p and block["size"] == 5 * MiB and block["requested_size"] == 5 * MiB
    finally:
        sim.free(p)
