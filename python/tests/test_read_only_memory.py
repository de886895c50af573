"""Tensors over read-only memory (Note [Read-only memory] in
include/genesis/storage/storage.h): a read-only NumPy array, an array over
`bytes`, a read-only mmap, a DLPack capsule flagged read-only. Reads work;
every write raises ValueError saying that the source is read-only and to pass
a writable copy, instead of crashing (PROT_READ pages) or silently changing an
immutable object (bytes)."""

import ctypes
import gc
import mmap
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import genesis

READ_ONLY = "read-only"


def read_only_sources(tmp_path):
    """(name, array, keep-alive) for each kind of read-only NumPy memory."""
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    a.flags.writeable = False
    raw = np.arange(12, dtype=np.float32).tobytes()
    b = np.frombuffer(raw, dtype=np.float32).reshape(3, 4)
    return [("flag", a, None), ("bytes", b, raw)]


@pytest.fixture(autouse=True)
def collect_garbage():
    """The caught errors' tracebacks form reference cycles through the test
    frames that hold tensors: collect them, so that later tests that count
    allocated bytes start from zero."""
    yield
    gc.collect()


def expect_refused(fn):
    with pytest.raises(ValueError) as e:
        fn()
    msg = str(e.value)
    del e  # the traceback refers back to this frame
    assert READ_ONLY in msg and "source NumPy array is read-only" in msg, msg
    assert "writable copy" in msg, msg


def call_inplace(t, name):
    """Calls the in-place method `name` with the first argument list it takes."""
    fn = getattr(t, name)
    for args in [(), (2,), (genesis.ones(3, 4),), ([0], 1.0)]:
        try:
            fn(*args)
        except TypeError:
            continue
        return
    raise AssertionError(f"{name}: no argument list was accepted")


@pytest.mark.parametrize("kind", ["flag", "bytes"])
def test_reads_work_and_every_write_is_refused(kind, tmp_path):
    _, arr, keep = next(s for s in read_only_sources(tmp_path) if s[0] == kind)
    before = arr.copy()
    t = genesis.from_numpy(arr)
    assert t.is_read_only
    assert t.tolist() == before.tolist()
    assert float(t.sum()) == float(before.sum())
    np.testing.assert_array_equal(np.asarray((t * 2).numpy()), before * 2)
    # Every in-place method the Tensor class has (found by name, so a new
    # one is covered too), operators, item assignment and out=.
    inplace = [n for n in dir(genesis.Tensor) if n.endswith("_") and not n.startswith("_")]
    assert {"add_", "copy_", "fill_", "zero_", "index_put_"} <= set(inplace)
    for name in inplace:
        expect_refused(lambda: call_inplace(t, name))
    for op in ["__iadd__", "__isub__", "__imul__", "__itruediv__", "__ipow__"]:
        expect_refused(lambda: getattr(t, op)(2))

    def setitem(index, value):
        t[index] = value

    expect_refused(lambda: setitem(0, 1.0))
    expect_refused(lambda: setitem((slice(None), 1), genesis.zeros(3)))
    expect_refused(lambda: setitem(t > 3, 0.0))
    expect_refused(lambda: setitem(genesis.tensor([0, 2]), 5.0))
    expect_refused(lambda: setitem(Ellipsis, np.zeros((3, 4), np.float32)))
    expect_refused(lambda: genesis.matmul(genesis.ones(3, 3), genesis.ones(3, 4), out=t))
    # Views share the memory and the refusal.
    for v in [t[1:], t.T, t.view(12), t[:, ::2], t.unsqueeze(0), t.narrow(1, 1, 2), t.reshape(2, 6), t[0]]:
        assert v.is_read_only
        expect_refused(lambda: v.fill_(0))
        expect_refused(lambda: v.add_(1))
    np.testing.assert_array_equal(arr, before)
    if keep is not None:
        assert keep == before.tobytes()  # the bytes object is unchanged
    # A copy is writable.
    c = t.clone()
    assert not c.is_read_only
    c.add_(1)
    assert c.tolist()[0][0] == 1.0


def test_writable_arrays_stay_writable():
    a = np.zeros(4, np.int32)
    t = genesis.from_numpy(a)
    assert not t.is_read_only
    t.add_(3)
    assert a.tolist() == [3, 3, 3, 3]
    assert t.numpy().flags.writeable


def test_numpy_export_of_read_only_tensor_is_read_only():
    raw = bytes(range(16))
    t = genesis.from_numpy(np.frombuffer(raw, dtype=np.uint8))
    for a in [t.numpy(), np.asarray(t), t[2:].numpy()]:
        assert not a.flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            a[0] = 99
    assert raw == bytes(range(16))
    # A round trip keeps the flag: the new tensor is read-only as well.
    assert genesis.from_numpy(t.numpy()).is_read_only


