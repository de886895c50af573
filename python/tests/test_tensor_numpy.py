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


def test_writes_into_empty_arrays_from_numpy_are_no_ops():
    # NumPy gives empty arrays zero strides; nothing of an empty tensor can
    # overlap itself, so in-place writes work as they do in NumPy.
    a = np.zeros((3, 0))
    t = g.from_numpy(a)
    assert t.stride() == a.strides and t.add_(1).shape == (3, 0)
    t[...] = np.zeros((3, 0))
    assert g.zeros(1, 0).expand(3, 0).add_(1).shape == (3, 0)
    # A non-empty expanded tensor is still refused.
    with pytest.raises(ValueError, match="expanded"):
        g.zeros(1, 2).expand(3, 2).add_(1)


def test_integer_tensors_of_one_element_are_indices():
    import operator
    assert operator.index(g.tensor(3)) == 3
    assert operator.index(g.tensor([4], dtype=g.int16)) == 4
    assert [10, 20, 30][g.tensor(1)] == 20
    assert g.arange(5)[g.tensor(1):g.tensor(3)].tolist() == np.arange(5)[np.array(1):np.array(3)].tolist()
    for bad in (g.tensor(1.0), g.tensor([1, 2])):
        with pytest.raises(TypeError, match="only integer tensors of a single element"):
            operator.index(bad)
    # As an index of a tensor a one-element 1-d tensor is still an array.
    assert g.arange(5)[g.tensor([2])].shape == (1,)


def test_integers_beyond_int64_are_floats_where_the_dtype_is_floating():
    big = 2 ** 63
    assert g.tensor([big], dtype=g.float64).tolist() == np.array([big], dtype=np.float64).tolist()
    assert g.tensor([1.5, 2 ** 70]).dtype == g.float32
    assert g.tensor([1.5, 2 ** 70], dtype=g.float64).tolist() == [1.5, float(2 ** 70)]
    assert g.tensor([np.uint64(big)], dtype=g.float64).tolist() == [float(big)]
    with pytest.raises(ValueError, match=r"integer 9223372036854775808 at \[1\] does not fit in int64"):
        g.tensor([1, big])
    with pytest.raises(ValueError, match="does not fit in int64"):
        g.tensor([[big]], dtype=g.int64)
    with pytest.raises(ValueError, match="an integer of 1001 bits"):
        g.tensor([2 ** 1000])
    # A NumPy uint64 scalar above int64 names itself, not a pybind11 cast.
    with pytest.raises(ValueError, match=r"integer 9223372036854775808 \((numpy\.)?uint64\) does not fit in int64"):
        g.zeros(2, dtype=g.float64).fill_(np.uint64(big))
    assert g.zeros(2, dtype=g.int64).fill_(np.uint64(5)).tolist() == [5, 5]


def test_ranges_make_tensors():
    assert g.tensor(range(3)).tolist() == np.array(range(3)).tolist()
    assert g.tensor([range(2), range(2)]).tolist() == [[0, 1], [0, 1]]
    assert g.tensor(range(0)).shape == (0,)


def test_an_empty_slice_starts_where_its_first_element_would():
    x = g.arange(4.0)
    assert x[4:].storage_offset() == 4 and x[10:].storage_offset() == 4
    assert x[1:1].storage_offset() == 1 and x.narrow(0, 3, 0).storage_offset() == 3


def test_any_all_and_count_nonzero_along_dims_match_numpy():
    a = np.array([[0, 1, 2], [0, 0, 3]], dtype=np.int32)
    t = g.tensor(a)
    for dim in (0, 1, -1, (0, 1)):
        assert t.any(dim).tolist() == np.any(a, axis=dim).tolist()
        assert t.all(dim).tolist() == np.all(a, axis=dim).tolist()
        assert t.count_nonzero(dim).tolist() == np.count_nonzero(a, axis=dim).tolist()
        assert g.count_nonzero(t, dim=dim).tolist() == np.count_nonzero(a, axis=dim).tolist()
    assert t.any(dim=1, keepdim=True).shape == (2, 1)
    assert t.all(keepdim=True).shape == (1, 1)
    assert t.any().item() is True and t.all().item() is False
    assert t.count_nonzero().item() == 3


def test_add_and_sub_take_alpha():
    x, y = g.tensor([1.0, 2.0]), g.tensor([10.0, 20.0])
    assert x.add(y, alpha=2).tolist() == [21.0, 42.0]
    assert g.sub(x, y, alpha=0.5).tolist() == [-4.0, -8.0]
    assert g.add(x, 3, alpha=2).tolist() == [7.0, 8.0]
    z = x.clone()
    z.sub_(y, alpha=-1)
    assert z.tolist() == [11.0, 22.0]
    i = g.tensor([1, 2])
    assert i.add(i, alpha=3).tolist() == [4, 8] and i.add(i, alpha=3).dtype == g.int64
    with pytest.raises(TypeError, match="alpha must not be a floating point number"):
        i.add(i, alpha=0.5)


