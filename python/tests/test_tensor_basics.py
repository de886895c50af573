"""genesis.Tensor: metadata, creation, operators, reductions, shape ops.
Values are checked against NumPy."""

import copy
import operator

import numpy as np
import pytest

import genesis as g


def npv(t):
    return t.numpy()


# ------------------------------------------------------------- metadata ---
def test_metadata():
    x = g.arange(6).view(2, 3)
    assert x.shape == (2, 3) and isinstance(x.shape, tuple)
    assert x.size() == (2, 3) and x.size(-1) == 3
    assert x.strides == (3, 1) and x.stride() == (3, 1) and x.stride(0) == 3
    assert x.dtype is g.int64 and x.ndim == 2 and x.dim() == 2 and x.numel() == 6
    assert len(x) == 2 and x.element_size() == 8 and x.itemsize == 8 and x.nbytes == 48
    assert x.device == g.device("cpu") and x.device.type == "cpu" and not x.is_cuda
    assert x.is_contiguous() and not x.T.is_contiguous()
    assert x.data_ptr() != 0 and x[1].data_ptr() == x.data_ptr() + 3 * 8
    assert x.storage_offset() == 0 and x[1].storage_offset() == 3
    assert isinstance(x, g.Tensor)
    with pytest.raises(TypeError):
        len(g.tensor(1.0))


def test_repr_is_pytorch_like():
    assert repr(g.tensor([[1.0, 2.0], [3.0, 4.0]])) == "tensor([[1., 2.],\n        [3., 4.]])"
    assert str(g.tensor([1, 2], dtype=g.int32)) == "tensor([1, 2], dtype=genesis.int32)"
    assert repr(g.tensor(True)) == "tensor(True)"
    assert "..." in repr(g.zeros(2000))


def test_summarised_repr_reads_only_the_items_shown():
    # 10^10 elements as a view of one: a float64 copy of all would be 80 GB.
    assert repr(g.zeros(1).expand(10**10)) == "tensor([0., 0., 0.,  ..., 0., 0., 0.])"
    assert repr(g.ones(3, 1, dtype=g.int32).expand(3, 10**9)) == (
        "tensor([[1, 1, 1,  ..., 1, 1, 1],\n"
        "        [1, 1, 1,  ..., 1, 1, 1],\n"
        "        [1, 1, 1,  ..., 1, 1, 1]], dtype=genesis.int32)")
    cpu = g.device("cpu")
    x = g.arange(4_000_000).view(2000, 2000)  # 32 MB of int64
    cpu.reset_peak_stats()
    before = cpu.memory_allocated()
    text = repr(x.T[::-1])
    assert cpu.max_memory_allocated() - before <= 4096  # the 36 items shown, not a copy of 32 MB
    a = np.arange(4_000_000).reshape(2000, 2000).T[::-1]
    lines = text.splitlines()
    assert len(lines) == 7 and lines[3] == "        ...,"
    for line, row in zip(lines[:3] + lines[4:], (0, 1, 2, -3, -2, -1)):
        items = line.replace("tensor(", "").strip(" [],)").split(",")
        assert [i.strip() for i in items][3] == "..."
        assert [int(i) for i in items if i.strip() != "..."] == list(a[row, :3]) + list(a[row, -3:])


