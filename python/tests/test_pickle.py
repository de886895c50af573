"""Pickling tensors and storages (Note [Pickling] in genesis/_serialization.py):
round trips over dtypes, layouts and protocols, compared with NumPy; views
pickle compactly; multiprocessing passes tensors; CUDA tensors come back to
their device, or fail clearly where it does not exist."""

import multiprocessing as mp
import pickle

import numpy as np
import pytest

import genesis
from conftest import requires_cuda, requires_no_cuda

PROTOCOLS = [2, 3, 4, 5]
DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
SHAPES = [(), (0,), (7,), (3, 4), (2, 0, 3), (2, 3, 4)]
RNG = np.random.default_rng(7)


def make(dtype, shape):
    """A genesis tensor and the NumPy array it equals (bfloat16: as float32)."""
    n = int(np.prod(shape))
    if dtype == "bool":
        a = RNG.integers(0, 2, n).astype(bool)
    elif dtype.startswith(("int", "uint")):
        info = np.iinfo(dtype)
        a = RNG.integers(info.min, info.max, n, endpoint=True).astype(dtype)
    else:
        a = RNG.normal(0, 100, n).astype("float32" if dtype == "bfloat16" else dtype)
        if n > 2:
            a[:3] = [np.inf, -np.inf, -0.0]
    a = a.reshape(shape)
    t = genesis.tensor(a, dtype=getattr(genesis, dtype))
    ref = t.to(genesis.float32).numpy() if dtype == "bfloat16" else a
    return t, ref


def as_numpy(t):
    return t.to(genesis.float32).numpy() if t.dtype == genesis.bfloat16 else t.numpy()


def assert_same(t, ref, dtype):
    assert isinstance(t, genesis.Tensor)
    assert t.dtype == getattr(genesis, dtype)
    assert t.shape == ref.shape
    assert t.device == genesis.device("cpu")
    assert t.is_contiguous()
    got = as_numpy(t)
    assert got.dtype == ref.dtype
    # Bit for bit (NaN payloads, -0.0 included).
    assert got.tobytes() == np.ascontiguousarray(ref).tobytes()


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_round_trip(dtype, shape, protocol):
    t, ref = make(dtype, shape)
    back = pickle.loads(pickle.dumps(t, protocol=protocol))
    assert_same(back, ref, dtype)
    assert back.data_ptr() != t.data_ptr() or t.numel() == 0  # a copy, not the same memory


def test_nan_bits_survive():
    a = np.array([np.nan, -np.nan, 1.0], dtype=np.float32)
    a.view(np.uint32)[0] = 0x7FC01234  # a NaN with a payload
    back = pickle.loads(pickle.dumps(genesis.from_numpy(a)))
    assert back.numpy().view(np.uint32).tolist() == a.view(np.uint32).tolist()


VIEWS = {
    "transpose": lambda t: t.t(),
    "step slice": lambda t: t[::2, 1::3],
    "negative start": lambda t: t[-3:, :],
    "column": lambda t: t[:, 5],
    "expanded": lambda t: t[:1, :].expand(4, 12),
    "permuted 3-d": lambda t: t.reshape(3, 4, 6).permute(2, 0, 1),
    "0-d element": lambda t: t[2, 3],
}


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("name", sorted(VIEWS))
def test_views_pickle_their_own_elements(name, protocol):
    a = np.arange(72, dtype=np.int32).reshape(6, 12)
    t = genesis.tensor(a)
    view = VIEWS[name](t)
    ref = VIEWS[name](a) if name not in ("transpose", "expanded", "permuted 3-d") else {
        "transpose": a.T, "expanded": np.broadcast_to(a[:1, :], (4, 12)),
        "permuted 3-d": a.reshape(3, 4, 6).transpose(2, 0, 1)}[name]
    back = pickle.loads(pickle.dumps(view, protocol=protocol))
    assert_same(back, np.asarray(ref), "int32")
    np.testing.assert_array_equal(t.numpy(), a)  # the source is unchanged


def test_a_small_view_of_a_big_tensor_pickles_small():
    big = genesis.zeros(1 << 20)  # 4 MiB
    small = big[::1024]           # 1024 elements
    assert len(pickle.dumps(small)) < 8 * 1024
    assert len(pickle.dumps(big)) >= 4 << 20


def test_protocol_5_out_of_band():
    t, ref = make("float64", (64, 3))
    buffers = []
    data = pickle.dumps(t, protocol=5, buffer_callback=buffers.append)
    assert len(buffers) == 1 and len(data) < 512  # the elements travelled out of band
    back = pickle.loads(data, buffers=[memoryview(b) for b in buffers])
    assert_same(back, ref, "float64")


def test_copy_module_and_nested_structures():
    t, ref = make("int16", (5,))
    obj = {"weights": [t, t[1:]], "step": 3}
    back = pickle.loads(pickle.dumps(obj))
    assert_same(back["weights"][0], ref, "int16")
    assert_same(back["weights"][1], ref[1:], "int16")
    assert back["step"] == 3


