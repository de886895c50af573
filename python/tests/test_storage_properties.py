"""Property tests for the storage bindings (hypothesis): random shapes,
dtypes, offsets, strides, names, modes and nested data never crash the
interpreter; bad values raise ValueError / TypeError / OverflowError (or
OutOfMemoryError / CudaError), and good values do what they say."""

import os
import uuid

import pytest

np = pytest.importorskip("numpy", reason="NumPy (python3-numpy) is not installed")

hypothesis = pytest.importorskip("hypothesis", reason="hypothesis (python3-hypothesis) is not installed")
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import genesis  # noqa: E402

ERRORS = (ValueError, TypeError, OverflowError, BufferError, genesis.OutOfMemoryError, genesis.CudaError)
dims = st.integers(min_value=-(1 << 70), max_value=1 << 70) | st.integers(min_value=-3, max_value=40)
shapes = st.one_of(st.lists(dims, max_size=5), st.tuples(dims, dims), dims, st.text(max_size=3), st.none(),
                   st.lists(st.floats(), max_size=2), st.booleans())
dtypes = st.one_of(st.sampled_from(genesis.all_dtypes), st.sampled_from([d.name for d in genesis.all_dtypes]),
                   st.text(max_size=8), st.none(), st.integers(), st.sampled_from([np.float32, np.uint16, float]))
devices = st.one_of(st.sampled_from(["cpu", "cuda", "cuda:0", "cuda:9", "cpu:0", "tpu", 0, -1, None]),
                    st.text(max_size=6))
small_shapes = st.lists(st.integers(min_value=0, max_value=6), max_size=4)


def _product(shape):
    n = 1
    for d in shape:
        n *= d
    return n


@given(shapes, dtypes, devices)
def test_storage_constructor_never_crashes(shape, dtype, device):
    try:
        s = genesis.Storage(shape, dtype, device)
    except ERRORS:
        return
    expected = (shape,) if isinstance(shape, int) else tuple(shape)
    assert s.shape == expected and s.nbytes == _product(expected) * s.itemsize
    assert s.device == genesis.device(device)


@given(small_shapes, st.integers(min_value=-5, max_value=200), st.lists(st.integers(-8, 8), max_size=4),
       st.sampled_from(genesis.all_dtypes))
def test_view_bounds_match_a_reference(shape, offset, stride, dtype):
    base = genesis.Storage((50,), dtype)
    stride = (stride + [1] * len(shape))[:len(shape)] if len(stride) >= len(shape) else stride
    n = _product(shape)
    valid = len(stride) == len(shape) and offset >= 0
    if valid and n > 0:
        lo = offset + sum((d - 1) * s for d, s in zip(shape, stride) if s < 0)
        hi = offset + sum((d - 1) * s for d, s in zip(shape, stride) if s > 0)
        valid = lo >= 0 and hi < 50
    try:
        v = genesis.StorageView(base, offset, shape, stride)
    except ValueError:
        assert not valid
        return
    assert valid
    assert v.data_ptr == base.data_ptr + offset * base.itemsize
    assert v.numel() == n
    if dtype is not genesis.bfloat16:
        ref = np.arange(50).astype(np.asarray(genesis.Storage((1,), dtype)).dtype)
        np.asarray(base)[:] = ref
        expected = [ref[offset + sum(i * s for i, s in zip(idx, stride))] for idx in np.ndindex(*shape)]
        assert np.asarray(v).ravel().tolist() == [x.item() for x in expected]


@given(st.one_of(st.integers(), st.text(max_size=4), st.floats(), st.none()), shapes, shapes)
def test_view_arguments_never_crash(offset, shape, stride):
    base = genesis.Storage((8,), genesis.int16)
    try:
        genesis.StorageView(base, offset, shape, stride)
    except ERRORS:
        pass


numbers = st.one_of(st.integers(-(1 << 70), 1 << 70), st.floats(allow_nan=True), st.booleans())
nested = st.recursive(st.one_of(numbers, st.lists(numbers, max_size=4)),
                      lambda inner: st.lists(inner, max_size=3), max_leaves=20)


@given(nested, st.one_of(st.none(), st.sampled_from(genesis.all_dtypes)))
def test_create_storage_from_nested_data_never_crashes(data, dtype):
    try:
        s = genesis.create_storage(data, dtype=dtype)
    except ERRORS:
        return
    # Whatever was accepted has NumPy's shape for the same nesting.
    assert s.shape == np.array(data, dtype=object).shape


@given(st.sampled_from([np.bool_, np.uint8, np.int8, np.int16, np.int32, np.int64, np.float16, np.float32,
                        np.float64, np.uint16, np.uint32]),
       small_shapes, st.integers(1, 3), st.booleans(), st.booleans())
def test_create_storage_from_numpy_matches_numpy(np_dtype, shape, step, transpose, swap):
    a = (np.arange(_product(shape) * step * 2) % 100).astype(np_dtype)[::step][:_product(shape)].reshape(shape)
    if transpose:
        a = a.T
    if swap:
        a = a.astype(a.dtype.newbyteorder())
    s = genesis.create_storage(a)
    assert s.shape == a.shape
    assert s.tolist() == a.tolist()


@given(st.text(max_size=40))
def test_shared_storage_names_never_crash(name):
    unique = f"{name}-{uuid.uuid4().hex[:6]}" if name else name
    try:
        s = genesis.SharedStorage((2,), genesis.uint8, unique)
    except ERRORS:
        return
    try:
        assert s.name.lstrip("/") == unique.lstrip("/")
    finally:
        s.unlink()


@given(st.text(max_size=4), st.one_of(st.none(), small_shapes), st.integers(-10, 100))
def test_mapped_storage_arguments_never_crash(tmp_path_factory, mode, shape, offset):
    path = tmp_path_factory.getbasetemp() / "prop.bin"
    path.write_bytes(bytes(64))
    try:
        m = genesis.MappedStorage(path, shape, genesis.uint8, mode=mode, offset=offset)
    except ERRORS:
        return
    assert m.mode == mode and m.offset == offset and m.readonly == (mode == "r")
    if not m.readonly and m.nbytes:
        np.asarray(m)[:] = 1
    m.close()


@pytest.mark.parametrize("cls", ["Storage", "StorageView", "SharedStorage", "MappedStorage", "BatchStorage"])
def test_new_without_init_is_refused(cls):
    # pybind11's __new__ without __init__ would leave the C++ object
    # unconstructed: it is refused before such an object exists.
    klass = getattr(genesis, cls)
    with pytest.raises(TypeError, match="never constructed"):
        klass.__new__(klass)
