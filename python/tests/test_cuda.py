"""genesis.cuda: behaviour without a GPU (clear CudaError,
is_available() False), and on a GPU the statistics moving with real
allocations (skipped here when there is none)."""

import pytest

import genesis
from conftest import HAS_CUDA, MiB, requires_cuda, requires_no_cuda
from genesis import testing

NEEDS_GPU = [
    ("memory_allocated", ()), ("memory_cached", ()), ("memory_reserved", ()),
    ("max_memory_allocated", ()), ("max_memory_cached", ()), ("memory_stats", ()), ("memory_summary", ()),
    ("memory_snapshot", ()), ("reset_peak_memory_stats", ()), ("reset_memory_stats", ()),
    ("set_memory_fraction", (0.5,)), ("set_cache_size", ("2GB",)), ("synchronize", ()),
    ("current_device", ()), ("mem_get_info", ()),
]


def test_is_available_matches_device_count():
    assert genesis.cuda.is_available() == (genesis.cuda.device_count() > 0)
    assert isinstance(genesis.cuda.device_count(), int)


@requires_no_cuda
@pytest.mark.parametrize("name, args", NEEDS_GPU)
def test_without_gpu_functions_raise_cuda_error(name, args):
    with pytest.raises(genesis.CudaError, match="needs a CUDA GPU") as info:
        getattr(genesis.cuda, name)(*args)
    assert isinstance(info.value, RuntimeError)
    assert info.value.code == 100  # cudaErrorNoDevice


@requires_no_cuda
def test_without_gpu_empty_cache_is_a_no_op():
    assert genesis.cuda.empty_cache() is None
    assert not genesis.cuda.is_available()


@requires_no_cuda
def test_without_gpu_bad_arguments_still_fail_as_arguments():
    with pytest.raises(ValueError):
        genesis.cuda.set_memory_fraction(1.5)
    with pytest.raises(ValueError):
        genesis.cuda.set_cache_size("two gigabytes")
    with pytest.raises(TypeError):
        genesis.cuda.set_memory_fraction("0.5")
    with pytest.raises(ValueError):
        genesis.cuda.memory_allocated(device="cpu")
    with pytest.raises(ValueError):
        genesis.cuda.memory_allocated(device=-1)


@requires_cuda
def test_cuda_stats_move_with_allocations(cuda0):
    before = genesis.cuda.memory_allocated(0)
    p = testing.device_allocate("cuda:0", 3 * MiB)
    try:
        assert genesis.cuda.memory_allocated() == before + 3 * MiB
        assert genesis.cuda.memory_reserved() >= 3 * MiB
        assert genesis.cuda.memory_cached() == genesis.cuda.memory_reserved() - genesis.cuda.memory_allocated()
        assert genesis.cuda.max_memory_allocated() >= before + 3 * MiB
        stats = genesis.cuda.memory_stats()
        assert stats["num_allocations"] >= 1
        snap = genesis.cuda.memory_snapshot()
        assert any(b["address"] == p for s in snap for b in s["blocks"] if b["state"] == "allocated")
        assert all(s["device"].startswith("cuda:") for s in snap)
        assert "cuda:0" in genesis.cuda.memory_summary()
    finally:
        testing.device_free("cuda:0", p)
    genesis.cuda.synchronize()
    genesis.cuda.empty_cache()
    assert genesis.cuda.memory_reserved() == 0 or genesis.cuda.memory_allocated() > 0
    assert genesis.cuda.max_memory_cached() >= 0


@requires_cuda
def test_cuda_oom_message_says_cuda_oom(cuda0):
    free, total = genesis.cuda.mem_get_info()
    with pytest.raises(genesis.OutOfMemoryError, match="CUDA OOM") as info:
        testing.device_allocate("cuda:0", total * 2)
    assert isinstance(info.value, RuntimeError)


@requires_cuda
def test_cuda_memory_fraction_caps_the_pool(cuda0):
    free, total = genesis.cuda.mem_get_info()
    genesis.cuda.set_memory_fraction(0.01)
    try:
        with pytest.raises(genesis.OutOfMemoryError, match="memory_fraction"):
            testing.device_allocate("cuda:0", int(total * 0.02))
    finally:
        genesis.cuda.set_memory_fraction(1.0)


@requires_cuda
def test_cuda_cache_size(cuda0):
    genesis.cuda.set_cache_size("2GB")
    assert genesis.cuda.memory_stats()["cache_limit"] == 2 * 10**9
    genesis.cuda.set_cache_size(None)
    assert genesis.cuda.memory_stats()["cache_limit"] == 0


@requires_cuda
def test_device_object_on_gpu(cuda0):
    p = testing.device_allocate(cuda0, 1 * MiB)
    try:
        assert cuda0.memory_allocated() == MiB
        assert cuda0.memory_stats()["allocated_bytes"] == MiB
    finally:
        testing.device_free(cuda0, p)
    cuda0.empty_cache()
    cuda0.reset_memory_stats()
    assert cuda0.max_memory_allocated() == 0


@pytest.mark.skipif(not HAS_CUDA, reason="no CUDA GPU: genesis.cuda.is_available() is False")
def test_default_device_is_the_current_gpu():
    assert genesis.memory_stats().device == f"cuda:{genesis.cuda.current_device()}"
