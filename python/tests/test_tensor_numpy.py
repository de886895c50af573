"""NumPy interop without copies: t.numpy() and
genesis.from_numpy share memory both ways and keep each other alive;
genesis.tensor(ndarray) copies."""

import gc
import sys

import numpy as np
import pytest

import genesis as g

NP_DTYPES = [np.bool_, np.uint8, np.int8, np.int16, np.int32, np.int64, np.float16, np.float32, np.float64]


@pytest.mark.parametrize("npdt", NP_DTYPES)
def test_numpy_shares_memory(npdt):
    x = g.zeros(2, 3, dtype=g.dtype(np.dtype(npdt).name))
    a = x.numpy()
    assert a.dtype == npdt and a.shape == (2, 3)
    assert a.ctypes.data == x.data_ptr()
    a[1, 2] = 1
    assert x[1, 2].item() == 1  # NumPy -> tensor
    x[0, 0] = 1
    assert a[0, 0] == 1  # tensor -> NumPy


def test_numpy_keeps_storage_alive():
    cpu = g.device("cpu")
    x = g.arange(1000)
    base = cpu.memory_allocated()
    a = x.numpy()
    del x
    gc.collect()
    assert cpu.memory_allocated() == base  # still held by the array
    assert a[999] == 999
    del a
    gc.collect()
    assert cpu.memory_allocated() == base - 8000 or cpu.memory_allocated() < base


def test_numpy_of_views_is_a_strided_view():
    x = g.arange(24).view(4, 6)
    ref = np.arange(24).reshape(4, 6)
    for t, r in [(x.T, ref.T), (x[::2, 1::3], ref[::2, 1::3]), (x[:, ::-1], ref[:, ::-1]), (x[1], ref[1]),
                 (g.ones(1, 3).expand(4, 3), np.ones((4, 3), np.float32))]:
        a = t.numpy()
        assert np.array_equal(a, r)
        if t.numel():
            assert a.ctypes.data == t.data_ptr()
    v = x[::2, 1::3].numpy()
    v[0, 0] = -1
    assert x[0, 1].item() == -1
    assert x.T.numpy().strides == (8, 48)


def test_numpy_errors():
    with pytest.raises(TypeError, match="bfloat16"):
        g.zeros(2, dtype=g.bfloat16).numpy()
    assert np.asarray(g.zeros(2, dtype=g.bfloat16)).dtype == np.float32  # __array__ converts


def test_array_protocol():
    x = g.arange(4)
    a = np.asarray(x)
    assert a.ctypes.data == x.data_ptr()
    assert np.asarray(x, dtype=np.float32).dtype == np.float32
    assert np.add(x, 1).tolist() == [1, 2, 3, 4]
    assert np.array(x).tolist() == [0, 1, 2, 3]


@pytest.mark.parametrize("npdt", NP_DTYPES)
def test_from_numpy_shares_memory(npdt):
    a = (np.arange(12) % 3).astype(npdt).reshape(3, 4)
    t = g.from_numpy(a)
    assert t.dtype is g.dtype(np.dtype(npdt).name) and t.shape == (3, 4) and t.strides == (4, 1)
    assert t.data_ptr() == a.ctypes.data
    t[0, 0] = 1
    assert a[0, 0] == 1
    a[2, 3] = 0
    assert t[2, 3].item() == 0


def test_from_numpy_strided_and_negative():
    a = np.arange(24, dtype=np.int32).reshape(4, 6)
    for view in (a.T, a[::2, ::3], a[::-1], a[:, ::-2], a[1:, 2:][::-1, ::-1], a[0:0]):
        t = g.from_numpy(view)
        assert np.array_equal(t.numpy(), view)
        if view.size:
            assert t.data_ptr() == view.ctypes.data
    t = g.from_numpy(a[::-1])
    t[0, 0] = 100
    assert a[3, 0] == 100
    with pytest.raises(ValueError):  # a stride that is not a whole number of elements
        g.from_numpy(np.lib.stride_tricks.as_strided(np.zeros(8, np.int32), (3,), (6,)))


def test_from_numpy_keeps_array_alive():
    a = np.arange(10, dtype=np.float64)
    refs = sys.getrefcount(a)
    t = g.from_numpy(a)
    assert sys.getrefcount(a) == refs + 1
    v = t[2:5]
    del t
    assert sys.getrefcount(a) == refs + 1  # the view still holds it
    del v
    gc.collect()
    assert sys.getrefcount(a) == refs
    t = g.from_numpy(np.arange(5.0))  # the only reference is the tensor's
    gc.collect()
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_from_numpy_errors():
    with pytest.raises(TypeError):
        g.from_numpy([1, 2])
    with pytest.raises(TypeError):
        g.from_numpy(np.zeros(2, np.complex64))
    with pytest.raises(TypeError):
        g.from_numpy(np.zeros(2, np.uint32))
    with pytest.raises(TypeError):
        g.from_numpy(np.zeros(2, ">f4"))


def test_tensor_of_ndarray_copies():
    a = np.arange(4.0)
    t = g.tensor(a)
    assert t.data_ptr() != a.ctypes.data and t.dtype is g.float64
    a[0] = 9
    assert t[0].item() == 0


def test_round_trip_through_ops():
    a = np.random.default_rng(0).random((3, 4)).astype(np.float32)
    t = g.from_numpy(a)
    np.testing.assert_allclose((t * 2 + 1).numpy(), a * 2 + 1, rtol=1e-6)
    assert g.tensor(a).cpu().numpy().shape == (3, 4)
