"""The Python memory calls (device methods, statistics, profiling, leak
checks, maintenance), written as user code calls them. Allocations are made with
genesis.testing.device_allocate; on a machine without a GPU the 'cuda'
device of the examples becomes the CPU device (the GPU variants run where
genesis.cuda.is_available())."""

import pytest

import genesis
from conftest import HAS_CUDA, MiB, requires_cuda
from genesis import testing


@pytest.fixture
def dev(host):
    """genesis.device('cuda') where there is a GPU, else the CPU device."""
    if not HAS_CUDA:
        yield host
        return
    d = genesis.device("cuda")
    d.empty_cache()
    d.reset_memory_stats()
    yield d
    d.empty_cache()


def _alloc(dev, n):
    return testing.device_allocate(dev, n)


def _free(dev, p):
    testing.device_free(dev, p)


# --- device methods -------------------------------------------------------------
def test_example_device_memory_methods(dev):
    allocated = dev.memory_allocated()
    assert f"{allocated / 1e6:.1f} MB" == "0.0 MB"
    p = _alloc(dev, 2 * MiB)
    assert dev.memory_allocated() == 2 * MiB
    assert dev.memory_cached() == dev.memory_reserved() - 2 * MiB
    assert dev.memory_reserved() >= 2 * MiB
    assert dev.max_memory_allocated() == 2 * MiB
    assert dev.max_memory_cached() >= dev.memory_cached()
    _free(dev, p)


def test_example_memory_stats_keys(dev):
    p = _alloc(dev, MiB)
    _free(dev, p)
    stats = dev.memory_stats()
    for key in ("allocated_bytes", "cached_bytes", "reserved_bytes", "inactive_split_bytes", "active_bytes",
                "cache_hit_rate", "num_allocations", "num_cache_hits", "num_cache_misses", "peak_allocated",
                "peak_cached"):
        assert key in stats
    assert f"{stats['cache_hit_rate']:.1%}" == "0.0%"
    assert stats["peak_allocated"] / 1e9 == MiB / 1e9
    assert stats["num_allocations"] == 1


def test_example_summary_empty_cache_reset(dev):
    p = _alloc(dev, MiB)
    _free(dev, p)
    assert "Allocated memory" in dev.memory_summary()
    dev.empty_cache()
    assert dev.memory_reserved() == 0
    dev.reset_memory_stats()
    assert dev.memory_stats()["num_allocations"] == 0


def test_example_realtime_hit_rate(dev):
    dev.reset_memory_stats()
    rates = []
    for i in range(100):
        x = _alloc(dev, 4 * MiB)
        y = _alloc(dev, 4 * MiB)
        _free(dev, x)
        _free(dev, y)
        if i % 10 == 0:
            stats = dev.memory_stats()
            rates.append(stats["cache_hit_rate"])
    # The first round needs a segment; afterwards every request hits the cache.
    assert rates[0] <= 0.5 and rates[-1] > 0.95
    assert rates == sorted(rates)


def test_example_efficiency_analysis(dev):
    p = _alloc(dev, 3 * MiB)
    stats = dev.memory_stats()
    efficiency = stats["allocated_bytes"] / stats["reserved_bytes"]
    fragmentation = 1 - (stats["active_bytes"] / stats["allocated_bytes"])
    assert 0 < efficiency <= 1
    assert fragmentation == 0.0
    _free(dev, p)


def test_example_profile_memory(dev):
    with genesis.profiler.profile_memory() as prof:
        x = _alloc(dev, 8 * MiB)
        y = _alloc(dev, 8 * MiB)
        _free(dev, x)
        _free(dev, y)
    assert str(dev) in prof.memory_summary()
    assert f"{prof.peak_memory() / 1e6:.1f} MB" == f"{16 * MiB / 1e6:.1f} MB"


def test_example_oom_protection(sim):
    try:
        sim.allocate(100000 * 100000 * 4)
    except RuntimeError as e:
        assert "Out of memory" in str(e)  # "CUDA OOM" on a GPU: test_example_oom_on_gpu
    else:
        pytest.fail("no out-of-memory error")


@requires_cuda
def test_example_oom_on_gpu():
    try:
        testing.device_allocate("cuda", 100000 * 100000 * 400)
    except RuntimeError as e:
        assert "CUDA OOM" in str(e)
    else:
        pytest.fail("no out-of-memory error")


def test_example_memory_debug_checkpoints(dev):
    genesis.set_memory_debug(True)
    log = []

    def memory_checkpoint(name):
        stats = dev.memory_stats()
        log.append(f"{name}: {stats['allocated_bytes'] / 1e6:.1f}MB allocated, "
                   f"{stats['cache_hit_rate']:.1%} hit rate")

    memory_checkpoint("start")
    x = _alloc(dev, 4096 * 4096 * 4)
    memory_checkpoint("after alloc")
    _free(dev, x)
    memory_checkpoint("after free")
    assert log == ["start: 0.0MB allocated, 0.0% hit rate", "after alloc: 67.1MB allocated, 0.0% hit rate",
                   "after free: 0.0MB allocated, 0.0% hit rate"]


