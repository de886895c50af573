"""genesis.StorageView: zero-copy strided windows, bounds checked
by C++, exported to NumPy with their strides."""

import hashlib

import pytest

np = pytest.importorskip("numpy", reason="NumPy (python3-numpy) is not installed")

import genesis  # noqa: E402
from conftest import MiB, requires_cuda  # noqa: E402


@pytest.fixture
def base(host):
    return genesis.create_storage(np.arange(24, dtype=np.float32))


def test_view_pointer_and_metadata(base):
    v = genesis.StorageView(base, 4, (2, 3), (6, 2))
    assert v.base is base
    assert v.offset == 4 and v.shape == (2, 3) and v.stride == (6, 2)
    assert v.dtype is genesis.float32 and v.device == genesis.device("cpu")
    assert v.data_ptr == base.data_ptr + 4 * base.itemsize
    assert v.numel() == 6 == len(v) and v.nbytes == 24
    assert not v.is_contiguous()
    np.testing.assert_array_equal(v.numpy(), np.arange(24, dtype=np.float32)[4:][:12].reshape(2, 6)[:, ::2])
    assert "offset=4" in repr(v)


def test_view_is_zero_copy(base):
    v = genesis.StorageView(base, 2, (3,), (1,))
    a = np.asarray(v)
    assert a.ctypes.data == v.data_ptr
    a[:] = -1
    assert base.tolist()[:6] == [0.0, 1.0, -1.0, -1.0, -1.0, 5.0]


@pytest.mark.parametrize("offset, shape, stride, contiguous", [
    (0, (24,), (1,), True),
    (0, (4, 6), (6, 1), True),
    (6, (3, 6), (6, 1), True),
    (0, (6, 4), (1, 6), False),
    (0, (1, 5), (100, 1), True),   # size-1 dimensions may have any stride
    (0, (0, 3), (7, 9), True),     # empty views are contiguous
    (23, (24,), (-1,), False),
    (0, (3, 4), (0, 1), False),    # broadcast
])
def test_is_contiguous(base, offset, shape, stride, contiguous):
    v = genesis.StorageView(base, offset, shape, stride)
    assert v.is_contiguous() is contiguous
    full = np.arange(24, dtype=np.float32)
    expected = np.lib.stride_tricks.as_strided(full[offset:] if stride[0] >= 0 else full, shape=shape,
                                               strides=[s * 4 for s in stride]) if all(s >= 0 for s in stride) \
        else full[::-1].reshape(shape)
    np.testing.assert_array_equal(np.asarray(v), expected)


def test_defaults(base):
    whole = genesis.StorageView(base)
    assert whole.shape == (24,) and whole.stride == (1,) and whole.is_contiguous()
    packed = genesis.StorageView(base, 4, (2, 5))
    assert packed.stride == (5, 1) and packed.is_contiguous()


@pytest.mark.parametrize("offset, shape, stride, match", [
    (0, (25,), (1,), "reach elements"),
    (20, (2, 3), (3, 1), "reach elements"),
    (-1, (2,), (1,), "offset must be >= 0"),
    (0, (2, 3), (1,), "dimensions"),
    (0, (-2,), (1,), "negative"),
    (4, (6,), (-1,), "reach elements"),
    (0, (2**40, 2**40), (1, 1), "too many elements"),
    (0, (2, 2), (2**62, 2**62), "reach elements"),
])
def test_out_of_bounds_views_are_value_errors(base, offset, shape, stride, match):
    with pytest.raises(ValueError, match=match):
        genesis.StorageView(base, offset, shape, stride)


def test_bad_argument_types(base):
    with pytest.raises(TypeError):
        genesis.StorageView([1, 2, 3], 0, (1,), (1,))
    with pytest.raises(TypeError):
        genesis.StorageView(base, 1.5, (1,), (1,))
    with pytest.raises(TypeError):
        genesis.StorageView(base, (1,), (1,), (1,))
    with pytest.raises(TypeError):
        genesis.StorageView(base, 0, "ab", (1,))


def test_view_keeps_its_base_alive(host):
    before = host.memory_allocated()
    b = genesis.Storage((MiB,), genesis.uint8)
    v = genesis.StorageView(b, 10, (100,), (1,))
    del b
    assert host.memory_allocated() == before + MiB
    np.asarray(v)[:] = 5
    assert int(np.asarray(v).sum()) == 500
    del v
    assert host.memory_allocated() == before


def test_readonly_base_gives_readonly_view(tmp_path):
    path = tmp_path / "ro.bin"
    np.arange(10, dtype=np.int32).tofile(path)
    m = genesis.MappedStorage(path, (10,), genesis.int32, mode="r")
    v = genesis.StorageView(m, 2, (3,), (2,))
    assert v.readonly
    a = v.numpy()
    assert not a.flags.writeable and a.tolist() == [2, 4, 6]
    with pytest.raises(ValueError):
        a[0] = 1


def test_non_contiguous_view_refuses_contiguous_consumers(base):
    v = genesis.StorageView(base, 0, (3,), (2,))
    with pytest.raises(BufferError, match="not contiguous"):
        hashlib.sha256(v)  # asks for a simple (contiguous) buffer
    # Consumers that take strides get the elements in order.
    assert bytes(v) == np.arange(24, dtype=np.float32)[0:6:2].tobytes()
    assert hashlib.sha256(genesis.StorageView(base, 0, (2,), (1,))).digest() == \
        hashlib.sha256(np.arange(2, dtype=np.float32).tobytes()).digest()


@requires_cuda
def test_gpu_view(cuda0):
    g = genesis.create_storage(list(range(10)), device="cuda")
    v = genesis.StorageView(g, 3, (2,), (4,))
    assert v.device == genesis.device("cuda:0") and v.data_ptr == g.data_ptr + 3 * 8
    with pytest.raises(TypeError, match=r"\.cpu\(\)"):
        v.numpy()
