"""convert_dtype, copy_storage, aligned_storage and BatchStorage."""

import pytest

np = pytest.importorskip("numpy", reason="NumPy (python3-numpy) is not installed")

import genesis  # noqa: E402
from conftest import MiB, requires_cuda  # noqa: E402


def test_convert_dtype_follows_cast_semantics(host):
    s = genesis.create_storage([1.9, -1.9, 300.0, float("nan")], dtype="float64")
    i = genesis.convert_dtype(s, genesis.int32)
    assert i.dtype is genesis.int32 and i.shape == (4,)
    assert i.tolist() == [1, -1, 300, -2**31]  # NaN -> INT32_MIN (Note [Cast semantics])
    assert genesis.convert_dtype(genesis.create_storage([300, -1], dtype="int32"), "uint8").tolist() == [44, 255]
    assert genesis.convert_dtype(s, genesis.bool).tolist() == [True, True, True, True]
    h = genesis.convert_dtype(genesis.create_storage([1 / 3]), genesis.float16)
    assert h.tolist() == [float(np.float16(np.float32(1 / 3)))]
    same = genesis.convert_dtype(s, genesis.float64)
    assert same is not s and same.data_ptr != s.data_ptr and same.tolist()[:3] == [1.9, -1.9, 300.0]
    with pytest.raises(ValueError):
        genesis.convert_dtype(s, "complex128")
    with pytest.raises(TypeError):
        genesis.convert_dtype([1, 2], genesis.float32)


def test_copy_storage_every_dtype_pair(host):
    values = [0, 1, 2, 100]
    for src_dt in genesis.all_dtypes:
        src = genesis.create_storage(values, dtype=src_dt)
        for dst_dt in genesis.all_dtypes:
            dst = genesis.Storage((4,), dst_dt)
            genesis.copy_storage(src, dst)
            ref = np.array(values).astype(np.float64)
            if src_dt is genesis.bool or dst_dt is genesis.bool:
                ref = (ref != 0).astype(np.float64)
            elif src_dt is genesis.int8 or dst_dt is genesis.int8:
                ref = ref.astype(np.int8).astype(np.float64)
            assert [float(x) for x in dst.tolist()] == ref.tolist(), (src_dt, dst_dt)


def test_copy_storage_errors(host):
    with pytest.raises(ValueError, match="element counts"):
        genesis.copy_storage(genesis.Storage((3,)), genesis.Storage((4,)))
    with pytest.raises(TypeError):
        genesis.copy_storage(genesis.Storage((3,)), np.zeros(3))


@pytest.mark.parametrize("alignment", [1, 64, 512, 4096, 1 << 16])
def test_aligned_storage(host, alignment):
    s = genesis.aligned_storage((1000,), genesis.float32, alignment=alignment)
    assert s.data_ptr % alignment == 0
    assert s.shape == (1000,) and s.nbytes == 4000 and s.device == genesis.device("cpu")
    s.numpy()[:] = 1.0  # the whole range is usable
    assert float(s.numpy().sum()) == 1000.0


@pytest.mark.parametrize("alignment", [0, 3, 48, 1000])
def test_aligned_storage_needs_a_power_of_two(alignment):
    with pytest.raises(ValueError, match="power of two"):
        genesis.aligned_storage((4,), genesis.float32, "cpu", alignment)


def test_batch_copy_on_the_cpu(host):
    srcs = [genesis.create_storage(np.arange(n, dtype=np.float32)) for n in (1, 1000, 70000)]
    dsts = [genesis.Storage(s.shape, s.dtype) for s in srcs]
    batch = genesis.BatchStorage(srcs)
    assert len(batch) == 3 and batch.storages == srcs and batch.storages[0] is srcs[0]
    assert batch.batch_copy(dsts) is None
    for s, d in zip(srcs, dsts):
        np.testing.assert_array_equal(s.numpy(), d.numpy())
    copies = batch.to("cpu")
    assert all(type(c) is genesis.Storage for c in copies)
    assert [c.tolist() for c in copies] == [s.tolist() for s in srcs]
    assert all(c.data_ptr != s.data_ptr for c, s in zip(copies, srcs))


def test_batch_copy_checks_before_copying(host):
    a, b = genesis.create_storage([1.0, 2.0]), genesis.create_storage([3.0])
    batch = genesis.BatchStorage([a, b])
    with pytest.raises(ValueError):
        batch.batch_copy([genesis.Storage((2,))])  # count mismatch
    t0, t1 = genesis.Storage.zeros((2,)), genesis.Storage.zeros((2,))
    with pytest.raises(ValueError):
        batch.batch_copy([t0, t1])  # size mismatch for the second pair
    assert t0.tolist() == [0.0, 0.0]  # nothing copied
    with pytest.raises(TypeError):
        genesis.BatchStorage([a, "b"])
    with pytest.raises(TypeError):
        genesis.BatchStorage(a)
    with pytest.raises(ValueError):
        genesis.BatchStorage([a], streams=0)


@requires_cuda
def test_batch_copy_between_host_and_gpu(cuda0):
    host_srcs = [genesis.create_storage(np.full(n, i, dtype=np.float32)) for i, n in enumerate((10, MiB, 3 * MiB))]
    gpu = genesis.BatchStorage(host_srcs).to("cuda")
    assert all(g.device == genesis.device("cuda:0") for g in gpu)
    back = [genesis.Storage(g.shape, g.dtype) for g in gpu]
    genesis.BatchStorage(gpu).batch_copy(back)
    for s, b in zip(host_srcs, back):
        np.testing.assert_array_equal(s.numpy(), b.numpy())


@requires_cuda
def test_gpu_convert_and_aligned(cuda0):
    g = genesis.create_storage([1.5, -2.5, 70000.0], device="cuda")
    assert genesis.convert_dtype(g, genesis.float16).tolist() == [1.5, -2.5, float("inf")]
    assert genesis.convert_dtype(g, genesis.int8).tolist() == [1, -2, 112]
    a = genesis.aligned_storage((100,), genesis.float32, "cuda", alignment=4096)
    assert a.data_ptr % 4096 == 0 and a.device == genesis.device("cuda:0")
    genesis.copy_storage(genesis.create_storage(list(range(100))), a)
    assert a.tolist() == [float(i) for i in range(100)]
