"""genesis.MappedStorage: memory-mapped files with numpy.memmap's
modes r, r+, w+, c; data written survives the process."""

import ctypes
import errno
import os
import subprocess
import sys

import pytest

np = pytest.importorskip("numpy", reason="NumPy (python3-numpy) is not installed")

import genesis  # noqa: E402

CHILD_ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))


def test_w_plus_creates_and_another_process_reads(tmp_path):
    path = tmp_path / "data.bin"
    m = genesis.MappedStorage(path, (4, 5), genesis.float64, mode="w+")
    assert isinstance(m, genesis.Storage) and not m.readonly
    assert m.shape == (4, 5) and m.dtype is genesis.float64 and m.nbytes == 160
    assert m.filename == str(path) and m.mode == "w+" and m.offset == 0
    a = m.numpy()
    assert a.ctypes.data == m.data_ptr
    a[:] = np.arange(20).reshape(4, 5) * 0.5
    m.flush()
    m.close()
    assert m.closed
    assert os.path.getsize(path) == 160
    child = ("import sys, genesis, numpy as np; "
             "m = genesis.MappedStorage(sys.argv[1], (4, 5), genesis.float64); print(float(np.asarray(m).sum()))")
    out = subprocess.run([sys.executable, "-c", child, str(path)], env=CHILD_ENV, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert float(out.stdout) == sum(i * 0.5 for i in range(20))
    np.testing.assert_array_equal(np.fromfile(path, dtype=np.float64).reshape(4, 5), a)


def test_data_written_by_a_child_process_survives_it(tmp_path):
    path = tmp_path / "child.bin"
    child = ("import sys, genesis; m = genesis.MappedStorage(sys.argv[1], (3,), 'int32', mode='w+'); "
             "m.copy_(genesis.create_storage([7, 8, 9])); m.close()")
    out = subprocess.run([sys.executable, "-c", child, str(path)], env=CHILD_ENV, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert genesis.MappedStorage(path, (3,), genesis.int32).tolist() == [7, 8, 9]


def test_mode_r_is_read_only(tmp_path):
    path = tmp_path / "ro.bin"
    np.arange(6, dtype=np.int16).tofile(path)
    m = genesis.MappedStorage(path, (2, 3), genesis.int16)  # mode 'r' by default
    assert m.readonly and m.mode == "r"
    a = np.asarray(m)
    assert not a.flags.writeable and a.tolist() == [[0, 1, 2], [3, 4, 5]]
    with pytest.raises(ValueError):
        a[0, 0] = 1  # NumPy refuses: the pages are read-only
    with pytest.raises(ValueError, match="read-only"):
        m.copy_(genesis.create_storage([1, 2, 3, 4, 5, 6], dtype="int16"))
    with pytest.raises(ValueError, match="read-only"):
        genesis.copy_storage(genesis.create_storage([1, 2, 3, 4, 5, 6]), m)
    with pytest.raises(ValueError, match="read-only"):
        genesis.BatchStorage([genesis.create_storage([1, 2, 3, 4, 5, 6], dtype="int16")]).batch_copy([m])
    with pytest.raises(TypeError, match="not writable"):
        ctypes.c_char.from_buffer(m)  # asks for a writable buffer, which the export refuses
    assert memoryview(m).readonly
    c = m.clone()  # a writable copy
    assert not c.readonly and c.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert repr(m) == f"genesis.MappedStorage('{path}', shape=(2, 3), dtype=genesis.int16, mode='r')"
    m.flush()  # a no-op in mode r
    m.close()


def test_r_plus_writes_through_and_c_does_not(tmp_path):
    path = tmp_path / "rw.bin"
    np.zeros(4, dtype=np.float32).tofile(path)
    with genesis.MappedStorage(path, (4,), genesis.float32, mode="r+") as m:
        np.asarray(m)[:] = [1, 2, 3, 4]
    assert m.closed
    assert np.fromfile(path, dtype=np.float32).tolist() == [1, 2, 3, 4]
    with genesis.MappedStorage(path, (4,), genesis.float32, mode="c") as c:
        np.asarray(c)[:] = -1
        assert c.tolist() == [-1, -1, -1, -1]
        c.flush()  # nothing to save in copy-on-write mode
    assert np.fromfile(path, dtype=np.float32).tolist() == [1, 2, 3, 4]


def test_shape_none_offset_and_errors(tmp_path):
    path = tmp_path / "f.bin"
    np.arange(10, dtype=np.int32).tofile(path)
    whole = genesis.MappedStorage(path, None, genesis.int32)
    assert whole.shape == (10,) and whole.tolist() == list(range(10))
    tail = genesis.MappedStorage(str(path), dtype=genesis.int32, offset=8)
    assert tail.shape == (8,) and tail.tolist() == list(range(2, 10))
    odd = genesis.MappedStorage(path, (2,), genesis.int32, offset=6)  # unaligned offsets work
    assert odd.offset == 6 and odd.nbytes == 8
    with pytest.raises(ValueError, match="not a multiple"):
        genesis.MappedStorage(path, None, genesis.int32, offset=2)
    with pytest.raises(ValueError, match="needs a shape"):
        genesis.MappedStorage(tmp_path / "new.bin", None, genesis.int32, mode="w+")
    with pytest.raises(ValueError):
        genesis.MappedStorage(path, (11,), genesis.int32)  # longer than the file
    # A file that cannot be opened raises what open() and numpy.memmap raise.
    with pytest.raises(FileNotFoundError, match="cannot open .*missing.bin.* No such file") as info:
        genesis.MappedStorage(tmp_path / "missing.bin", (1,), genesis.int32)
    assert info.value.errno == errno.ENOENT and info.value.cpp_location
    with pytest.raises(IsADirectoryError):
        genesis.MappedStorage(tmp_path, (1,), genesis.int32, mode="w+")
    with pytest.raises(FileNotFoundError):  # the whole file, as numpy.memmap raises it
        genesis.MappedStorage(tmp_path / "missing.bin", None, genesis.int32)
    with pytest.raises(ValueError, match="not a regular file \\(a directory\\)"):
        genesis.MappedStorage(tmp_path, (1,), genesis.int32, mode="r")
    with pytest.raises(ValueError, match="mode"):
        genesis.MappedStorage(path, (1,), genesis.int32, mode="x")
    with pytest.raises(ValueError):
        genesis.MappedStorage(path, (1,), genesis.int32, offset=-1)
    with pytest.raises(TypeError):
        genesis.MappedStorage(12345, (1,), genesis.int32)


def test_fifo_is_refused_at_once(tmp_path):
    # Opening a FIFO for reading waits for a writer; the check must come
    # first. A child process, so that a hang fails the test instead of
    # stopping the suite.
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    code = (
        "import genesis, sys\n"
        "for mode in ('r', 'r+', 'c', 'w+'):\n"
        "    try:\n"
        f"        genesis.MappedStorage({str(fifo)!r}, (4,), genesis.uint8, mode=mode)\n"
        "    except ValueError as e:\n"
        "        assert 'is not a regular file (a FIFO)' in str(e), e\n"
        "    else:\n"
        "        sys.exit('mapped a FIFO')\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30, env=CHILD_ENV)
    assert p.returncode == 0, p.stderr


def test_close_keeps_arrays_valid_and_flushes(tmp_path):
    path = tmp_path / "keep.bin"
    m = genesis.MappedStorage(path, (1000,), genesis.uint8, mode="w+")
    a = m.numpy()
    a[:] = 9
    m.close()
    m.close()
    with pytest.raises(ValueError, match="closed"):
        m.flush()
    with pytest.raises(ValueError, match="closed"):
        m.tolist()
    assert int(a.sum()) == 9000  # the mapping lives while the array does
    a[0] = 10
    del a  # the last user: flushed and unmapped now
    data = np.fromfile(path, dtype=np.uint8)
    assert data[0] == 10 and int(data.sum()) == 9001


def test_numpy_memmap_conventions(tmp_path):
    # r+ grows a short file with zeros, long mode names are taken, and an
    # open file object maps the file it names: as numpy.memmap does.
    path = tmp_path / "grow.bin"
    path.write_bytes(bytes(range(10)))
    with genesis.MappedStorage(path, (16,), genesis.uint8, mode="readwrite") as m:
        assert m.mode == "r+"
        assert np.asarray(m).tolist() == list(range(10)) + [0] * 6
    ref = tmp_path / "ref.bin"
    ref.write_bytes(bytes(range(10)))
    np.memmap(ref, np.uint8, "r+", shape=(16,)).flush()
    assert path.read_bytes() == ref.read_bytes()
    for long, short in (("readonly", "r"), ("copyonwrite", "c")):
        with genesis.MappedStorage(path, (4,), genesis.uint8, mode=long) as m:
            assert m.mode == short and np.asarray(m).tolist() == [0, 1, 2, 3]
    with open(path, "rb") as f:
        with genesis.MappedStorage(f, None, genesis.uint8) as m:
            assert m.filename == str(path) and m.nbytes == 16
    with pytest.raises(ValueError, match="needs a shape"):
        genesis.MappedStorage(tmp_path / "new.bin", None, genesis.uint8, mode="write")