def test_complex_numbers_are_refused_whichever_kind():
    # No complex dtype: a NumPy complex scalar must not turn the result into
    # a NumPy array (through __array__) where a Python complex is refused.
    for c in (1j, np.complex64(1), np.complex128(2)):
        with pytest.raises(TypeError, match="no complex dtype"):
            g.ones(2) + c
        with pytest.raises(TypeError, match="no complex dtype"):
            g.ones(2).mul_(c)


def test_floor_division_and_remainder_assign_in_place():
    x = g.tensor([5, 7, -7])
    y = x
    v = x[1:]
    x //= 2
    assert x is y and y.tolist() == [2, 3, -4] == (np.array([5, 7, -7]) // 2).tolist()
    assert v.tolist() == [3, -4]  # a view sees the change
    x %= 3
    assert x is y and y.tolist() == (np.array([2, 3, -4]) % 3).tolist()
    f = g.tensor([5.5, -7.5])
    assert f.floor_divide_(2).tolist() == [2.0, -4.0] and f.remainder_(3).tolist() == [2.0, 2.0]
    with pytest.raises(ZeroDivisionError):
        x //= 0
    with pytest.raises(RuntimeError):  # no downcast in place: int //= float is a float
        x //= 1.5


def test_half_precision_times_a_python_float_is_computed_in_float32():
    # As PyTorch: the scalar is not rounded to float16 first (1e5 is inf
    # there, 1e-8 is 0).
    h = g.tensor([3.0], dtype=g.float16)
    assert (h / 1e5).tolist() == [float(np.float16(np.float32(3.0) / np.float32(1e5)))]
    assert (h * 1e-5).tolist() == (h / 1e5).tolist()
    assert (g.tensor([1e-3], dtype=g.float16) * 1e5).tolist() == [float(np.float16(np.float32(np.float16(1e-3)) * np.float32(1e5)))]
    x = g.tensor([60000.0], dtype=g.float16)
    x.mul_(1e-8)
    assert x.dtype == g.float16 and x.tolist() == [float(np.float16(np.float32(60000.0) * np.float32(1e-8)))]
    assert (h * 0.1).tolist() == [float(np.float16(np.float32(3.0) * np.float32(0.1)))]
    assert (g.tensor([3.0], dtype=g.bfloat16) / 1e5).item() > 0
    assert (h * 2.0).tolist() == [6.0] and (h * 2.0).dtype == g.float16


def test_max_keepdim_needs_a_dim_and_empty_amax_is_an_index_error():
    t = g.ones(2, 3)
    with pytest.raises(TypeError, match="keepdim=True needs a dim"):
        t.max(keepdim=True)
    with pytest.raises(TypeError, match="keepdim=True needs a dim"):
        t.min(keepdim=True)
    assert t.amax(keepdim=True).shape == (1, 1)
    e = g.zeros(0, 3)
    for f, name in ((e.amax, "amax"), (e.amin, "amin"), (lambda d: e.max(d), "max"), (e.argmax, "argmax")):
        with pytest.raises(IndexError, match=name + r"\(\): Expected reduction dim 0 to have non-zero size"):
            f(0)


def test_cat_leaves_out_empty_one_d_tensors_as_pytorch_does():
    a = g.ones(2, 3)
    r = g.cat([g.tensor([]), a, g.zeros(0, dtype=g.float64)])
    assert r.shape == (2, 3) and r.dtype == g.float64  # the left-out tensors' dtype still counts
    assert g.cat([g.zeros(0), g.ones(2)]).tolist() == [1.0, 1.0]  # all 1-d: an ordinary cat
    assert g.cat([g.zeros(0), g.zeros(0)]).shape == (0,)
    with pytest.raises(ValueError, match="same number of dimensions"):
        g.cat([a, g.ones(3)])


def test_where_refuses_a_scalar_the_result_dtype_cannot_hold():
    b = g.tensor([True, False])
    u = g.tensor([1, 2], dtype=g.uint8)
    with pytest.raises(ValueError, match="value 300 cannot be converted to uint8"):
        g.where(b, u, 300)
    assert g.where(b, u, 255).tolist() == [1, 255]
    assert g.where(b, u, 2.5).tolist() == [1.0, 2.5]  # a float scalar promotes instead
