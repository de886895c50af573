"""Shared fixtures of the genesis Python tests.

Run from the repository root after building:
    PYTHONPATH=build/python /usr/bin/python3 -m pytest -q python/tests
GPU tests skip with a reason when genesis.cuda.is_available() is False.
"""

import pytest

try:
    import genesis
except ImportError as e:  # pragma: no cover - only without a build
    raise ImportError(f"cannot import genesis ({e}); build first and run with PYTHONPATH=build/python") from e

try:
    from hypothesis import HealthCheck, settings

    # No example database on disk (CI trees stay clean); no deadline: the
    # machine is shared and timings vary.
    settings.register_profile("genesis", database=None, deadline=None, max_examples=150,
                              suppress_health_check=[HealthCheck.function_scoped_fixture])
    settings.load_profile("genesis")
except ImportError:  # pragma: no cover - hypothesis tests skip themselves
    pass

HAS_CUDA = genesis.cuda.is_available()
requires_cuda = pytest.mark.skipif(not HAS_CUDA, reason="no CUDA GPU: genesis.cuda.is_available() is False")
requires_no_cuda = pytest.mark.skipif(HAS_CUDA, reason="checks the behaviour without a GPU")

MiB = 1 << 20


@pytest.fixture
def host():
    """The CPU device with an empty cache and fresh statistics; restores the
    host allocator's limits afterwards."""
    cpu = genesis.device("cpu")
    cpu.empty_cache()
    cpu.reset_memory_stats()
    yield cpu
    cpu.set_cache_size(None)
    cpu.set_memory_fraction(1.0)
    cpu.empty_cache()


@pytest.fixture
def sim():
    """A caching allocator over a simulated 1 GiB GPU."""
    return genesis.testing.SimulatedAllocator("1GiB")


@pytest.fixture
def cuda0():
    if not HAS_CUDA:
        pytest.skip("no CUDA GPU: genesis.cuda.is_available() is False")
    d = genesis.device("cuda:0")
    d.empty_cache()
    d.reset_memory_stats()
    yield d
    d.set_cache_size(None)
    d.set_memory_fraction(1.0)
    d.empty_cache()


@pytest.fixture(autouse=True)
def _no_global_sessions_leak():
    """Profiling / debugging switched on by a test must not outlive it."""
    yield
    genesis.enable_memory_profiling(False)
    genesis.enable_memory_debugging(False)
