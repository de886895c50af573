"""The C++ caching allocator driven from Python on a simulated GPU: out of
memory, limits, streams, maintenance and misuse."""

import pytest

import genesis
from conftest import MiB
from genesis.testing import SimulatedAllocator


def test_oom_raises_out_of_memory_error_with_explanation(sim):
    with pytest.raises(genesis.OutOfMemoryError) as info:
        sim.allocate("2GiB")
    message = str(info.value)
    assert isinstance(info.value, RuntimeError)
    # On the simulated device the C++ text says "Out of memory"; on a GPU it
    # says "CUDA OOM" (see test_cuda.py).
    assert "Out of memory (sim:0)" in message
    assert "2.00 GiB" in message and "Try:" in message
    assert sim.memory_stats().num_ooms == 1


def test_oom_after_filling_then_recovers(sim):
    blocks = [sim.allocate(256 * MiB) for _ in range(4)]
    with pytest.raises(genesis.OutOfMemoryError):
        sim.allocate(256 * MiB)
    sim.free(blocks.pop())
    p = sim.allocate(256 * MiB)  # fits again
    assert sim.memory_allocated() == 1024 * MiB
    for b in blocks + [p]:
        sim.free(b)
    assert sim.memory_allocated() == 0


def test_memory_fraction_caps_reserved(sim):
    sim.set_memory_fraction(0.25)
    assert sim.memory_limit() == 256 * MiB
    p = sim.allocate(200 * MiB)
    with pytest.raises(genesis.OutOfMemoryError, match="memory_fraction"):
        sim.allocate(100 * MiB)
    sim.free(p)
    sim.set_memory_fraction(1.0)
    assert sim.memory_limit() is None
    sim.free(sim.allocate(300 * MiB))


@pytest.mark.parametrize("bad", [0, -0.5, 1.5, float("nan"), float("inf")])
def test_memory_fraction_rejects_bad_values(sim, bad):
    with pytest.raises(ValueError):
        sim.set_memory_fraction(bad)


def test_cache_size_caps_cached_memory():
    sim = SimulatedAllocator("1GiB", expandable=False, thread_cache=False)
    blocks = [sim.allocate(30 * MiB) for _ in range(4)]
    for b in blocks:
        sim.free(b)
    assert sim.memory_cached() >= 120 * MiB
    sim.set_cache_size("40MB")
    assert sim.memory_cached() <= 40 * 10**6
    assert sim.memory_stats().cache_limit == 40 * 10**6
    sim.set_cache_size(None)
    assert sim.memory_stats().cache_limit == 0  # no cap


def test_cache_size_rejects_bad_strings(sim):
    with pytest.raises(ValueError, match="invalid size"):
        sim.set_cache_size("lots")
    with pytest.raises(ValueError):
        sim.set_cache_size(-1)
    with pytest.raises(TypeError):
        sim.set_cache_size(1.5)


def test_double_free_and_foreign_pointer_are_value_errors(sim):
    p = sim.allocate(4096)
    sim.free(p)
    with pytest.raises(ValueError):
        sim.free(p)
    with pytest.raises(ValueError):
        sim.free(12345)
    assert sim.memory_allocated() == 0


def test_zero_bytes_returns_null(sim):
    assert sim.allocate(0) == 0
    sim.free(0)  # ignored, like C++


def test_owns_and_allocation_size(sim):
    p = sim.allocate(1000)
    assert sim.owns(p) and sim.allocation_size(p) == 1024
    sim.free(p)
    assert not sim.owns(p)


def test_streams_keep_blocks_apart(sim):
    s1 = sim.create_stream()
    p = sim.allocate(4096, stream=0)
    sim.record_stream(p, s1)
    sim.submit_work(s1)
    sim.free(p)
    assert sim.memory_stats().active_bytes >= 4096  # still in use by s1's work
    sim.complete_all()
    q = sim.allocate(4096, stream=s1)
    assert q != 0
    sim.free(q)


def test_collect_garbage_and_compact_release_memory():
    sim = SimulatedAllocator("1GiB", expandable=False, thread_cache=False)
    sim.free(sim.allocate(50 * MiB))
    assert sim.memory_reserved() > 0
    assert sim.collect_garbage(max_idle=3600) == 0  # used just now: kept
    released = sim.collect_garbage()
    assert released >= 50 * MiB and sim.memory_reserved() == 0
    sim.free(sim.allocate(50 * MiB))
    assert sim.compact() >= 50 * MiB and sim.memory_reserved() == 0
    with pytest.raises(ValueError):
        sim.collect_garbage(-1)


def test_warmup_fills_the_cache(sim):
    sim.warmup({"1MiB": 4, 8192: 2})
    stats = sim.memory_stats()
    assert stats.allocated_bytes == 0 and stats.reserved_bytes >= 4 * MiB
    hits = stats.num_cache_hits
    p = sim.allocate(MiB)
    assert sim.memory_stats().num_cache_hits == hits + 1
    sim.free(p)
    with pytest.raises(ValueError):
        sim.warmup([(0, 1)])
    with pytest.raises(TypeError):
        sim.warmup("1MB")


def test_injected_device_failures_are_retried_then_reported(sim):
    sim.fail_next_allocations(1)
    p = sim.allocate(4 * MiB)  # the allocator frees its cache and retries
    sim.free(p)
    sim.fail_next_allocations(100)
    with pytest.raises(genesis.OutOfMemoryError):
        sim.allocate(600 * MiB)
    sim.fail_next_allocations(0)


def test_two_simulated_allocators_get_distinct_labels():
    a, b = SimulatedAllocator("1GB"), SimulatedAllocator("1GB")
    assert a.label != b.label
    assert a.label.startswith("sim:0") and b.label.startswith("sim:0")
    assert a.label in repr(a)
