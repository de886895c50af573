"""The storage layer and the CUDA runtime calls, written as user code calls
them (storage-only: the tensor examples are in test_tensor_usage_examples.py).
On a machine without a GPU the examples' 'cuda' device becomes the CPU (the GPU
variants run where genesis.cuda.is_available())."""

import multiprocessing
import os
import sys

import pytest

np = pytest.importorskip("numpy", reason="NumPy (python3-numpy) is not installed")

import genesis  # noqa: E402
from conftest import HAS_CUDA, MiB, requires_cuda  # noqa: E402

DEVICE = genesis.device("cuda") if HAS_CUDA else genesis.device("cpu")


# --- Storage interface and create_storage ----------------------------------
def test_example_create_storage_usage(host):
    storage = genesis.create_storage([1, 2, 3], genesis.device("cuda") if HAS_CUDA else genesis.device("cpu"))
    assert storage.shape == (3,) and storage.dtype is genesis.int64 and storage.device == DEVICE
    assert storage.tolist() == [1, 2, 3]
    assert isinstance(storage.data_ptr, int) and storage.data_ptr != 0


def test_example_unsupported_device_type_is_a_clear_error():
    with pytest.raises(ValueError, match="invalid device"):
        genesis.create_storage([1, 2, 3], "tpu")


def test_example_to_copy_clone(host):
    cpu = genesis.create_storage([[1.0, 2.0], [3.0, 4.0]], genesis.device("cpu"))
    assert cpu.to(genesis.device("cpu")) is cpu  # "if device.is_cpu: return self"
    moved = cpu.to(DEVICE)
    other = genesis.Storage((2, 2), genesis.float32, DEVICE)
    other.copy_(moved)
    assert other.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    deep = other.clone()
    assert deep.data_ptr != other.data_ptr and deep.tolist() == other.tolist()
    cpu.copy_(genesis.create_storage([9, 8, 7, 6], DEVICE))  # "从GPU复制": from any device
    assert cpu.tolist() == [[9.0, 8.0], [7.0, 6.0]]


@requires_cuda
def test_example_cuda_storage_to_cpu_and_between_gpus():
    g = genesis.create_storage([1.5, 2.5], "cuda")
    assert g.to(genesis.device("cuda:0")) is g  # same device: itself
    c = g.to(genesis.device("cpu"))
    assert c.device == genesis.device("cpu") and c.numpy().tolist() == [1.5, 2.5]
    if genesis.cuda.device_count() > 1:
        assert g.to("cuda:1").tolist() == [1.5, 2.5]


# --- StorageView -------------------------------------------------------------
def test_example_storage_view(host):
    base_storage = genesis.create_storage(bytes(range(32)))  # uint8: offsets in bytes
    view = genesis.StorageView(base_storage, 8, (2, 4), (4, 1))
    assert view.data_ptr == base_storage.data_ptr + 8  # "self.base.data_ptr + self.offset"
    assert view.is_contiguous()  # "self.stride == expected_stride"
    assert not genesis.StorageView(base_storage, 0, (2, 4), (1, 2)).is_contiguous()
    assert view.numpy().tolist() == [[8, 9, 10, 11], [12, 13, 14, 15]]
    # For wider dtypes offsets count elements, as in PyTorch.
    f = genesis.create_storage(np.zeros(8, dtype=np.float32))
    assert genesis.StorageView(f, 2, (2,), (1,)).data_ptr == f.data_ptr + 2 * 4


# --- SharedStorage and MappedStorage ------------------------------------------
def _read_shared(name, queue):
    shared = genesis.SharedStorage((4,), genesis.float32, shared_memory_name=name)  # "连接到共享内存"
    queue.put(shared.tolist())
    shared.close()


def test_example_shared_storage_between_processes():
    owner = genesis.SharedStorage((4,), genesis.float32)  # "创建"
    np.asarray(owner)[:] = [1, 2, 3, 4]
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    try:
        p = ctx.Process(target=_read_shared, args=(owner.name, queue))
        p.start()
        assert queue.get(timeout=120) == [1.0, 2.0, 3.0, 4.0]
        p.join(120)
        assert p.exitcode == 0
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old
    owner.close()
    assert owner.unlink() is True


def test_example_mapped_storage(tmp_path):
    filename = tmp_path / "dataset.bin"
    storage = genesis.MappedStorage(filename, (3, 4), genesis.float32, mode="w+")
    np.asarray(storage)[:] = 1.25
    storage.flush()  # "将更改刷新到磁盘"
    storage.close()
    reread = genesis.MappedStorage(filename, (3, 4), genesis.float32, mode="r")
    assert reread.numpy().sum() == 15.0
    reread.flush()  # mode 'r': nothing to write
    reread.close()


# --- reference counting and pooled storage -------------------------------------
def test_example_refcounted_and_pooled_storage(host):
    storage = genesis.Storage((MiB,), genesis.uint8)
    assert storage.use_count == 1  # "self.ref_count = 1"
    view = genesis.StorageView(storage)
    assert storage.use_count == 2  # incref
    del view
    assert storage.use_count == 1  # decref
    assert host.memory_allocated() == MiB
    del storage  # "ref_count == 0: _deallocate" / PooledStorage.__del__: back to the pool
    assert host.memory_allocated() == 0 and host.memory_reserved() >= MiB


