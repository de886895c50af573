"""Storages used from several Python threads at once: copies release the GIL,
one storage may be read, copied and closed concurrently, and every block is
back in the pool afterwards."""

import threading

import pytest

np = pytest.importorskip("numpy", reason="NumPy (python3-numpy) is not installed")

import genesis  # noqa: E402
from conftest import HAS_CUDA  # noqa: E402

THREADS, ROUNDS = 4, 200


def _run(target, *args):
    errors, barrier = [], threading.Barrier(THREADS)

    def body(i):
        try:
            barrier.wait()
            target(i, *args)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_concurrent_create_copy_free(host):
    before = host.memory_allocated()
    devices = ["cpu"] + (["cuda"] if HAS_CUDA else [])

    def work(i):
        for r in range(ROUNDS):
            device = devices[r % len(devices)]
            s = genesis.create_storage(np.full(1000 + i, r, dtype=np.int32), device=device)
            c = s.clone().to("cpu")
            f = genesis.convert_dtype(c, genesis.float64)
            assert f.numpy()[0] == r and len(f) == 1000 + i
            del s, c, f

    _run(work)
    assert host.memory_allocated() == before


def test_shared_source_and_concurrent_close(host):
    src = genesis.create_storage(np.arange(100_000, dtype=np.float32))
    shm = genesis.SharedStorage((100_000,), genesis.float32)
    shm.copy_(src)

    def work(i):
        for r in range(ROUNDS // 4):
            if i == 0 and r == ROUNDS // 8:
                shm.close()  # others may be copying from it right now
            try:
                out = genesis.Storage((100_000,), genesis.float32)
                out.copy_(shm)
                assert float(out.numpy()[-1]) == 99_999.0
            except ValueError as e:  # after close: a clean error, never a crash
                assert "closed" in str(e)

    _run(work)
    assert shm.closed
