"""genesis.device: parsing, identity, and the memory methods on the CPU device."""

import pickle

import pytest

import genesis
from conftest import HAS_CUDA, MiB, requires_cuda, requires_no_cuda


def test_cpu_device_basics():
    d = genesis.device("cpu")
    assert d.type == "cpu"
    assert d.index is None
    assert str(d) == "cpu"
    assert repr(d) == "device(type='cpu')"
    assert d == genesis.device("cpu")
    assert hash(d) == hash(genesis.device("cpu"))
    assert genesis.device(d) == d
    assert pickle.loads(pickle.dumps(d)) == d
    assert d != "cpu"


@pytest.mark.parametrize("text", ["gpu", "cuda:", "cuda:x", "cuda:-1", "CPU", "cpu:0", "", "cuda:1:2", " cuda"])
def test_bad_strings_are_value_errors(text):
    with pytest.raises(ValueError, match="device"):
        genesis.device(text)


@pytest.mark.parametrize("value", [None, 1.5, b"cpu", [], True])
def test_bad_types_are_type_errors(value):
    with pytest.raises(TypeError):
        genesis.device(value)


def test_device_is_immutable():
    with pytest.raises(AttributeError):
        genesis.device("cpu").foo = 1


@requires_no_cuda
def test_cuda_device_without_gpu_is_a_clear_value_error():
    for spec in ("cuda", "cuda:0", 0):
        with pytest.raises(ValueError, match="no CUDA GPU"):
            genesis.device(spec)


@requires_cuda
def test_cuda_device_parsing():
    d = genesis.device("cuda")
    assert d.type == "cuda" and d.index == genesis.cuda.current_device()
    assert genesis.device("cuda:0") == genesis.device(0) == genesis.device("cuda", 0)
    assert repr(genesis.device("cuda:0")) == "device(type='cuda', index=0)"
    with pytest.raises(ValueError, match="does not exist"):
        genesis.device(f"cuda:{genesis.cuda.device_count()}")


def test_cpu_memory_methods_follow_allocations(host):
    assert host.memory_allocated() == 0
    p = genesis.testing.host_allocate(10000)
    try:
        assert host.memory_allocated() == 10240  # rounded to 512
        assert host.memory_reserved() >= 2 * MiB  # one small-pool segment
        assert host.memory_cached() == host.memory_reserved() - 10240
        assert host.max_memory_allocated() == 10240
        stats = host.memory_stats()
        assert stats["num_allocations"] == 1 and stats["num_cache_misses"] == 1
    finally:
        genesis.testing.host_free(p)
    assert host.memory_allocated() == 0
    assert host.max_memory_allocated() == 10240  # the peak stays
    assert host.max_memory_cached() >= host.memory_cached()
    host.reset_peak_stats()
    assert host.max_memory_allocated() == 0
    host.empty_cache()
    assert host.memory_reserved() == 0
    assert host.memory_cached() == 0


def test_reset_memory_stats_restarts_counters(host):
    p = genesis.testing.host_allocate(4096)
    genesis.testing.host_free(p)
    assert host.memory_stats()["num_frees"] == 1
    host.reset_memory_stats()
    stats = host.memory_stats()
    assert stats["num_allocations"] == 0 and stats["num_frees"] == 0 and stats["peak_allocated"] == 0


def test_cpu_memory_summary_and_snapshot(host):
    p = genesis.testing.host_allocate(3 * MiB)
    try:
        summary = host.memory_summary()
        assert "Genesis memory summary: host" in summary and "Allocated memory" in summary
        snap = host.memory_snapshot()
        allocated = [b for s in snap for b in s["blocks"] if b["state"] == "allocated"]
        assert [b["address"] for b in allocated] == [p]
        assert snap[0]["device"] == "cpu"
    finally:
        genesis.testing.host_free(p)


@pytest.mark.skipif(HAS_CUDA, reason="the default device is a GPU here")
def test_default_device_is_cpu_without_gpu():
    assert genesis.memory_stats().device == "cpu"
