"""genesis.Storage and create_storage: construction from
Python data, NumPy interop without copies, moving and copying, and reference
counting (``del s`` gives the block back at once). GPU variants skip without
a GPU."""

import array
import gc

import pytest

np = pytest.importorskip("numpy", reason="NumPy (python3-numpy) is not installed")

import genesis  # noqa: E402
from conftest import HAS_CUDA, MiB, requires_cuda, requires_no_cuda  # noqa: E402

NUMPY_DTYPES = [
    (np.bool_, genesis.bool), (np.uint8, genesis.uint8), (np.int8, genesis.int8), (np.int16, genesis.int16),
    (np.int32, genesis.int32), (np.int64, genesis.int64), (np.float16, genesis.float16),
    (np.float32, genesis.float32), (np.float64, genesis.float64),
]


# --- construction -------------------------------------------------------------
@pytest.mark.parametrize("dt", genesis.all_dtypes, ids=str)
def test_empty_storage_describes_itself(host, dt):
    s = genesis.Storage((3, 5), dt)
    assert s.shape == (3, 5)
    assert s.dtype is dt
    assert s.device == genesis.device("cpu")
    assert s.nbytes == 15 * dt.itemsize == s.size_bytes()
    assert s.itemsize == dt.itemsize
    assert len(s) == 15 == s.numel()
    assert s.data_ptr != 0 and s.data_ptr % 512 == 0  # a pool block
    assert s.is_contiguous() and not s.is_pinned() and s.is_pooled()
    assert s.use_count == 1
    assert repr(s) == f"genesis.Storage(shape=(3, 5), dtype={dt!r}, device='cpu', nbytes={15 * dt.itemsize})"


def test_default_dtype_and_int_shape(host):
    s = genesis.Storage(4)
    assert s.shape == (4,) and s.dtype is genesis.float32
    z = genesis.Storage.zeros((2, 2), "int32")
    assert z.tolist() == [[0, 0], [0, 0]]
    e = genesis.Storage((0, 7), genesis.int64)
    assert e.nbytes == 0 and e.data_ptr == 0 and len(e) == 0 and e.tolist() == []


def test_constructor_errors(host):
    with pytest.raises(ValueError, match="negative"):
        genesis.Storage((2, -1))
    with pytest.raises(ValueError, match="overflows"):
        genesis.Storage((2**62,), genesis.float32)
    with pytest.raises(genesis.OutOfMemoryError):
        genesis.Storage((2**50,), genesis.uint8)
    with pytest.raises(TypeError):
        genesis.Storage("3")
    with pytest.raises(TypeError):
        genesis.Storage((2.5,))
    with pytest.raises(TypeError):
        genesis.Storage((True,))
    with pytest.raises(OverflowError):
        genesis.Storage((2**70,))
    with pytest.raises(ValueError):
        genesis.Storage((2,), "complex64")
    with pytest.raises(ValueError, match="invalid device"):
        genesis.Storage((2,), genesis.float32, device="tpu")
    assert genesis.device("cpu").memory_allocated() == 0


@requires_no_cuda
def test_cuda_storage_without_gpu_is_a_cuda_error():
    for device in ("cuda", "cuda:0", 0, "cuda:3"):
        with pytest.raises(genesis.CudaError, match="needs CUDA") as info:
            genesis.create_storage([1, 2], device=device)
        assert info.value.code == 100
    with pytest.raises(genesis.CudaError):
        genesis.Storage((2,), genesis.float32, "cuda")
    with pytest.raises(genesis.CudaError):
        genesis.create_storage([1.0]).to("cuda")
    with pytest.raises(genesis.CudaError):
        genesis.create_storage([1.0]).cuda()
    with pytest.raises(ValueError, match="pinned host memory needs a CUDA GPU"):
        genesis.Storage((2,), pinned=True)


# --- create_storage from lists -----------------------------------------------
@pytest.mark.parametrize("data, shape, dtype", [
    ([1, 2, 3], (3,), genesis.int64),
    ([1.0, 2, 3], (3,), genesis.float32),
    ([True, False], (2,), genesis.bool),
    ([True, 2], (2,), genesis.int64),
    ([[1, 2], [3, 4], [5, 6]], (3, 2), genesis.int64),
    (((1.5,), (2.5,)), (2, 1), genesis.float32),
    ([[[1]], [[2]]], (2, 1, 1), genesis.int64),
    ([], (0,), genesis.float32),
    ([[], []], (2, 0), genesis.float32),
    (7, (), genesis.int64),
    (2.5, (), genesis.float32),
    (True, (), genesis.bool),
])
def test_create_storage_infers_shape_and_dtype(host, data, shape, dtype):
    s = genesis.create_storage(data)
    assert s.shape == shape
    assert s.dtype is dtype
    expected = np.array(data, dtype=np.float32 if dtype is genesis.float32 else None)
    assert s.tolist() == expected.tolist()


