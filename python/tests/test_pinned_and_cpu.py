"""Pinned host memory and genesis.cpu."""

import numpy as np
import pytest

import genesis
from conftest import requires_cuda, requires_no_cuda


def test_is_pinned_false_for_ordinary_memory():
    arr = np.zeros(1024, dtype=np.uint8)
    assert genesis.is_pinned(arr) is False
    assert genesis.is_pinned(arr.__array_interface__["data"][0]) is False
    assert genesis.is_pinned(0) is False


def test_is_pinned_rejects_bad_input():
    with pytest.raises(TypeError):
        genesis.is_pinned("0x1000")
    with pytest.raises(ValueError):
        genesis.is_pinned(-1)


def test_pinned_memory_switch_off_always_works():
    genesis.cpu.enable_pinned_memory(False)
    assert genesis.cpu.pinned_memory_enabled() is False
    with pytest.raises(TypeError):
        genesis.cpu.enable_pinned_memory("yes")


@requires_no_cuda
def test_without_gpu_pinned_memory_is_a_cuda_error():
    with pytest.raises(genesis.CudaError, match="needs a CUDA GPU"):
        genesis.cpu.enable_pinned_memory(True)
    assert genesis.cpu.pinned_memory_enabled() is False
    with pytest.raises(genesis.CudaError):
        genesis.allocate_pinned(4096)
    with pytest.raises(ValueError):
        genesis.allocate_pinned(0)


@requires_cuda
def test_pinned_buffer_roundtrip():
    buf = genesis.allocate_pinned("1MB")
    assert len(buf) == 10**6 and buf.nbytes == 10**6
    assert genesis.is_pinned(buf) and genesis.is_pinned(buf.data_ptr())
    view = np.frombuffer(buf, dtype=np.uint8)
    view[:4] = [1, 2, 3, 4]
    assert bytes(memoryview(buf)[:4]) == b"\x01\x02\x03\x04"
    address = buf.data_ptr()
    del buf  # the numpy view keeps the block alive
    assert view[3] == 4 and genesis.is_pinned(address)


@requires_cuda
def test_enable_pinned_memory_on_gpu():
    genesis.cpu.enable_pinned_memory(True)
    try:
        assert genesis.cpu.pinned_memory_enabled()
    finally:
        genesis.cpu.enable_pinned_memory(False)


def test_cpu_module_stats(host):
    p = genesis.testing.host_allocate(2048)
    try:
        assert genesis.cpu.memory_allocated() == 2048
        assert genesis.cpu.memory_stats().allocated_bytes == 2048
    finally:
        genesis.testing.host_free(p)
    genesis.cpu.empty_cache()
    assert genesis.cpu.memory_stats().reserved_bytes == 0
