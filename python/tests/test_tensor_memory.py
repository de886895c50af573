"""Tensors and the allocator: `del x` frees at once (reference
counting, no garbage collector involved), views keep their base alive, and
allocation sites of tensors made from Python are recorded for leak reports
(python/src/py_location.cpp)."""

import gc
import inspect
import os

import pytest

import genesis
from conftest import MiB

THIS_FILE = os.path.basename(__file__)


def test_del_frees_at_once(host):
    gc.disable()  # prove it is reference counting, not the collector
    try:
        base = host.memory_allocated()
        x = genesis.empty(MiB // 4)  # 1 MiB of float32
        assert host.memory_allocated() - base >= MiB
        del x
        assert host.memory_allocated() == base
        y = genesis.zeros(256, 256)
        v = y[10:20].T  # a view keeps the storage
        del y
        assert host.memory_allocated() - base >= 256 * 256 * 4
        del v
        assert host.memory_allocated() == base
    finally:
        gc.enable()


def test_results_and_temporaries_are_released(host):
    base = host.memory_allocated()
    x = genesis.randn(100, 100)
    for _ in range(10):
        y = (x + 1) * 2
        m = x[x > 0]
        s = y.sum(dim=0)
        del y, m, s
    del x
    assert host.memory_allocated() == base


def test_reuse_from_the_cache(host):
    x = genesis.empty(1000)
    p = x.data_ptr()
    del x
    y = genesis.empty(1000)
    assert y.data_ptr() == p  # the pool handed the block back out


def _make_leak():
    return genesis.zeros(2 * MiB // 4)  # TENSOR-SITE


def test_allocation_site_of_a_tensor(host):
    genesis.enable_memory_debugging(True)
    try:
        kept = _make_leak()
        leaks = [leak for leak in genesis.check_memory_leaks() if leak.device == "cpu"]
        lines, start = inspect.getsourcelines(_make_leak)
        line = start + next(i for i, text in enumerate(lines) if "TENSOR-SITE" in text)
        mine = [leak for leak in leaks if leak.size >= 2 * MiB]
        # The site names the innermost frame first, then its callers.
        assert mine and mine[0].frames[0].endswith(f"{THIS_FILE}:{line} in _make_leak")
        assert mine[0].frames[1].endswith("in test_allocation_site_of_a_tensor")
        op = kept + 1  # results of operations are attributed too
        sites = {leak.location for leak in genesis.check_memory_leaks() if leak.device == "cpu"}
        assert any(s.split("\n")[0].endswith("in test_allocation_site_of_a_tensor") for s in sites)
        del kept, op
    finally:
        genesis.enable_memory_debugging(False)


def test_out_of_memory_is_out_of_memory_error(host):
    host.set_memory_fraction(0.0000001)
    try:
        with pytest.raises(genesis.OutOfMemoryError):
            genesis.empty(1 << 30)
        with pytest.raises(genesis.OutOfMemoryError):
            genesis.zeros(1 << 28)
    finally:
        host.set_memory_fraction(1.0)