def test_create_storage_with_dtype_converts(host):
    assert genesis.create_storage([1.7, -1.7, 300.0], dtype="int32").tolist() == [1, -1, 300]
    # An integer dtype takes only the values it holds, as genesis.tensor
    # (and NumPy 2) do: no silent wrap-around.
    for data, dtype in (([300], genesis.uint8), ([-1], genesis.uint8), ([2**40], genesis.int32),
                        ([float("nan")], genesis.int32), ([1e10], genesis.int16)):
        with pytest.raises(ValueError, match="cannot be converted to"):
            genesis.create_storage(data, dtype=dtype)
    assert genesis.create_storage([255, 0], dtype=genesis.uint8).tolist() == [255, 0]
    assert genesis.create_storage([0.1], dtype="float64").tolist() == [0.1]
    assert genesis.create_storage([0.1]).tolist() == [float(np.float32(0.1))]
    assert genesis.create_storage([0, 2, -0.0], dtype=genesis.bool).tolist() == [False, True, False]
    assert genesis.create_storage([1, 2], dtype=np.float16).dtype is genesis.float16
    assert genesis.create_storage([2**40], dtype=genesis.float64).tolist() == [2.0**40]
    assert genesis.create_storage([2**70], dtype=genesis.float64).tolist() == [2.0**70]
    # NumPy scalars are numbers too.
    s = genesis.create_storage([np.float32(1.5), np.int64(2), np.bool_(True)])
    assert s.dtype is genesis.float32 and s.tolist() == [1.5, 2.0, 1.0]


@pytest.mark.parametrize("data, error, match", [
    ([[1, 2], [3]], ValueError, "ragged"),
    ([1, [2]], ValueError, "ragged"),
    ([[1], 2], ValueError, "ragged"),
    ([[1], []], ValueError, "ragged"),
    (["a"], TypeError, "str"),
    ([1 + 2j], TypeError, "complex"),
    ([None], TypeError, "NoneType"),
    ("abc", TypeError, "str"),
    (object(), TypeError, "got object"),
    ({1: 2}, TypeError, "dict"),
    ([2**70], OverflowError, "int64"),
])
def test_create_storage_rejects_bad_data(host, data, error, match):
    with pytest.raises(error, match=match):
        genesis.create_storage(data)
    assert genesis.device("cpu").memory_allocated() == 0


def test_create_storage_deep_nesting_is_an_error_not_a_crash():
    data = [1]
    for _ in range(100_000):
        data = [data]
    with pytest.raises((RecursionError, ValueError)):
        genesis.create_storage(data)


# --- create_storage from buffers ---------------------------------------------
@pytest.mark.parametrize("np_dtype, dtype", NUMPY_DTYPES, ids=lambda x: getattr(x, "__name__", str(x)))
def test_create_storage_from_numpy_keeps_dtype_and_values(host, np_dtype, dtype):
    a = (np.arange(24).reshape(2, 3, 4) % 7).astype(np_dtype)
    s = genesis.create_storage(a)
    assert s.dtype is dtype and s.shape == (2, 3, 4)
    np.testing.assert_array_equal(s.numpy(), a)
    assert s.data_ptr != a.ctypes.data  # a copy: the storage owns its memory


@pytest.mark.parametrize("np_dtype", [np.uint16, np.uint32, np.uint64])
def test_unsigned_numpy_dtypes_widen_to_int64(host, np_dtype):
    a = np.array([0, 1, np.iinfo(np_dtype).max if np_dtype is not np.uint64 else 2**63 - 1], dtype=np_dtype)
    s = genesis.create_storage(a)
    assert s.dtype is genesis.int64
    assert s.tolist() == [int(x) for x in a]
    if np_dtype is np.uint64:
        with pytest.raises(ValueError, match="int64"):
            genesis.create_storage(np.array([2**64 - 1], dtype=np.uint64))


def test_create_storage_from_non_contiguous_and_byte_swapped_arrays(host):
    base = np.arange(60, dtype=np.float64).reshape(6, 10)
    for a in (base[::2, 1::3], base.T, base[::-1, ::-2], np.asfortranarray(base),
              base.astype(">f8"), base.astype(">i2")[:, ::4], np.broadcast_to(np.arange(3), (4, 3))):
        s = genesis.create_storage(a)
        assert s.shape == a.shape
        np.testing.assert_array_equal(s.numpy(), a)
        assert s.numpy().flags.c_contiguous


