"""inspect_storage and StorageTracker, and the Python allocation
sites recorded for storages while memory debugging is on."""

import os
import sys

import pytest

import genesis
from conftest import MiB, requires_cuda

THIS_FILE = os.path.basename(__file__)


def test_inspect_storage_fields_and_text(host):
    s = genesis.create_storage([[1, 2, 3], [4, 5, 6]], dtype=genesis.int16)
    info = genesis.inspect_storage(s)
    assert isinstance(info, genesis.StorageInfo)
    assert info.shape == (2, 3) and info.stride == (3, 1)
    assert info.dtype is genesis.int16 and info.device == genesis.device("cpu")
    assert info.nbytes == 12 and info.size_bytes() == 12 and info.contiguous and info.is_contiguous()
    assert info.data_ptr == s.data_ptr and info.use_count >= 1
    assert info.pooled and not info.pinned and info.pool == "host" and info.block_size == 512
    assert info.pool_allocated >= 512 and info.pool_reserved >= info.pool_allocated
    # The dict view.
    assert info["size_bytes"] == 12 and info["is_contiguous"] is True
    assert info["data_ptr"] == hex(s.data_ptr) and info["shape"] == (2, 3)
    assert info["memory_pool"]["pool"] == "host"
    assert set(info.keys()) >= {"shape", "dtype", "device", "size_bytes", "is_contiguous", "data_ptr"}
    text = str(info)
    assert "int16" in text and "contiguous:  yes" in text and hex(s.data_ptr) in text


def test_inspect_view_and_unpooled_storages(host, tmp_path):
    base = genesis.create_storage(list(range(10)))
    v = genesis.StorageView(base, 1, (3,), (3,))
    info = genesis.inspect_storage(v)
    assert info.shape == (3,) and info.stride == (3,) and not info.contiguous
    assert info.data_ptr == v.data_ptr and info.nbytes == 24
    shm = genesis.SharedStorage((4,), genesis.float32)
    sinfo = genesis.inspect_storage(shm)
    assert not sinfo.pooled and sinfo.block_size == 0 and "memory_pool" not in sinfo.to_dict()
    empty = genesis.inspect_storage(genesis.Storage((0,)))
    assert empty["data_ptr"] is None
    with pytest.raises(TypeError):
        genesis.inspect_storage([1, 2])


def test_tracker_reports_live_storages_only(host):
    tracker = genesis.StorageTracker()
    a = genesis.Storage((MiB,), genesis.uint8)
    b = genesis.Storage((1000,), genesis.float32)
    tracker.register(a, label="a")
    tracker.register(b, label="b")
    assert len(tracker) == 2
    assert tracker.total_allocated() == MiB + 4096  # block sizes (4000 rounds up to 4096)
    leaks = tracker.check_leaks()
    assert [leak.label for leak in leaks] == ["a", "b"]  # largest first
    assert leaks[0].size == MiB and leaks[0].device == genesis.device("cpu") and leaks[0].data_ptr == a.data_ptr
    assert leaks[1].nbytes == 4000 and leaks[1].size == 4096
    assert "a: 1.00 MiB on cpu" in str(leaks[0])
    del a  # freed: drops out, no unregister needed (weak references)
    assert [leak.label for leak in tracker.check_leaks()] == ["b"]
    assert tracker.total_allocated() == 4096
    with pytest.raises(ValueError):
        tracker.register(b)  # twice
    assert tracker.unregister(b) is True
    assert tracker.unregister(b) is False
    assert tracker.check_leaks() == [] and tracker.total_allocated() == 0
    tracker.register(b, "again")
    tracker.clear()
    assert len(tracker) == 0
    with pytest.raises(TypeError):
        tracker.register(b, label=3)
    with pytest.raises(TypeError):
        tracker.register("not a storage")


def test_tracker_never_keeps_memory_alive(host):
    tracker = genesis.StorageTracker()
    s = genesis.Storage((MiB,), genesis.uint8)
    tracker.register(s, "x")
    before = host.memory_allocated()
    del s
    assert host.memory_allocated() == before - MiB


def test_allocation_sites_name_the_python_line(host):
    genesis.enable_memory_debugging(True)
    try:
        s = genesis.create_storage(list(range(100))); line = sys._getframe().f_lineno  # noqa: E702
        t = genesis.Storage((10,), genesis.float32); t_line = sys._getframe().f_lineno  # noqa: E702
        c = s.clone(); c_line = sys._getframe().f_lineno  # noqa: E702
        tracker = genesis.StorageTracker()
        tracker.register(s, "s")
        tracker.register(t, "t")
        tracker.register(c, "c")
        where = {leak.label: leak.location for leak in tracker.check_leaks()}
        assert where["s"].startswith(f"{__file__}:{line} in test_allocation_sites_name_the_python_line"), where
        assert f"{THIS_FILE}:{t_line} " in where["t"]
        assert f"{THIS_FILE}:{c_line} " in where["c"]
        assert THIS_FILE in genesis.inspect_storage(s).location
        leaks = genesis.check_memory_leaks()
        assert any(f"{THIS_FILE}:{line} " in leak.location for leak in leaks)
    finally:
        genesis.enable_memory_debugging(False)


@requires_cuda
def test_inspect_gpu_storage_pool(cuda0):
    g = genesis.create_storage([1.0] * 1000, device="cuda")
    info = genesis.inspect_storage(g)
    assert info.device == genesis.device("cuda:0") and info.pooled and info.pool.startswith("cuda")
    assert info["memory_pool"]["block_size"] == 4096
    tracker = genesis.StorageTracker()
    tracker.register(g, "gpu")
    assert tracker.check_leaks()[0].device == genesis.device("cuda:0")
