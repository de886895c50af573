"""Bindings under concurrent use from Python threads: the GIL is released
around waiting calls, and statistics, profiling and leak checks stay exact."""

import threading

import genesis
from conftest import MiB
from genesis.testing import SimulatedAllocator

THREADS, ROUNDS = 4, 500


def _worker(sim, errors, barrier):
    try:
        barrier.wait()
        for i in range(ROUNDS):
            p = sim.allocate((i % 7 + 1) * 4096)
            q = sim.allocate(2 * MiB)
            sim.free(p)
            sim.free(q)
            if i % 100 == 0:
                sim.memory_stats()
                sim.memory_snapshot()
    except Exception as e:  # pragma: no cover - reported by the assertion below
        errors.append(e)


def test_concurrent_allocations_keep_exact_counts():
    sim = SimulatedAllocator("4GiB")
    errors, barrier = [], threading.Barrier(THREADS)
    with genesis.profiler.profile_memory() as prof:
        threads = [threading.Thread(target=_worker, args=(sim, errors, barrier)) for _ in range(THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors
    stats = sim.memory_stats()
    assert stats.num_allocations == stats.num_frees == THREADS * ROUNDS * 2
    assert stats.allocated_bytes == 0
    report = prof.report().devices[sim.label]
    assert report.num_allocs == report.num_frees == THREADS * ROUNDS * 2
    assert report.end_allocated == 0
    sim.empty_cache()
    assert sim.memory_reserved() == 0


def test_empty_cache_while_other_threads_allocate():
    sim = SimulatedAllocator("1GiB")
    stop = threading.Event()
    errors = []

    def churn():
        try:
            while not stop.is_set():
                sim.free(sim.allocate(MiB))
        except Exception as e:  # pragma: no cover
            errors.append(e)

    t = threading.Thread(target=churn)
    t.start()
    try:
        for _ in range(200):
            sim.empty_cache()
            genesis.memory_manager.compact(device=sim)
    finally:
        stop.set()
        t.join()
    assert not errors
    assert sim.memory_allocated() == 0