def test_create_storage_from_zero_d_and_empty_arrays(host):
    s = genesis.create_storage(np.array(3.5))
    assert s.shape == () and s.tolist() == 3.5
    e = genesis.create_storage(np.zeros((3, 0), dtype=np.int16))
    assert e.shape == (3, 0) and e.dtype is genesis.int16


def test_create_storage_from_bytes_and_other_buffers(host):
    assert genesis.create_storage(b"\x01\x02\xff").tolist() == [1, 2, 255]
    assert genesis.create_storage(bytearray(b"ab")).dtype is genesis.uint8
    assert genesis.create_storage(memoryview(b"abcd")[::2]).tolist() == [97, 99]
    assert genesis.create_storage(array.array("i", [5, -6])).tolist() == [5, -6]
    assert genesis.create_storage(array.array("d", [0.5])).dtype is genesis.float64
    with pytest.raises(TypeError, match="format"):
        genesis.create_storage(np.zeros(2, dtype=np.complex64))
    with pytest.raises(TypeError, match="format"):
        genesis.create_storage(np.zeros(2, dtype=np.longdouble))


def test_create_storage_from_objects_with_array_protocol(host):
    class ArrayLike:
        def __array__(self, dtype=None, copy=None):
            return np.array([[1, 2], [3, 4]], dtype=np.int32)

    s = genesis.create_storage(ArrayLike())
    assert s.shape == (2, 2) and s.dtype is genesis.int32 and s.tolist() == [[1, 2], [3, 4]]


def test_create_storage_from_a_storage_copies_and_converts(host):
    a = genesis.create_storage([1, 2, 3])
    b = genesis.create_storage(a, dtype="float64")
    assert b.tolist() == [1.0, 2.0, 3.0] and b.data_ptr != a.data_ptr


# --- NumPy interop -----------------------------------------------------------
def test_numpy_shares_memory_both_ways(host):
    s = genesis.create_storage([[1.0, 2.0], [3.0, 4.0]])
    a = s.numpy()
    assert a.ctypes.data == s.data_ptr and a.shape == (2, 2) and a.dtype == np.float32
    a[0, 0] = 10.0
    assert s.tolist()[0][0] == 10.0
    b = np.asarray(s)
    assert b.ctypes.data == s.data_ptr
    m = memoryview(s)
    assert m.format == "f" and m.shape == (2, 2) and not m.readonly
    m.release()
    assert np.array(s, dtype=np.float64).dtype == np.float64  # __array__ with a dtype copies


@pytest.mark.parametrize("np_dtype, dtype", NUMPY_DTYPES, ids=lambda x: getattr(x, "__name__", str(x)))
def test_numpy_export_of_every_dtype(host, np_dtype, dtype):
    s = genesis.create_storage([1, 0, 1], dtype=dtype)
    a = s.numpy()
    assert a.dtype == np.dtype(np_dtype)
    assert a.tolist() == s.tolist()


