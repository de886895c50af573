"""DLPack exchange: zero copy with NumPy in CI; with PyTorch and
CuPy where they are importable (CPU and GPU variants; GPU ones skip without
a GPU)."""

import ctypes
import gc

import numpy as np
import pytest

import genesis as g
from conftest import HAS_CUDA

NP_DTYPES = [np.uint8, np.int8, np.int16, np.int32, np.int64, np.float16, np.float32, np.float64]


def _capsule_name(capsule):
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype = ctypes.c_char_p
    get_name.argtypes = [ctypes.py_object]
    return get_name(capsule).decode()


def test_dlpack_device():
    assert g.zeros(2).__dlpack_device__() == (1, 0)  # kDLCPU


def test_capsule_kinds():
    x = g.zeros(2, 3)
    assert _capsule_name(x.__dlpack__()) == "dltensor"
    assert _capsule_name(x.__dlpack__(max_version=(1, 0))) == "dltensor_versioned"
    assert _capsule_name(x.__dlpack__(max_version=(0, 8))) == "dltensor"
    with pytest.raises(BufferError):
        x.__dlpack__(stream=1)  # CPU tensors take no stream


@pytest.mark.parametrize("bad", ["a", 1, (1,), (1, "0"), [1, 0], (True, 0)])
def test_malformed_dlpack_versions_and_devices_are_type_errors(bad):
    x = g.zeros(2)
    with pytest.raises(TypeError, match=r"^__dlpack__: max_version must be a tuple \(major, minor\) or None, got "):
        x.__dlpack__(max_version=bad)
    with pytest.raises(TypeError, match=r"^__dlpack__: dl_device must be a tuple \(device_type, device_id\) or None"):
        x.__dlpack__(dl_device=bad)
    assert _capsule_name(x.__dlpack__(max_version=None, dl_device=(1, 0))) == "dltensor"


def test_unconsumed_capsules_free_their_tensor():
    cpu = g.device("cpu")
    x = g.zeros(1000)
    base = cpu.memory_allocated()
    caps = [x.__dlpack__(), x.__dlpack__(max_version=(1, 0))]
    del x
    assert cpu.memory_allocated() == base  # the capsules hold it
    del caps
    gc.collect()
    assert cpu.memory_allocated() == base - 4096 or cpu.memory_allocated() < base


@pytest.mark.parametrize("npdt", NP_DTYPES)
def test_numpy_from_genesis_zero_copy(npdt):
    x = g.arange(12).view(3, 4).to(g.dtype(np.dtype(npdt).name))
    a = np.from_dlpack(x)
    assert a.dtype == npdt and a.shape == (3, 4) and a.ctypes.data == x.data_ptr()
    x[0, 0] = 7  # NumPy < 2 marks DLPack imports read-only: write through the tensor
    assert a[0, 0] == 7
    del x
    gc.collect()
    assert a[2, 3] == 11  # the array keeps the memory


def test_numpy_from_genesis_strided():
    x = g.arange(24).view(4, 6)
    for t in (x.T, x[::2, 1::2], x[:, ::-1]):
        a = np.from_dlpack(t)
        assert np.array_equal(a, t.numpy())
        assert a.ctypes.data == t.data_ptr()


@pytest.mark.parametrize("npdt", NP_DTYPES)
def test_genesis_from_numpy_zero_copy(npdt):
    a = (np.arange(12) % 7).astype(npdt).reshape(3, 4)
    t = g.from_dlpack(a)
    assert t.dtype is g.dtype(np.dtype(npdt).name) and t.shape == (3, 4) and t.data_ptr() == a.ctypes.data
    t[1, 1] = 3
    assert a[1, 1] == 3
    del a
    gc.collect()
    assert t[2, 3].item() == 11 % 7  # the tensor keeps NumPy's memory


