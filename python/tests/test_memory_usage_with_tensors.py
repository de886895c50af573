"""Memory management with tensors, written as user code does it
(test_memory_usage_examples.py has the allocator-only calls). The examples'
`device = genesis.device('cuda')` becomes the CPU device without a GPU;
sizes used on the GPU are kept where the
CPU can afford them (noted where reduced)."""

import pytest

import genesis
from conftest import HAS_CUDA, MiB


@pytest.fixture
def device(host):
    if not HAS_CUDA:
        yield host
        return
    d = genesis.device("cuda")
    d.empty_cache()
    d.reset_memory_stats()
    yield d
    d.empty_cache()


def test_example_preallocate_and_small_allocations(device):
    buffer = genesis.empty((1000000,), device=str(device))
    assert buffer.shape == (1000000,) and buffer.device == device
    for i in range(1000):
        x = genesis.tensor([i], device=str(device))
    assert x.tolist() == [999]


def test_example_reuse_buffers_and_inplace(device):
    class Batch:
        def __init__(self, n):
            self.input = genesis.ones(8, 16, device=str(device)) * n

    batch_size, num_features = 8, 4
    weights = genesis.ones(16, num_features, device=str(device))
    result_buffer = genesis.empty((batch_size, num_features), device=str(device))
    ptr = result_buffer.data_ptr()
    for batch in (Batch(n) for n in range(3)):
        genesis.matmul(batch.input, weights, out=result_buffer)
    assert result_buffer.data_ptr() == ptr and result_buffer[0, 0].item() == 2 * 16
    x = genesis.ones(4, device=str(device))
    y = genesis.ones(4, device=str(device))
    x.add_(y)
    x.mul_(0.5)
    assert x.tolist() == [1.0] * 4


def test_example_profile_memory(device):
    n = 4096 if HAS_CUDA else 512  # a 4096 x 4096 matmul is seconds of CPU time
    with genesis.profiler.profile_memory() as prof:
        x = genesis.rand(n, n, device=device)
        y = genesis.matmul(x, x.T)
        del x, y
    assert prof.memory_summary()
    assert prof.peak_memory() >= 2 * n * n * 4


def test_example_realtime_cache_hit_rate(device):
    device.reset_memory_stats()
    for i in range(100):
        x = genesis.rand(1000, 1000, device=device)
        y = x + x
        del x, y
        if i % 10 == 0:
            stats = device.memory_stats()
            assert 0.0 <= stats["cache_hit_rate"] <= 1.0
    assert device.memory_stats()["cache_hit_rate"] > 0.9  # the pool reuses the same two blocks
    assert device.memory_allocated() == 0


def test_example_memory_checkpoints(device):
    genesis.set_memory_debug(True)
    try:
        def memory_checkpoint(name):
            stats = device.memory_stats()
            return f"{name}: {stats['allocated_bytes'] / 1e6:.1f}MB allocated, {stats['cache_hit_rate']:.1%} hit rate"

        start = device.memory_allocated()
        memory_checkpoint("start")
        x = genesis.rand(4096, 4096, device=device)
        assert device.memory_allocated() - start >= 4096 * 4096 * 4
        assert "67.1MB" in memory_checkpoint("after allocation")
        del x
        assert device.memory_allocated() == start
        memory_checkpoint("after delete")
    finally:
        genesis.set_memory_debug(False)


def test_example_oom_protection(device):
    # A 40 GB request fits on a 141 GB H200, so cap what the pool may
    # reserve below it (the CPU never tries 40 GB at all), as a memory
    # fraction would in production.
    if HAS_CUDA:
        device.set_memory_fraction(16 * (1 << 30) / genesis.cuda.get_device_properties(0).total_memory)
    else:
        device.set_memory_fraction(64 * MiB / (1 << 40))
    try:
        huge_tensor = genesis.zeros(100000, 100000, device=device)
        nbytes = huge_tensor.nbytes
        del huge_tensor  # not kept alive by the failure's traceback
        pytest.fail(f"allocated {nbytes} bytes")
    except RuntimeError as e:
        assert isinstance(e, genesis.OutOfMemoryError)
        if HAS_CUDA:
            assert "CUDA OOM" in str(e)
    finally:
        device.set_memory_fraction(1.0)