def test_item_tolist_scalars():
    assert g.tensor(2.5).item() == 2.5 and isinstance(g.tensor(2.5).item(), float)
    assert g.tensor(7).item() == 7 and isinstance(g.tensor(7).item(), int)
    assert g.tensor(True).item() is True
    assert g.tensor([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]
    assert g.tensor([True, False]).tolist() == [True, False]
    assert g.tensor(3).tolist() == 3
    assert g.zeros(2, 0).tolist() == [[], []]
    assert float(g.tensor(1.5)) == 1.5 and int(g.tensor(3)) == 3 and bool(g.tensor(1))
    with pytest.raises(ValueError):
        g.tensor([1.0, 2.0]).item()
    with pytest.raises(ValueError):
        bool(g.tensor([1, 2]))
    big = 2**62 + 1
    assert g.tensor([big]).tolist() == [big]  # exact int64


def test_hash_and_identity():
    x = g.zeros(2)
    assert hash(x) == hash(x)
    assert {x: 1}[x] == 1


def test_conversions():
    x = g.arange(6).view(2, 3)
    assert x.to(g.float64).dtype is g.float64
    assert x.to("float16").dtype is g.float16
    assert x.to(dtype=g.bool).dtype is g.bool
    assert x.to("cpu").data_ptr() == x.data_ptr()  # nothing changes: the same data
    assert x.to("cpu", copy=True).data_ptr() != x.data_ptr()
    assert x.to(np.float32).dtype is g.float32
    assert x.float().dtype is g.float32 and x.half().dtype is g.float16 and x.long().dtype is g.int64
    assert x.int().dtype is g.int32 and x.bool().dtype is g.bool and x.double().dtype is g.float64
    assert x.cpu().data_ptr() == x.data_ptr()
    t = x.T
    c = t.contiguous()
    assert c.is_contiguous() and c.data_ptr() != t.data_ptr() and np.array_equal(npv(c), npv(x).T)
    assert x.contiguous().data_ptr() == x.data_ptr()
    cl = x.clone()
    assert cl.data_ptr() != x.data_ptr() and np.array_equal(npv(cl), npv(x))
    d = copy.deepcopy(x)
    assert d.data_ptr() != x.data_ptr()
    with pytest.raises(TypeError):
        x.to(3.5)


# ------------------------------------------------------------- creation ---
@pytest.mark.parametrize("dt", [g.bool, g.uint8, g.int8, g.int16, g.int32, g.int64, g.float16, g.bfloat16,
                                g.float32, g.float64])
def test_creation_dtypes(dt):
    for fn in (g.zeros, g.ones, g.empty, g.rand if dt.is_floating_point else g.zeros):
        t = fn(2, 3, dtype=dt)
        assert t.shape == (2, 3) and t.dtype is dt
    assert g.zeros((2, 3), dtype=dt).shape == (2, 3)
    assert g.full((2,), 1, dtype=dt).dtype is dt
    assert g.zeros_like(g.zeros(2), dtype=dt).dtype is dt


def test_values_out_of_the_dtype_range_raise():
    with pytest.raises(ValueError, match="value 1099511627776 cannot be converted to int32 without overflow"):
        g.full((2,), 2**40, dtype=g.int32)
    x = g.zeros(2, dtype=g.int32)
    with pytest.raises(ValueError, match="value 1099511627776 cannot be converted to int32 without overflow"):
        x[0] = 2**40
    with pytest.raises(ValueError, match="value 300 cannot be converted to uint8"):
        g.zeros(2, dtype=g.uint8).fill_(300)
    with pytest.raises(ValueError, match="value -1 cannot be converted to uint8"):
        g.tensor([1, -1], dtype=g.uint8)
    with pytest.raises(ValueError, match="value 1e\\+10 cannot be converted to int32"):
        g.full((1,), 1e10, dtype=g.int32)
    with pytest.raises(ValueError, match="value nan cannot be converted to int64"):
        g.tensor(float("nan"), dtype=g.int64)
    with pytest.raises(ValueError, match="cannot be converted to int8"):
        x8 = g.zeros(3, dtype=g.int8)
        x8[:] = [1, 2, 128]
    assert x.tolist() == [0, 0]  # nothing written
    # In range: as NumPy stores them (floats truncate toward zero).
    assert g.full((2,), 2**31 - 1, dtype=g.int32).tolist() == [2**31 - 1] * 2
    assert g.full((2,), -2.9, dtype=g.int8).tolist() == np.full(2, -2.9).astype(np.int8).tolist()
    assert g.tensor([255.5, 0], dtype=g.uint8).tolist() == [255, 0]
    x[1] = -(2**31)
    assert x.tolist() == [0, -(2**31)]
    # bool takes any number (nonzero is True); floating dtypes any value.
    assert g.full((2,), 2**40, dtype=g.bool).tolist() == [True, True]
    assert g.tensor([0.5, 0, -7], dtype=g.bool).tolist() == [True, False, True]
    assert g.full((1,), 1e10, dtype=g.float16).tolist() == [float("inf")]


def test_randint_range_must_fit_the_dtype():
    with pytest.raises(ValueError, match="randint: high 300 is out of range for uint8 \\(at most 256\\)"):
        g.randint(0, 300, (4,), dtype=g.uint8)
    with pytest.raises(ValueError, match="randint: low -1 is out of range for uint8"):
        g.randint(-1, 3, (4,), dtype=g.uint8)
    with pytest.raises(ValueError, match="out of range for int8"):
        g.randint(0, 129, (4,), dtype=g.int8)
    r = g.randint(0, 256, (4096,), dtype=g.uint8).numpy()
    assert r.dtype == np.uint8 and r.min() == 0 and r.max() == 255
    assert g.randint(-128, 128, (16,), dtype=g.int8).dtype is g.int8


def test_creation_values():
    assert np.array_equal(npv(g.zeros(2, 2)), np.zeros((2, 2), np.float32))
    assert np.array_equal(npv(g.ones(3, dtype=g.int32)), np.ones(3, np.int32))
    assert np.array_equal(npv(g.arange(5)), np.arange(5))
    assert np.array_equal(npv(g.arange(1, 10, 3)), np.arange(1, 10, 3))
    assert np.allclose(npv(g.arange(0, 1, 0.25)), np.arange(0, 1, 0.25))
    assert g.arange(0, 1, 0.25).dtype is g.float32 and g.arange(5).dtype is g.int64
    assert g.full((2,), 7).dtype is g.int64 and g.full((2,), 7.5).dtype is g.float32
    assert g.full((2,), True).dtype is g.bool
    assert np.array_equal(npv(g.full_like(g.zeros(2, dtype=g.int32), 3)), [3, 3])
    assert g.empty(()).shape == () and g.empty([]).shape == () and g.zeros(0).shape == (0,)
    r = g.rand(1000)
    assert 0 <= npv(r).min() and npv(r).max() < 1
    n = g.randn(10000)
    assert abs(npv(n).mean()) < 0.1 and 0.9 < npv(n).std() < 1.1
    ri = g.randint(3, 7, (100,))
    assert ri.dtype is g.int64 and npv(ri).min() >= 3 and npv(ri).max() < 7
    assert npv(g.randint(5, (50,))).max() < 5
    assert g.randint(0, 2, size=(3,), dtype=g.int32).dtype is g.int32
    g.manual_seed(123)
    a = g.randn(5)
    g.manual_seed(123)
    b = g.randn(5)
    assert g.equal(a, b) and g.initial_seed() == 123
    assert g.rand_like(g.zeros(2, 2)).shape == (2, 2) and g.randn_like(g.zeros(3)).shape == (3,)
    assert g.empty_like(g.zeros(2, dtype=g.int8)).dtype is g.int8
    assert g.ones_like(g.zeros(2), dtype=g.int64).dtype is g.int64


def test_tensor_from_python_data():
    assert g.tensor([[1, 2], [3, 4]]).dtype is g.int64
    assert g.tensor([1, 2.5]).dtype is g.float32
    assert g.tensor([True, False]).dtype is g.bool
    assert g.tensor([True, 2]).dtype is g.int64
    assert g.tensor(3.5).shape == () and g.tensor(3.5).dtype is g.float32
    assert g.tensor([]).shape == (0,) and g.tensor([]).dtype is g.float32
    assert g.tensor([[], []]).shape == (2, 0)
    assert g.tensor([1, 2], dtype=g.float16).dtype is g.float16
    assert g.tensor((1, 2)).shape == (2,)
    assert g.tensor([np.int32(3), np.float32(1.5)]).tolist() == [3.0, 1.5]
    assert g.tensor([g.tensor(1), g.tensor(2)]).tolist() == [1, 2]
    assert g.tensor([0.1], dtype=g.float64).item() == 0.1  # no float32 detour
    with pytest.raises(ValueError, match="ragged"):
        g.tensor([[1, 2], [3]])
    with pytest.raises(ValueError, match="ragged"):
        g.tensor([[1, 2], 3])
    with pytest.raises(TypeError):
        g.tensor(["a"])
    with pytest.raises(TypeError):
        g.tensor(object())
    with pytest.raises(ValueError):
        g.tensor([2**64])


def test_tensor_refuses_data_nested_deeper_than_a_tensor():
    deepest = 1
    for _ in range(16):
        deepest = [deepest]
    assert g.tensor(deepest).shape == (1,) * 16  # the most dims a tensor has
    with pytest.raises(ValueError, match="more than 16 levels deep"):
        g.tensor([deepest])
    very_deep = 1
    for _ in range(50_000):
        very_deep = [very_deep]
    with pytest.raises(ValueError, match="deeper than the most dimensions a tensor has"):
        g.tensor(very_deep)
    itself = []
    itself.append(itself)
    with pytest.raises(ValueError, match="or a list contains itself"):
        g.tensor(itself)
    x = g.zeros(3)
    with pytest.raises(ValueError, match="or a list contains itself"):
        x[:] = itself
    assert x.tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("scalar", [np.float64(3.25), np.float32(-1.5), np.float16(0.1), np.int8(-3), np.int16(300),
                                    np.int32(7), np.int64(2**40), np.uint8(200), np.bool_(True)])
def test_tensor_keeps_the_dtype_of_numpy_scalars(scalar):
    t = g.tensor(scalar)
    expected = np.asarray(scalar)
    assert t.shape == () and t.dtype is g.dtype(expected.dtype.name)
    assert t.numpy() == expected and t.numpy().dtype == expected.dtype
    assert g.tensor(scalar).dtype is g.tensor(np.array(scalar)).dtype  # as a 0-d array
    assert g.tensor(scalar, dtype=g.float64).dtype is g.float64


def test_numpy_scalars_in_lists_and_without_a_genesis_dtype():
    # In lists NumPy scalars are numbers of their kind, as Python's are.
    assert g.tensor([np.float64(1.5), 2]).dtype is g.float32
    assert g.tensor([np.int8(1), np.int8(2)]).dtype is g.int64
    with pytest.raises(TypeError, match="NumPy uint16 scalars have no genesis dtype; pass dtype="):
        g.tensor(np.uint16(3))
    assert g.tensor(np.uint16(3), dtype=g.int32).tolist() == 3


@pytest.mark.parametrize("npdt", [np.bool_, np.uint8, np.int8, np.int16, np.int32, np.int64, np.float16,
                                  np.float32, np.float64])
def test_tensor_from_numpy_copies(npdt):
    a = (np.arange(12) % 5).astype(npdt).reshape(3, 4)
    t = g.tensor(a)
    assert t.dtype is g.dtype(np.dtype(npdt).name) and t.shape == (3, 4)
    assert np.array_equal(npv(t), a)
    a[0, 0] = 1
    assert npv(t)[0, 0] == 0  # a copy
    # Non-contiguous and negatively strided arrays.
    assert np.array_equal(npv(g.tensor(a[:, ::-2])), a[:, ::-2])
    assert np.array_equal(npv(g.tensor(a.T)), a.T)
    assert g.tensor(a, dtype=g.float64).dtype is g.float64


def test_tensor_from_tensor_copies():
    x = g.arange(3)
    y = g.tensor(x)
    assert y.data_ptr() != x.data_ptr() and g.equal(x, y)
    assert g.tensor(x, dtype=g.float32).dtype is g.float32


def test_dtype_and_device_arguments():
    assert g.zeros(2, dtype="float16").dtype is g.float16
    assert g.zeros(2, dtype=np.int32).dtype is g.int32
    assert g.zeros(2, dtype=np.dtype("float64")).dtype is g.float64
    assert g.zeros(2, dtype=float).dtype is g.float64 and g.zeros(2, dtype=bool).dtype is g.bool
    assert g.zeros(2, device="cpu").device == g.device("cpu")
    assert g.zeros(2, device=g.device("cpu")).device == g.device("cpu")
    with pytest.raises(TypeError):
        g.zeros(2, dtype=3.5)
    with pytest.raises(ValueError):
        g.zeros(2, dtype="float128")
    with pytest.raises(TypeError):
        g.zeros(2, dtype=np.complex64)
    with pytest.raises(ValueError):
        g.zeros(2, device="tpu")
    with pytest.raises(TypeError):
        g.zeros(2, device=2.5)
    with pytest.raises(TypeError):
        g.zeros(2.5)
    with pytest.raises(TypeError):
        g.zeros(True)
    with pytest.raises(ValueError):
        g.zeros(-1)
    with pytest.raises(TypeError):
        g.empty(2, colour="red")


# ------------------------------------------------------------ operators ---
BINOPS = [operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv, operator.mod,
          operator.pow]


@pytest.mark.parametrize("op", BINOPS, ids=lambda o: o.__name__)
def test_binary_operators_match_numpy(op):
    a = np.array([[1.5, -2.0, 3.0], [4.0, 5.5, -6.0]], np.float32)
    b = np.array([2.0, -3.0, 1.5], np.float32)
    if op is operator.pow:
        a = np.abs(a)
    x, y = g.tensor(a), g.tensor(b)
    np.testing.assert_allclose(npv(op(x, y)), op(a, b), rtol=1e-6)
    np.testing.assert_allclose(npv(op(x, 2)), op(a, np.float32(2)), rtol=1e-6)
    np.testing.assert_allclose(npv(op(3, x)), op(np.float32(3), a), rtol=1e-6)  # reflected


def test_integer_operators():
    a = np.array([7, -7, 9, 0], np.int64)
    b = np.array([2, 2, -4, 3], np.int64)
    x, y = g.tensor(a), g.tensor(b)
    assert np.array_equal(npv(x // y), a // b)
    assert np.array_equal(npv(x % y), a % b)
    assert np.array_equal(npv(x + y), a + b)
    assert (x / y).dtype is g.float32  # true division of ints is float (PyTorch)


def test_weak_scalar_promotion():
    i32 = g.tensor([1, 2], dtype=g.int32)
    assert (i32 + 2).dtype is g.int32
    assert (i32 + 2.5).dtype is g.float32
    assert (2.5 * i32).dtype is g.float32
    h = g.tensor([1.0], dtype=g.float16)
    assert (h * 2.0).dtype is g.float16
    assert (h + g.tensor([1.0])).dtype is g.float32
    assert (g.tensor([True]) + 1).dtype is g.int64
    assert (i32 + np.float64(1.5)).dtype is g.float32  # NumPy scalars are weak too


def test_unary_and_comparisons():
    a = np.array([-1.0, 0.0, 2.0], np.float32)
    x = g.tensor(a)
    assert np.array_equal(npv(-x), -a) and np.array_equal(npv(abs(x)), np.abs(a))
    assert np.array_equal(npv(x.abs()), np.abs(a)) and np.array_equal(npv(x.neg()), -a)
    for op in (operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge):
        r = op(x, 0.0)
        assert r.dtype is g.bool and np.array_equal(npv(r), op(a, 0.0))
        assert np.array_equal(npv(op(x, g.tensor(a[::-1].copy()))), op(a, a[::-1]))
    m = (x > -0.5) & (x < 1.0)
    assert m.tolist() == [False, True, False]
    assert ((x < 0) | (x > 1)).tolist() == [True, False, True]
    assert (~(x > 0)).tolist() == [True, True, False]


def test_math_functions():
    a = np.array([0.5, 1.0, 4.0], np.float32)
    x = g.tensor(a)
    for name in ("exp", "log", "sqrt", "sigmoid", "tanh", "sin", "cos", "relu"):
        ref = {"sigmoid": 1 / (1 + np.exp(-a)), "relu": np.maximum(a, 0)}.get(name)
        ref = getattr(np, name)(a) if ref is None else ref
        np.testing.assert_allclose(npv(getattr(g, name)(x)), ref, rtol=1e-6)
        np.testing.assert_allclose(npv(getattr(x, name)()), ref, rtol=1e-6)
    np.testing.assert_allclose(npv(g.pow(x, 2)), a**2)
    np.testing.assert_allclose(npv(g.pow(2, x)), 2**a, rtol=1e-6)
    np.testing.assert_allclose(npv(x.pow(0.5)), a**0.5, rtol=1e-6)
    c = g.tensor([True, False, True])
    assert g.where(c, x, 0.0).tolist() == [0.5, 0.0, 4.0]
    assert g.where(c, 1, 2).tolist() == [1, 2, 1]
    assert g.maximum(x, g.tensor([1.0, 1.0, 1.0])).tolist() == [1.0, 1.0, 4.0]
    assert g.add(1, 2).item() == 3


def test_inplace_operators_keep_identity_and_memory():
    x = g.zeros(2, 3)
    ptr, obj = x.data_ptr(), x
    x += 1
    x *= 3
    x -= 1
    x /= 2
    assert x is obj and x.data_ptr() == ptr and x.tolist() == [[1.0] * 3] * 2
    assert x.add_(1) is x and x.mul_(2) is x and x.sub_(1) is x and x.div_(3) is x
    x.exp_()
    x.log_()
    x.sqrt_()
    x.neg_()
    x.abs_()
    x.relu_()
    x.pow_(2)
    np.testing.assert_allclose(npv(x), np.ones((2, 3)), rtol=1e-6)
    v = x[0]
    v += 10  # through a view
    assert x[0, 0].item() == pytest.approx(11.0)
    assert x.fill_(2) is x and x.tolist() == [[2.0] * 3] * 2
    assert x.zero_() is x and x.sum().item() == 0
    i = g.zeros(2, dtype=g.int32)
    with pytest.raises(TypeError):
        i += 1.5  # a float result does not fit an int tensor (PyTorch)
    with pytest.raises(TypeError):
        i /= 2


def test_unsupported_operands_raise_type_error():
    x = g.zeros(2)
    with pytest.raises(TypeError):
        x + "a"
    with pytest.raises(TypeError):
        "a" + x
    with pytest.raises(TypeError):
        x + [1, 2]
    with pytest.raises(TypeError):
        x @ 3
    assert (x == "a") is False or (x == "a") == NotImplemented or not (x == "a")


def test_ndarray_operands():
    x = g.tensor([1.0, 2.0])
    a = np.array([10.0, 20.0], np.float32)
    r1 = x + a
    r2 = a + x  # ndarray defers to Tensor.__radd__ (__array_priority__)
    assert isinstance(r1, g.Tensor) and isinstance(r2, g.Tensor)
    assert r1.tolist() == r2.tolist() == [11.0, 22.0]


# ----------------------------------------------------------- reductions ---
def test_reductions_match_numpy():
    a = (np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 7) / 3
    x = g.tensor(a)
    np.testing.assert_allclose(x.sum().item(), a.sum(), rtol=1e-5)
    for dim in (0, 1, 2, -1, (0, 2), (1, 2), [0, 1, 2]):
        d = tuple(dim) if isinstance(dim, list) else dim
        for keepdim in (False, True):
            np.testing.assert_allclose(npv(x.sum(dim=dim, keepdim=keepdim)), a.sum(axis=d, keepdims=keepdim),
                                       rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(npv(x.mean(dim, keepdim)), a.mean(axis=d, keepdims=keepdim), rtol=1e-5,
                                       atol=1e-6)
            np.testing.assert_allclose(npv(x.prod(dim=dim, keepdim=keepdim)), a.prod(axis=d, keepdims=keepdim),
                                       rtol=1e-4)
    assert x.sum(keepdim=True).shape == (1, 1, 1)
    assert x.max().item() == a.max() and x.min().item() == a.min()
    assert x.argmax().item() == a.argmax() and x.argmin().item() == a.argmin()
    vals, idx = x.max(dim=1)
    assert np.array_equal(npv(vals), a.max(1)) and np.array_equal(npv(idx), a.argmax(1))
    r = x.min(dim=2, keepdim=True)
    assert r.values.shape == (2, 3, 1) and np.array_equal(npv(r.indices)[..., 0], a.argmin(2))
    assert type(r).__name__ == "values_indices" and r._fields == ("values", "indices")
    assert np.array_equal(npv(x.argmax(dim=0)), a.argmax(0))
    assert np.array_equal(npv(g.argmin(x, dim=1, keepdim=True)), a.argmin(1)[:, None, :])
    assert np.array_equal(npv(x.amax(dim=(0, 1))), a.max(axis=(0, 1)))
    assert g.sum(x, dim=0).shape == (3, 4) and g.mean(x).shape == ()
    assert g.max(x, 0).values.shape == (3, 4)
    assert np.array_equal(npv(g.max(x, g.zeros(2, 3, 4))), np.maximum(a, 0))
    ints = g.tensor([[1, 2], [3, 4]], dtype=g.int32)
    assert ints.sum().dtype is g.int64 and ints.sum(dtype=g.int32).dtype is g.int32
    with pytest.raises(ValueError):
        ints.mean()  # floating inputs only (PyTorch)
    assert ints.mean(dtype=g.float32).item() == 2.5
    with pytest.raises(IndexError):
        x.sum(dim=3)
    assert g.tensor([True, False]).any().item() and not g.tensor([True, False]).all().item()


def test_matmul():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(12, dtype=np.float32).reshape(3, 4)
    x, y = g.tensor(a), g.tensor(b)
    np.testing.assert_allclose(npv(x @ y), a @ b)
    np.testing.assert_allclose(npv(x.matmul(y)), a @ b)
    np.testing.assert_allclose(npv(g.matmul(x, y)), a @ b)
    out = g.empty(2, 4)
    r = g.matmul(x, y, out=out)
    assert r is out and np.allclose(npv(out), a @ b)
    np.testing.assert_allclose(npv(x @ b), a @ b)  # ndarray operand
    np.testing.assert_allclose(npv(a @ y), a @ b)  # reflected
    batch = np.random.default_rng(0).random((5, 2, 3), dtype=np.float32)
    np.testing.assert_allclose(npv(g.tensor(batch) @ y), batch @ b, rtol=1e-5)
    np.testing.assert_allclose(npv(g.tensor(a[0]) @ y), a[0] @ b)
    with pytest.raises(ValueError):
        x @ x


# ------------------------------------------------------------ shape ops ---
def test_shape_ops_are_views():
    x = g.arange(24).view(2, 3, 4)
    a = np.arange(24).reshape(2, 3, 4)
    for t, ref in [
        (x.view(6, 4), a.reshape(6, 4)), (x.view(-1), a.reshape(-1)), (x.view((4, 6)), a.reshape(4, 6)),
        (x.transpose(0, 2), a.transpose(2, 1, 0)), (x.permute(2, 0, 1), a.transpose(2, 0, 1)),
        (x.permute((1, 0, 2)), a.transpose(1, 0, 2)), (x.T, a.T), (x.flatten(), a.reshape(-1)),
        (x.flatten(1), a.reshape(2, 12)), (x.unsqueeze(1), a[:, None]), (x[:, :1].squeeze(1), a[:, 0]),
        (x.narrow(2, 1, 2), a[:, :, 1:3]), (x.select(1, 2), a[:, 2]),
    ]:
        assert np.array_equal(npv(t), ref)
        assert t.data_ptr() >= x.data_ptr() and t.data_ptr() < x.data_ptr() + x.nbytes
    e = g.ones(1, 3).expand(4, 3)
    assert e.shape == (4, 3) and e.strides == (0, 1)
    assert g.ones(3).expand(2, -1).shape == (2, 3)
    assert g.zeros(1, 2, 1).squeeze().shape == (2,)
    r = x.T.reshape(-1)  # not viewable: a copy
    assert np.array_equal(npv(r), a.T.reshape(-1))
    with pytest.raises(ValueError):
        x.T.view(-1)
    with pytest.raises(ValueError):
        x.view(5, 5)
    with pytest.raises(ValueError):
        g.ones(2, 3).expand(4, 3)


def test_t_transposes_at_most_two_dims():
    a = np.arange(6).reshape(2, 3)
    assert np.array_equal(npv(g.tensor(a).t()), a.T)
    assert g.tensor(a).t().strides == (1, 3)
    assert g.arange(3).t().tolist() == [0, 1, 2] and g.tensor(4).t().item() == 4
    with pytest.raises(ValueError, match="t\\(\\) expects a tensor with <= 2 dimensions, but self is 3D"):
        g.arange(8).reshape(2, 2, 2).t()
    assert g.arange(24).reshape(2, 3, 4).T.shape == (4, 3, 2)  # .T reverses every dim


def test_stack_cat_split_chunk():
    a = np.arange(6).reshape(2, 3)
    x = g.tensor(a)
    assert np.array_equal(npv(g.stack([x, x])), np.stack([a, a]))
    assert np.array_equal(npv(g.stack((x, x), dim=2)), np.stack([a, a], axis=2))
    assert np.array_equal(npv(g.cat([x, x], dim=1)), np.concatenate([a, a], 1))
    assert np.array_equal(npv(g.cat([x, x])), np.concatenate([a, a]))
    parts = x.split(2, dim=1)
    assert isinstance(parts, tuple) and [p.shape for p in parts] == [(2, 2), (2, 1)]
    assert [p.shape for p in g.split(x, [1, 2], dim=1)] == [(2, 1), (2, 2)]
    assert [p.shape for p in x.chunk(3, 1)] == [(2, 1), (2, 1), (2, 1)]
    assert [p.shape for p in g.chunk(x, 2)] == [(1, 3), (1, 3)]
    with pytest.raises(ValueError):
        g.cat([x, g.zeros(3, 3, dtype=g.int64)], dim=1)
    with pytest.raises(TypeError):
        g.stack([x, 1])
    with pytest.raises(TypeError):
        g.stack(x)


def test_iteration_yields_the_sub_tensors_of_dim_0():
    x = g.tensor([[1, 2], [3, 4]])
    assert [r.tolist() for r in x] == [[1, 2], [3, 4]]
    rows = list(x)
    assert all(isinstance(r, g.Tensor) and r.shape == (2,) for r in rows)
    assert rows[1].data_ptr() == x.data_ptr() + 2 * 8  # views, as x[1] is
    items = list(g.tensor([5, 6, 7]))
    assert [i.shape for i in items] == [(), (), ()] and [i.item() for i in items] == [5, 6, 7]
    assert list(g.zeros(0, 3)) == []
    a = np.arange(12).reshape(3, 4)
    assert [r.tolist() for r in g.tensor(a).T] == [list(r) for r in a.T]
    it = iter(g.tensor([1]))
    assert next(it).item() == 1
    with pytest.raises(StopIteration):
        next(it)


def test_iterating_a_0d_tensor_raises():
    with pytest.raises(TypeError, match="iteration over a 0-d tensor"):
        list(g.tensor(5))
    with pytest.raises(TypeError, match="iteration over a 0-d tensor"):
        for _ in g.tensor(2.5):
            pass


def test_threads_use_tensors_concurrently():
    # Large matmuls drop the GIL; every thread must still get its own result.
    import threading

    errors = []

    def work(seed):
        try:
            rng = np.random.default_rng(seed)
            a = rng.random((256, 256), dtype=np.float32)
            x = g.from_numpy(a)
            for _ in range(5):
                r = g.matmul(x, x) + seed
                np.testing.assert_allclose(r.numpy(), a @ a + seed, rtol=1e-4)
                y = g.tensor(a)[::2]
                y[y > 0.5] = 0
                del r, y
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