@pytest.mark.parametrize("bad", [b"\x00" * 7, b""])
def test_corrupted_data_is_a_clear_error(bad):
    with pytest.raises(ValueError, match="bytes, but shape"):
        genesis._serialization._rebuild_tensor(bad, "float32", (2,), "cpu")
    with pytest.raises(ValueError, match="negative"):
        genesis._serialization._rebuild_tensor(b"", "float32", (-1,), "cpu")
    with pytest.raises(ValueError, match="overflows"):
        genesis._serialization._rebuild_tensor(b"", "float64", (1 << 40, 1 << 40), "cpu")


# --------------------------------------------------------------- storages ---

@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_storage_round_trip(dtype, protocol):
    _, ref = make(dtype, (3, 5))
    s = genesis.create_storage(ref, dtype=getattr(genesis, dtype))
    back = pickle.loads(pickle.dumps(s, protocol=protocol))
    assert type(back) is genesis.Storage
    assert back.shape == (3, 5) and back.dtype == getattr(genesis, dtype) and back.device == genesis.device("cpu")
    assert back.data_ptr != s.data_ptr
    assert genesis._C._storage_bytes(back) == genesis._C._storage_bytes(s)
    if dtype != "bfloat16":  # NumPy has no bfloat16
        np.testing.assert_array_equal(np.asarray(back), ref)
    else:
        assert back.tolist() == s.tolist()


def test_zero_size_and_0d_storages():
    for shape in [(0,), (), (4, 0)]:
        s = genesis.Storage.zeros(shape, genesis.int32)
        back = pickle.loads(pickle.dumps(s))
        assert back.shape == shape and back.numel() == s.numel()


def test_storage_view_round_trip():
    base = genesis.create_storage(np.arange(24, dtype=np.float32))
    view = genesis.StorageView(base, 3, (3, 4), (6, 1))
    back = pickle.loads(pickle.dumps(view))
    assert isinstance(back, genesis.StorageView)
    assert back.shape == (3, 4) and back.offset == 0 and back.is_contiguous()
    expect = np.lib.stride_tricks.as_strided(np.arange(24, dtype=np.float32)[3:], (3, 4), (24, 4))
    np.testing.assert_array_equal(np.asarray(back), expect)
    assert back.base.numel() == 12  # only the view's elements


def test_mapped_storage_pickles_by_value(tmp_path):
    path = tmp_path / "m.bin"
    m = genesis.MappedStorage(str(path), (4,), genesis.int64, mode="w+")
    m.copy_(genesis.create_storage([1, 2, 3, 4]))
    back = pickle.loads(pickle.dumps(m))
    assert type(back) is genesis.Storage
    assert back.tolist() == [1, 2, 3, 4]


def test_shared_storage_still_pickles_by_name():
    s = genesis.SharedStorage((4,), genesis.float32)
    try:
        back = pickle.loads(pickle.dumps(s))
        assert isinstance(back, genesis.SharedStorage)
        assert back.name == s.name
    finally:
        s.unlink()


# --------------------------------------------------------- multiprocessing ---

def _double(t):
    return t * 2


def _sum_parts(parts):
    return genesis.stack(parts).sum(dim=0)


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_multiprocessing_pool_passes_tensors(method):
    if method not in mp.get_all_start_methods():
        pytest.skip(f"no {method} start method here")
    arrays = [np.arange(10, dtype=np.float64) * i for i in range(4)]
    tensors = [genesis.from_numpy(a) for a in arrays]
    tensors[1] = tensors[1][::2]  # a view crosses too
    with mp.get_context(method).Pool(2) as pool:
        doubled = pool.map(_double, tensors)
        total = pool.apply(_sum_parts, ([tensors[0], tensors[2], tensors[3]],))
    np.testing.assert_array_equal(doubled[0].numpy(), arrays[0] * 2)
    np.testing.assert_array_equal(doubled[1].numpy(), arrays[1][::2] * 2)
    np.testing.assert_array_equal(total.numpy(), arrays[0] + arrays[2] + arrays[3])


# ------------------------------------------------------------------- CUDA ---

@requires_cuda
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int64", "bool"])
def test_cuda_round_trip_keeps_the_device(dtype):
    t, ref = make(dtype, (33, 5))
    g = t.to("cuda:0")[:, 1:]
    back = pickle.loads(pickle.dumps(g))
    assert back.device == genesis.device("cuda:0")
    assert as_numpy(back.cpu()).tobytes() == np.ascontiguousarray(ref[:, 1:]).tobytes()
    s = genesis.Storage((8,), genesis.float32, device="cuda:0")
    assert pickle.loads(pickle.dumps(s)).device == genesis.device("cuda:0")


@requires_no_cuda
def test_cuda_pickle_without_a_gpu_is_a_clear_error():
    with pytest.raises(genesis.CudaError, match=r"cuda:1.*t\.cpu\(\)") as info:
        genesis._serialization._rebuild_tensor(b"\x00" * 8, "float32", (2,), "cuda:1")
    assert info.value.code == 100
    with pytest.raises(genesis.CudaError, match="storage of cuda:0"):
        genesis._serialization._rebuild_storage(b"\x00" * 8, "float32", (2,), "cuda:0")


@requires_cuda
def test_cuda_pickle_for_a_missing_device_is_a_clear_error():
    missing = genesis.cuda.device_count()
    with pytest.raises(genesis.CudaError, match=f"cuda:{missing}"):
        genesis._serialization._rebuild_tensor(b"\x00" * 8, "float32", (2,), f"cuda:{missing}")