def test_from_numpy_read_only_mmap_in_a_subprocess(tmp_path):
    """Writing over a PROT_READ mapping used to kill the process: run it in a
    child so that a regression is a test failure, not a crashed test run."""
    path = tmp_path / "data.bin"
    path.write_bytes(np.arange(1024, dtype=np.float32).tobytes())
    code = textwrap.dedent(f"""
        import mmap, os, numpy as np, genesis
        fd = os.open({str(path)!r}, os.O_RDONLY)
        m = mmap.mmap(fd, 4096, prot=mmap.PROT_READ)
        t = genesis.from_numpy(np.frombuffer(m, dtype=np.float32))
        assert t.is_read_only and float(t[10]) == 10.0
        for write in (lambda: t.fill_(0), lambda: t.add_(1), lambda: t.__setitem__(0, 5.0),
                      lambda: t[3:].copy_(genesis.zeros(1021)), lambda: t.zero_()):
            try:
                write()
            except ValueError as e:
                assert "read-only" in str(e), e
            else:
                raise SystemExit("a write was not refused")
        assert float(t.sum()) == float(np.arange(1024, dtype=np.float32).sum())
        print("ok")
    """)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)
    assert p.stdout.strip() == "ok"


def test_mapped_storage_mode_r_numpy_to_tensor(tmp_path):
    path = tmp_path / "m.bin"
    path.write_bytes(np.arange(8, dtype=np.int64).tobytes())
    m = genesis.MappedStorage(str(path), (8,), genesis.int64, mode="r")
    t = genesis.from_numpy(m.numpy())
    assert t.is_read_only
    with pytest.raises(ValueError, match="read-only"):
        t.fill_(1)
    assert t.tolist() == list(range(8))


# --- DLPack -------------------------------------------------------------------

class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


DLManagedTensorVersioned._fields_ = [
    ("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
    ("deleter", ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))), ("flags", ctypes.c_uint64),
    ("dl_tensor", DLTensor)]

FLAG_READ_ONLY = 1  # DLPACK_FLAG_BITMASK_READ_ONLY

_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_capsule_ptr = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_ptr.restype = ctypes.c_void_p
_capsule_ptr.argtypes = [ctypes.py_object, ctypes.c_char_p]


def versioned_capsule(buf, n, flags):
    """A DLPack 1.0 capsule over `n` float32 values of the ctypes buffer `buf`
    (no deleter: the test keeps everything alive)."""
    shape = (ctypes.c_int64 * 1)(n)
    m = DLManagedTensorVersioned()
    m.version = DLPackVersion(1, 0)
    m.flags = flags
    m.dl_tensor = DLTensor(ctypes.addressof(buf), DLDevice(1, 0), 1, DLDataType(2, 32, 1), shape, None, 0)
    cap = _capsule_new(ctypes.addressof(m), b"dltensor_versioned", None)
    return cap, (m, shape)


def test_dlpack_read_only_flag_is_respected():
    buf = (ctypes.c_float * 4)(1, 2, 3, 4)
    cap, keep = versioned_capsule(buf, 4, FLAG_READ_ONLY)
    t = genesis.from_dlpack(cap)
    assert t.is_read_only
    assert t.tolist() == [1, 2, 3, 4]
    with pytest.raises(ValueError, match="DLPack tensor .* is read-only"):
        t.add_(1)
    with pytest.raises(ValueError, match="read-only"):
        t[0] = 9
    assert list(buf) == [1, 2, 3, 4]
    # Without the flag the import is writable (and writes land in the buffer).
    cap2, keep2 = versioned_capsule(buf, 4, 0)
    w = genesis.from_dlpack(cap2)
    assert not w.is_read_only
    w.add_(1)
    assert list(buf) == [2, 3, 4, 5]
    del t, w, keep, keep2


def test_dlpack_export_keeps_the_flag():
    raw = np.arange(6, dtype=np.float32).tobytes()
    t = genesis.from_numpy(np.frombuffer(raw, dtype=np.float32))
    cap = t.__dlpack__(max_version=(1, 0))
    managed = DLManagedTensorVersioned.from_address(_capsule_ptr(cap, b"dltensor_versioned"))
    assert managed.flags & FLAG_READ_ONLY
    back = genesis.from_dlpack(cap)
    assert back.is_read_only and back.tolist() == [0, 1, 2, 3, 4, 5]
    # The legacy protocol cannot say read-only: refused, as NumPy does.
    with pytest.raises(BufferError, match="read-only"):
        t.__dlpack__()
    # Writable tensors export without the flag.
    w = genesis.ones(3)
    cap = w.__dlpack__(max_version=(1, 0))
    assert not DLManagedTensorVersioned.from_address(_capsule_ptr(cap, b"dltensor_versioned")).flags & FLAG_READ_ONLY
    assert not genesis.from_dlpack(cap).is_read_only
    # copy=True exports a writable copy.
    cap = t.__dlpack__(max_version=(1, 0), copy=True)
    assert not DLManagedTensorVersioned.from_address(_capsule_ptr(cap, b"dltensor_versioned")).flags & FLAG_READ_ONLY


def test_dlpack_rejects_sizes_that_overflow():
    buf = (ctypes.c_float * 4)()
    cap, keep = versioned_capsule(buf, 4, 0)
    m = keep[0]
    shape = (ctypes.c_int64 * 3)(2**32, 2**32, 2**32)
    m.dl_tensor.ndim = 3
    m.dl_tensor.shape = shape
    with pytest.raises(ValueError, match="more than 2\\^63-1 elements"):
        genesis.from_dlpack(cap)
    cap, keep = versioned_capsule(buf, 4, 0)
    keep[1][0] = -3
    with pytest.raises(ValueError, match="negative dimension"):
        genesis.from_dlpack(cap)
