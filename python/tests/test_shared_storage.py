"""genesis.SharedStorage: POSIX shared memory, created or attached
by name, shared between real processes (subprocess and multiprocessing with
the 'spawn' start method)."""

import multiprocessing
import os
import pickle
import subprocess
import sys
import uuid

import pytest

np = pytest.importorskip("numpy", reason="NumPy (python3-numpy) is not installed")

import genesis  # noqa: E402

# Children import genesis from the same build as the tests.
CHILD_ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))


def unique_name():
    return f"genesis-test-{os.getpid()}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def name():
    n = unique_name()
    yield n
    # A test that failed half-way must not leave a /dev/shm entry behind.
    path = f"/dev/shm/{n}"
    if os.path.exists(path):
        os.unlink(path)


def test_unnamed_segment(host):
    before = host.memory_allocated()
    s = genesis.SharedStorage((4, 8), genesis.float32)
    assert isinstance(s, genesis.Storage)
    assert s.name.startswith("/genesis-") and s.is_owner and s.auto_unlink
    assert s.shape == (4, 8) and s.dtype is genesis.float32 and s.device == genesis.device("cpu")
    assert s.nbytes == 128 and not s.is_pooled()
    assert host.memory_allocated() == before  # not from the host pool
    a = s.numpy()
    a[:] = 2.0
    assert a.ctypes.data == s.data_ptr
    assert os.path.exists("/dev/shm" + s.name)
    name = s.name
    del a, s
    assert not os.path.exists("/dev/shm" + name)  # unnamed: unlinked with its creator


def test_attach_in_the_same_process_sees_the_same_memory(name):
    a = genesis.SharedStorage((16,), genesis.int64, name)
    assert a.name == "/" + name and a.is_owner and not a.auto_unlink
    b = genesis.SharedStorage((16,), genesis.int64, "/" + name)  # with or without the '/'
    assert not b.is_owner
    np.asarray(a)[:] = np.arange(16)
    assert b.tolist() == list(range(16))
    assert b.data_ptr != a.data_ptr  # two mappings of one segment
    with pytest.raises(ValueError, match="has 128 bytes but"):
        genesis.SharedStorage.attach(name, (17,), genesis.int64)
    with pytest.raises(ValueError, match="already exists"):
        genesis.SharedStorage.create(name, (16,), genesis.int64)
    assert a.unlink() is True
    assert b.unlink() is False  # already gone: not an error
    with pytest.raises(ValueError, match="does not exist"):
        genesis.SharedStorage.attach(name, (16,), genesis.int64)
    assert b.tolist() == list(range(16))  # mappings stay valid after unlink


def test_close_keeps_exported_arrays_valid(name):
    s = genesis.SharedStorage((1000,), genesis.float64, name)
    try:
        a = s.numpy()
        a[:] = 1.5
        s.close()
        s.close()  # idempotent
        assert s.closed and s.use_count == 0
        with pytest.raises(ValueError, match="closed"):
            s.shape
        with pytest.raises(ValueError, match="closed"):
            s.numpy()
        with pytest.raises(BufferError, match="closed"):
            memoryview(s)
        with pytest.raises(ValueError, match="closed"):
            pickle.dumps(s)
        assert "closed" in repr(s)
        assert float(a.sum()) == 1500.0  # still mapped: the array holds it
    finally:
        s.unlink()


def test_context_manager_and_storage_operations(name):
    with genesis.SharedStorage((3,), genesis.int32, name) as s:
        s.copy_(genesis.create_storage([7, 8, 9]))
        c = s.clone()
        assert type(c) is genesis.Storage and c.tolist() == [7, 8, 9]
        assert s.to("cpu") is s
        assert genesis.inspect_storage(s).nbytes == 12
    assert s.closed
    assert s.unlink()


@pytest.mark.parametrize("bad", ["a/b", "", "/", "..", "x" * 300, "nul\0name"])
def test_invalid_names(bad):
    with pytest.raises(ValueError, match="name"):
        genesis.SharedStorage((1,), genesis.uint8, bad)


@pytest.mark.parametrize("bad", [5, b"bytes", 1.5, ["x"]])
def test_names_must_be_strings(bad):
    with pytest.raises(TypeError):
        genesis.SharedStorage((1,), genesis.uint8, bad)
    if not isinstance(bad, bytes):  # pybind11 reads bytes as a std::string there
        with pytest.raises(TypeError):
            genesis.SharedStorage.attach(bad, (1,), genesis.uint8)


def test_pickle_attaches_by_name(name):
    s = genesis.SharedStorage((2,), genesis.int16, name)
    try:
        np.asarray(s)[:] = [3, 4]
        t = pickle.loads(pickle.dumps(s))
        assert type(t) is genesis.SharedStorage and t.name == s.name and not t.is_owner
        assert t.tolist() == [3, 4]
    finally:
        s.unlink()


CHILD = r"""
import sys, numpy as np, genesis
name = sys.argv[1]
s = genesis.SharedStorage((100,), genesis.float32, name)
a = np.asarray(s)
print(float(a.sum()))
a[:] = np.arange(100, dtype=np.float32) * 2
s.close()
"""


def test_two_processes_share_memory(name):
    s = genesis.SharedStorage((100,), genesis.float32, name)
    try:
        np.asarray(s)[:] = 1.0
        out = subprocess.run([sys.executable, "-c", CHILD, name], env=CHILD_ENV, capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 0, out.stderr
        assert float(out.stdout) == 100.0  # the child saw the parent's writes
        np.testing.assert_array_equal(s.numpy(), np.arange(100, dtype=np.float32) * 2)  # and we see the child's
    finally:
        s.unlink()


def _spawned_child(shared, queue):
    # Runs in a fresh interpreter (spawn): `shared` arrived pickled, attached by name.
    a = np.asarray(shared)
    queue.put(int(a.sum()))
    a[:] = -1


def test_multiprocessing_spawn_passes_a_shared_storage(name):
    s = genesis.SharedStorage((10,), genesis.int64, name)
    try:
        np.asarray(s)[:] = np.arange(10)
        ctx = multiprocessing.get_context("spawn")
        queue = ctx.Queue()
        old = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = CHILD_ENV["PYTHONPATH"]
        try:
            p = ctx.Process(target=_spawned_child, args=(s, queue))
            p.start()
            got = queue.get(timeout=120)
            p.join(120)
        finally:
            if old is None:
                del os.environ["PYTHONPATH"]
            else:
                os.environ["PYTHONPATH"] = old
        assert p.exitcode == 0
        assert got == 45
        assert s.tolist() == [-1] * 10
    finally:
        s.unlink()