def test_genesis_from_numpy_strided():
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    for v in (a.T, a[::2, 1::2], a[::-1]):
        t = g.from_dlpack(v)
        assert np.array_equal(t.numpy(), v) and t.data_ptr() == v.ctypes.data


def test_from_dlpack_capsules_directly():
    x = g.arange(5)
    for cap in (x.__dlpack__(), x.__dlpack__(max_version=(1, 0))):
        y = g.from_dlpack(cap)
        assert y.data_ptr() == x.data_ptr() and y.tolist() == [0, 1, 2, 3, 4]
        assert _capsule_name(cap).startswith("used_")
        with pytest.raises(ValueError):
            g.from_dlpack(cap)  # consumed
    assert g.from_dlpack(x) is not None


def test_round_trip_genesis_genesis():
    x = g.tensor([[1.5, 2.5]], dtype=g.bfloat16)
    y = g.from_dlpack(x.__dlpack__(max_version=(1, 0)))
    assert y.dtype is g.bfloat16 and y.data_ptr() == x.data_ptr()
    z = g.from_dlpack(g.tensor([True, False]).__dlpack__())
    assert z.dtype is g.bool and z.tolist() == [True, False]


def test_from_dlpack_errors():
    with pytest.raises(TypeError):
        g.from_dlpack(object())
    with pytest.raises(TypeError):
        g.from_dlpack(np.zeros(2, np.complex64))


def test_copy_and_device_arguments():
    x = g.arange(3)
    c = g.from_dlpack(x.__dlpack__(max_version=(1, 0), copy=True))
    assert c.data_ptr() != x.data_ptr() and c.tolist() == [0, 1, 2]
    same = g.from_dlpack(x.__dlpack__(max_version=(1, 0), dl_device=(1, 0)))
    assert same.data_ptr() == x.data_ptr()


# ------------------------------------------------------ PyTorch / CuPy ---
def test_torch_cpu_exchange():
    torch = pytest.importorskip("torch")
    x = g.arange(6).view(2, 3).float()
    t = torch.from_dlpack(x)
    assert t.data_ptr() == x.data_ptr() and t.shape == (2, 3)
    t[0, 0] = 5
    assert x[0, 0].item() == 5
    tt = torch.arange(6, dtype=torch.float32).reshape(2, 3).t()
    y = g.from_dlpack(tt)
    assert y.data_ptr() == tt.data_ptr() and y.strides == tuple(tt.stride())
    assert np.array_equal(y.numpy(), tt.numpy())


@pytest.mark.skipif(not HAS_CUDA, reason="no CUDA GPU")
def test_torch_cuda_exchange():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    x = g.arange(6, device="cuda").view(2, 3)
    assert x.__dlpack_device__() == (2, 0)
    t = torch.from_dlpack(x)
    assert t.is_cuda and t.data_ptr() == x.data_ptr()
    assert t.cpu().tolist() == [[0, 1, 2], [3, 4, 5]]
    tt = torch.arange(8, device="cuda", dtype=torch.float32).reshape(2, 4)
    y = g.from_dlpack(tt)
    assert y.device.type == "cuda" and y.data_ptr() == tt.data_ptr()
    assert y.cpu().tolist() == tt.cpu().tolist()


@pytest.mark.skipif(not HAS_CUDA, reason="no CUDA GPU")
def test_cupy_exchange():
    cp = pytest.importorskip("cupy")
    x = g.arange(6, device="cuda").view(2, 3)
    c = cp.from_dlpack(x)
    assert c.data.ptr == x.data_ptr() and c.shape == (2, 3)
    assert cp.asnumpy(c).tolist() == [[0, 1, 2], [3, 4, 5]]
    cc = cp.arange(10, dtype=cp.float32)[::2]
    y = g.from_dlpack(cc)
    assert y.device.type == "cuda" and y.data_ptr() == cc.data.ptr and y.strides == (2,)
    assert y.cpu().tolist() == cp.asnumpy(cc).tolist()