# --- configuration, monitoring, profiling, leaks -------------------------------------------------------------------
def test_example_basic_configuration(host):
    if HAS_CUDA:
        genesis.cuda.set_memory_fraction(0.9)
        genesis.cuda.set_cache_size("2GB")
        assert genesis.cuda.memory_stats()["cache_limit"] == 2 * 10**9
        genesis.cuda.set_memory_fraction(1.0)
        genesis.cuda.set_cache_size(None)
        genesis.cpu.enable_pinned_memory(True)
        assert genesis.cpu.pinned_memory_enabled()
        genesis.cpu.enable_pinned_memory(False)
    else:
        with pytest.raises(genesis.CudaError):
            genesis.cuda.set_memory_fraction(0.9)
        with pytest.raises(genesis.CudaError):
            genesis.cuda.set_cache_size("2GB")
        with pytest.raises(genesis.CudaError):
            genesis.cpu.enable_pinned_memory(True)
    p = testing.device_allocate(genesis.memory_stats().device, 5 * MiB)
    stats = genesis.memory_stats()
    assert f"{stats.allocated_bytes / 1e9:.2f} GB" == "0.01 GB"
    assert stats.cached_bytes / 1e9 >= 0
    testing.device_free(stats.device, p)


def test_example_optimize_memory_usage(host):
    p = testing.host_allocate(5 * MiB)
    testing.host_free(p)

    def optimize_memory_usage():
        genesis.empty_cache()
        genesis.memory_manager.collect_garbage()
        genesis.memory_manager.compact()

    optimize_memory_usage()
    assert genesis.memory_stats("cpu").reserved_bytes == 0


def test_example_monitor_memory(sim):
    keep = [sim.allocate(8 * MiB) for _ in range(4)]
    for p in keep[::2]:
        sim.free(p)
    stats = genesis.memory_stats(sim)
    fragmentation = stats.fragmentation_ratio()
    assert fragmentation > 0.3
    if fragmentation > 0.3:
        genesis.memory_manager.compact(device=sim)
    assert genesis.memory_stats(sim).fragmentation_ratio() < fragmentation
    for p in keep[1::2]:
        sim.free(p)


def test_example_profiling_report(host):
    genesis.enable_memory_profiling(True)
    x = testing.host_allocate(3 * 4)
    y = testing.host_allocate(3 * 4)
    testing.host_free(x)
    testing.host_free(y)
    report = genesis.memory_profiler.get_report()
    assert "cpu" in report.summary()
    assert report.devices["cpu"].num_allocs == 2
    genesis.enable_memory_profiling(False)


def test_example_memory_timeline(sim, tmp_path):
    with genesis.memory_profiler.record():
        model = sim.allocate(64 * MiB)
        data = sim.allocate(16 * MiB)
        output = sim.allocate(8 * MiB)
        for p in (model, data, output):
            sim.free(p)
    timeline = genesis.memory_profiler.get_timeline()
    assert timeline.peak(sim.label) == 88 * MiB
    pytest.importorskip("matplotlib", reason="matplotlib (python3-matplotlib) is not installed")
    timeline.plot(tmp_path / "timeline.png")
    assert (tmp_path / "timeline.png").exists()


def test_example_leak_detection(sim):
    genesis.enable_memory_debugging(True)

    def train_model():
        return sim.allocate(10 * MiB)

    kept = train_model()
    leaks = [leak for leak in genesis.check_memory_leaks() if leak.device == sim.label]
    assert leaks
    lines = [f"  {leak.size} bytes at {leak.location}" for leak in leaks]
    assert lines[0].startswith(f"  {10 * MiB} bytes at ") and "in train_model" in lines[0]
    sim.free(kept)


def test_example_analyze_memory_usage(sim):
    big = sim.allocate(120 * MiB)
    stats = genesis.detailed_memory_stats(sim)
    lines = [f"total {stats.total_allocated / 1e9:.2f} GB", f"peak {stats.peak_allocated / 1e9:.2f} GB",
             f"fragmentation {stats.fragmentation_ratio:.2%}", f"hit rate {stats.cache_hit_rate:.2%}"]
    assert lines[0] == "total 0.13 GB"
    large_allocs = stats.get_large_allocations(min_size=100 * 1024 * 1024)
    assert [f"{a.size / 1e6:.1f} MB" for a in large_allocs] == ["125.8 MB"]
    assert large_allocs[0].location
    sim.free(big)


def test_example_pinned_blocks():
    if HAS_CUDA:
        buf = genesis.allocate_pinned(4096)
        assert genesis.is_pinned(buf)
    else:
        with pytest.raises(genesis.CudaError):
            genesis.allocate_pinned(4096)
    p = testing.host_allocate(4096)  # pageable host memory is not pinned
    assert not genesis.is_pinned(p)
    testing.host_free(p)
