"""Property tests: no input crashes the interpreter. Random
shapes, dtypes, indices and garbage objects go into every tensor entry point;
each call either returns or raises one of the Python exceptions Genesis maps
its errors to (TypeError, ValueError, IndexError, OverflowError,
genesis.OutOfMemoryError, BufferError, RuntimeError). A crash (a C++
exception escaping, a segfault, an abort) fails the whole run."""

import math
import operator

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import genesis as g  # noqa: E402

EXPECTED = (TypeError, ValueError, IndexError, OverflowError, BufferError, RuntimeError, g.OutOfMemoryError)

garbage = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=5), st.binary(max_size=4),
    st.just(Ellipsis), st.just(object()), st.just({}), st.just(()), st.just([[]]), st.just([1, [2]]),
    st.just(slice(None, None, 0)), st.just(slice("a", 2)), st.just(np.array([1.5])), st.just(np.array(["x"])),
    st.just(np.zeros((2, 2), np.complex64)), st.just(g.float32), st.just(g.device("cpu")),
    st.lists(st.integers(-3, 3), max_size=3), st.tuples(st.integers(-3, 3), st.integers(-3, 3)),
)
dtypes = st.sampled_from(list(g.all_dtypes))
small_shapes = st.lists(st.integers(0, 4), min_size=0, max_size=4).map(tuple)
weird_sizes = st.one_of(st.integers(-3, 5), st.sampled_from([2**62, 2**63 - 1, -(2**63)]))


def tensors(draw_dtype=dtypes):
    @st.composite
    def make(draw):
        shape = draw(small_shapes)
        dt = draw(draw_dtype)
        seed = draw(st.integers(0, 2**32 - 1))
        a = np.random.default_rng(seed).integers(-3, 4, size=shape)
        return g.tensor(a).to(dt)
    return make()


def _call(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except EXPECTED:
        return None


@settings(max_examples=200, deadline=None)
@given(st.lists(weird_sizes, max_size=4), st.one_of(dtypes, garbage), st.one_of(st.none(), garbage))
def test_creation_never_crashes(size, dtype, device):
    for fn in (g.empty, g.zeros, g.ones, g.rand, g.randn):
        _call(fn, *size, dtype=dtype, device=device)
        _call(fn, size, dtype=dtype)
    _call(g.full, size, 1.5, dtype=dtype)
    _call(g.randint, 0, 5, size, dtype=dtype)
    _call(g.arange, *size[:3])


@settings(max_examples=200, deadline=None)
@given(garbage, st.one_of(st.none(), dtypes, garbage))
def test_tensor_constructor_never_crashes(data, dtype):
    _call(g.tensor, data, dtype=dtype)
    _call(g.from_numpy, data)
    _call(g.from_dlpack, data)


@settings(max_examples=300, deadline=None)
@given(tensors(), st.one_of(garbage, tensors(), st.tuples(garbage, garbage)))
def test_indexing_never_crashes(x, index):
    r = _call(operator.getitem, x, index)
    if r is not None:
        assert isinstance(r, g.Tensor)
    _call(operator.setitem, x, index, 1)
    _call(operator.setitem, x, index, index)


@settings(max_examples=300, deadline=None)
@given(tensors(), st.one_of(tensors(), garbage))
def test_operators_never_crash(x, y):
    for op in (operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv, operator.mod,
               operator.pow, operator.matmul, operator.eq, operator.lt, operator.and_, operator.or_):
        _call(op, x, y)
        _call(op, y, x)
    for op in (operator.iadd, operator.imul, operator.isub, operator.itruediv):
        _call(op, x.clone(), y)
    for name in ("exp", "log", "sqrt", "relu", "abs", "neg", "sigmoid"):
        _call(getattr(x, name))
    _call(g.where, x, x, y)


@settings(max_examples=300, deadline=None)
@given(tensors(), garbage, st.one_of(st.booleans(), garbage))
def test_reductions_and_shapes_never_crash(x, arg, keepdim):
    for name in ("sum", "mean", "prod", "max", "min", "argmax", "argmin", "amax"):
        _call(getattr(x, name))
        _call(getattr(x, name), arg)
        _call(getattr(x, name), arg, keepdim)
    for name in ("view", "reshape", "permute", "expand", "squeeze", "unsqueeze", "flatten", "split", "chunk",
                 "to", "transpose", "size", "stride"):
        _call(getattr(x, name), arg)
    _call(x.transpose, arg, arg)
    _call(g.stack, [x, arg])
    _call(g.cat, [x, x], arg)


@settings(max_examples=150, deadline=None)
@given(tensors())
def test_conversions_never_crash(x):
    _call(x.numpy)
    _call(x.tolist)
    _call(x.item)
    _call(repr, x)
    for maxv in (None, (1, 0), (0, 8), (2, 0)):
        cap = _call(x.__dlpack__, max_version=maxv)
        if cap is not None:
            y = _call(g.from_dlpack, cap)
            if y is not None and x.numel():
                assert y.data_ptr() == x.data_ptr()


@settings(max_examples=200, deadline=None)
@given(small_shapes, st.sampled_from([np.bool_, np.uint8, np.int8, np.int16, np.int32, np.int64, np.float16,
                                      np.float32, np.float64]),
       st.integers(0, 2**32 - 1))
def test_numpy_round_trip_property(shape, npdt, seed):
    a = np.random.default_rng(seed).integers(0, 5, size=shape).astype(npdt)
    for t in (g.tensor(a), g.from_numpy(a), g.from_dlpack(a) if a.dtype != np.bool_ else g.from_numpy(a)):
        assert t.shape == a.shape and np.array_equal(t.numpy(), a)
        assert t.numpy().dtype == a.dtype
    if a.ndim:
        rev = a[::-1]
        assert np.array_equal(g.from_numpy(rev).numpy(), rev)
    assert math.prod(shape) == g.tensor(a).numel()


def test_instances_without_init_never_crash():
    # Tensor.__new__ without __init__ (pickle-style construction, subclasses)
    # gives an undefined tensor: every use raises, nothing reads garbage.
    class Sub(g.Tensor):
        pass

    for t in (g.Tensor.__new__(g.Tensor), Sub.__new__(Sub)):
        for f in (lambda: t.shape, lambda: t + 1, lambda: 1 + t, lambda: g.zeros(2) + t, lambda: t[0],
                  lambda: g.zeros(2)[t], lambda: t.numpy(), lambda: t.__dlpack__(), lambda: t.sum(),
                  lambda: g.stack([t]), lambda: g.zeros(2).__setitem__(0, t), lambda: t.add_(1), lambda: t.tolist(),
                  lambda: g.tensor(t), lambda: t @ t, lambda: t.view(2)):
            with pytest.raises(EXPECTED):
                f()
        repr(t)
    with pytest.raises(TypeError):
        g.Tensor()
    with pytest.raises(TypeError):
        g.Tensor.__new__(int)
    with pytest.raises(TypeError):
        g.Tensor.__add__(5, 3)