def test_numpy_array_keeps_the_storage_alive(host):
    s = genesis.Storage((MiB // 4,), genesis.float32)
    a = s.numpy()
    a[:] = 7.0
    assert s.use_count == 2  # the object and the export
    del s
    gc.collect()
    assert host.memory_allocated() == MiB  # still held by the array
    assert float(a.sum()) == 7.0 * (MiB // 4)
    del a
    assert host.memory_allocated() == 0


def test_bfloat16_has_no_numpy_but_tolist_works(host):
    s = genesis.create_storage([1.0, 2.5, -3.0], dtype=genesis.bfloat16)
    assert s.tolist() == [1.0, 2.5, -3.0]
    with pytest.raises(TypeError, match="bfloat16"):
        s.numpy()
    with pytest.raises(TypeError, match="bfloat16"):
        np.asarray(s)
    with pytest.raises(BufferError, match="bfloat16"):
        memoryview(s)
    np.testing.assert_array_equal(genesis.convert_dtype(s, genesis.float32).numpy(), [1.0, 2.5, -3.0])


# --- reference counting ------------------------------------------------------
def test_del_releases_the_block_at_once(host):
    s = genesis.Storage((MiB,), genesis.uint8)
    assert host.memory_allocated() == MiB
    t = s  # another Python reference to the same object, not a new strong ref
    assert s.use_count == 1
    del s
    assert host.memory_allocated() == MiB
    del t
    assert host.memory_allocated() == 0  # no gc.collect(): refcounting frees it


def test_pooled_storage_returns_its_block_to_the_pool(host):
    s = genesis.Storage((MiB,), genesis.uint8)
    p = s.data_ptr
    del s
    assert host.memory_reserved() > 0  # cached, not returned to the system
    again = genesis.Storage((MiB,), genesis.uint8)
    assert again.data_ptr == p  # the same block, from the cache
    assert host.memory_stats()["num_cache_hits"] >= 1


# --- moving and copying -------------------------------------------------------
def test_to_same_device_is_the_same_object_and_clone_is_a_copy(host):
    s = genesis.create_storage([1, 2, 3])
    assert s.to("cpu") is s and s.cpu() is s and s.to(genesis.device("cpu")) is s
    c = s.clone()
    assert c is not s and c.data_ptr != s.data_ptr and c.tolist() == s.tolist()
    c.numpy()[0] = 99
    assert s.tolist() == [1, 2, 3]


def test_copy_converts_and_checks_sizes(host):
    dst = genesis.Storage((2, 2), genesis.float64)
    src = genesis.create_storage([1, 2, 3, 4], dtype="int16")
    assert dst.copy_(src) is dst
    assert dst.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert dst.copy_(src, non_blocking=True).tolist() == [[1.0, 2.0], [3.0, 4.0]]
    with pytest.raises(ValueError, match="element counts differ"):
        dst.copy_(genesis.create_storage([1, 2, 3]))
    with pytest.raises(TypeError, match="genesis.Storage"):
        dst.copy_([1, 2, 3, 4])


@requires_cuda
def test_gpu_round_trip_and_numpy_error(cuda0):
    before = cuda0.memory_allocated()
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    g = genesis.create_storage(a, device="cuda")
    assert g.device == genesis.device("cuda:0") and g.shape == (3, 4)
    assert cuda0.memory_allocated() == before + 512
    with pytest.raises(TypeError, match=r"\.cpu\(\)"):
        g.numpy()
    with pytest.raises(TypeError, match=r"\.cpu\(\)"):
        np.asarray(g)
    assert g.tolist() == a.tolist()
    np.testing.assert_array_equal(g.cpu().numpy(), a)
    h = g.to("cpu")
    np.testing.assert_array_equal(h.numpy(), a)
    g2 = g.clone()
    assert g2.device == g.device and g2.data_ptr != g.data_ptr
    back = genesis.Storage((3, 4), genesis.float64, "cuda")
    back.copy_(h)
    assert back.tolist() == a.tolist()
    del g, g2, back
    assert cuda0.memory_allocated() == before


@requires_cuda
def test_gpu_dtypes_round_trip(cuda0):
    for dt in genesis.all_dtypes:
        s = genesis.create_storage([0, 1, 2, 3], dtype=dt, device="cuda")
        expected = [bool(x) for x in range(4)] if dt is genesis.bool else list(range(4))
        assert s.tolist() == expected, dt
        assert genesis.convert_dtype(s, genesis.float32).tolist() == [float(x) for x in expected]


@pytest.mark.skipif(not HAS_CUDA or genesis.cuda.device_count() < 2, reason="needs two CUDA GPUs")
def test_gpu_to_gpu_copy():
    a = genesis.create_storage(list(range(1000)), device="cuda:0")
    b = a.to("cuda:1")
    assert b.device == genesis.device("cuda:1") and b.tolist() == list(range(1000))


@requires_cuda
def test_pinned_storage(cuda0):
    p = genesis.Storage((1024,), genesis.float32, pinned=True)
    assert p.is_pinned() and p.device == genesis.device("cpu")
    p.numpy()[:] = 3.0
    g = p.to("cuda")
    assert g.tolist() == [3.0] * 1024


def test_aligned_storage_refuses_alignments_that_are_mistakes():
    with pytest.raises(ValueError, match="larger than the largest supported, 1 GiB"):
        genesis.aligned_storage((4,), genesis.float32, alignment=2**40)
    with pytest.raises(ValueError, match="positive power of two, got -64"):
        genesis.aligned_storage((4,), genesis.float32, alignment=-64)
    with pytest.raises(ValueError, match="power of two, got 48"):
        genesis.aligned_storage((4,), genesis.float32, alignment=48)
    s = genesis.aligned_storage((4,), genesis.float32, alignment=4096)
    assert s.data_ptr % 4096 == 0


def test_numpy_dtypes_without_a_genesis_dtype_say_what_to_do():
    for make in (genesis.tensor, genesis.from_numpy):
        with pytest.raises(TypeError, match=r"NumPy dtype uint32 has no genesis dtype .*astype"):
            make(np.array([1], dtype=np.uint32))