# --- storage operations -------------------------------------------------------
def test_example_convert_dtype(host):
    storage = genesis.create_storage([1.5, 2.5, -3.5], DEVICE)
    converted = genesis.convert_dtype(storage, genesis.float16)
    assert converted.dtype is genesis.float16 and converted.device == storage.device
    assert converted.tolist() == [1.5, 2.5, -3.5]
    assert genesis.convert_dtype(storage, genesis.int32).tolist() == [1, 2, -3]


def test_example_copy_storage_every_direction(host):
    devices = [genesis.device("cpu")] + ([genesis.device("cuda")] if HAS_CUDA else [])
    for src_device in devices:
        for dst_device in devices:
            src = genesis.create_storage([1, 2, 3, 4], src_device, dtype=genesis.float32)
            dst = genesis.Storage((4,), genesis.float32, dst_device)
            genesis.copy_storage(src, dst)
            assert dst.tolist() == [1.0, 2.0, 3.0, 4.0], (src_device, dst_device)


def test_example_aligned_storage(host):
    storage = genesis.aligned_storage((100,), genesis.float32, DEVICE, alignment=64)
    assert storage.data_ptr % 64 == 0 and storage.shape == (100,)
    assert genesis.aligned_storage((10,), genesis.float64, genesis.device("cpu"), 4096).data_ptr % 4096 == 0


def test_example_batch_storage(host):
    storages = [genesis.create_storage(np.full(1000, i, dtype=np.float32), DEVICE) for i in range(4)]
    targets = [genesis.Storage((1000,), genesis.float32, DEVICE) for _ in range(4)]
    genesis.BatchStorage(storages).batch_copy(targets)
    assert [t.tolist()[0] for t in targets] == [0.0, 1.0, 2.0, 3.0]


# --- inspection and leak tracking ------------------------------------------------
def test_example_inspect_storage(host, capsys):
    storage = genesis.create_storage([1, 2, 3], DEVICE)
    info = genesis.inspect_storage(storage)
    print(info)
    out = capsys.readouterr().out
    assert "int64" in out and hex(storage.data_ptr) in out
    assert info["shape"] == (3,) and info["dtype"] is genesis.int64 and info["device"] == DEVICE
    assert info["size_bytes"] == 24 and info["is_contiguous"] is True
    assert info["data_ptr"] == hex(storage.data_ptr)
    if HAS_CUDA:
        assert info["memory_pool"]["pool"].startswith("cuda")


def test_example_storage_tracker(host):
    tracker = genesis.StorageTracker()
    kept = genesis.create_storage([1.0] * 256)
    dropped = genesis.create_storage([2.0] * 256)
    tracker.register(kept, "kept")
    tracker.register(dropped, "dropped")
    assert tracker.total_allocated() == 2048
    del dropped
    leaks = tracker.check_leaks()
    assert [(leak.label, leak.size) for leak in leaks] == [("kept", 1024)]
    tracker.unregister(kept)
    assert tracker.total_allocated() == 0


# --- CUDA runtime -----------------------------------------------------
def test_example_diagnose_cuda_errors(capsys):
    # The except branch of a diagnose_cuda_errors() helper, without the tensors.
    if genesis.cuda.is_available():
        print(f"CUDA设备: {genesis.cuda.get_device_name()}")
        print(f"CUDA能力: {genesis.cuda.get_device_capability()}")
        print(f"可用内存: {genesis.cuda.get_device_properties().total_memory / 1024**3:.1f} GB")
        out = capsys.readouterr().out
        assert genesis.cuda.get_device_name() in out and " GB" in out
    else:
        print("CUDA不可用")
        assert capsys.readouterr().out == "CUDA不可用\n"


@requires_cuda
def test_example_async_stream_block(cuda0):
    with genesis.cuda.stream():
        x = genesis.create_storage(np.ones((1000, 1000), dtype=np.float32), device="cuda")
        y = x.clone()
        genesis.cuda.synchronize()
    assert y.tolist()[0][:3] == [1.0, 1.0, 1.0]


@requires_cuda
def test_example_good_memory_practice(cuda0):
    before = genesis.cuda.memory_allocated()
    with genesis.cuda.device(0):
        x = genesis.Storage((1000, 1000), genesis.float32, "cuda")
        assert genesis.cuda.memory_allocated() - before >= 4_000_000
        del x
        genesis.cuda.empty_cache()
    assert genesis.cuda.memory_allocated() == before


@requires_cuda
def test_example_memory_snapshot_entries(cuda0):
    x = genesis.Storage((1 << 20,), genesis.float32, "cuda")
    snapshot = genesis.cuda.memory_snapshot()
    assert any(entry["address"] <= x.data_ptr < entry["address"] + entry["size"] for entry in snapshot)
