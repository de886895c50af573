"""Long tensor operations run without the GIL (Note [GIL release] in
python/src/py_gil.h): another Python thread makes progress while one runs.

How it is measured, without depending on how fast the machine is: a worker
thread stamps the time just before and just after one large operation (one
C++ call); the main thread spins, stamping every iteration. While a call
holds the GIL no other thread runs Python, so with the GIL held no main-thread
stamp can fall inside the call (beyond the switch interval, set to 0.1 ms,
after the start stamp). Each operation is sized first so that it takes at
least MIN_OP_S on this machine; the test then asks for at least MIN_STEPS
main-thread iterations stamped strictly inside the call, MARGIN_S away from
both ends.
"""

import sys
import threading
import time

import numpy as np
import pytest

import genesis

MIN_OP_S = 0.06
MARGIN_S = 0.005
MIN_STEPS = 20
MAX_ELEMENTS = 1 << 25


def _sized(make, run):
    """The smallest power-of-two size whose operation takes >= MIN_OP_S."""
    n = 1 << 18
    while True:
        args = make(n)
        t0 = time.perf_counter()
        run(*args)
        if time.perf_counter() - t0 >= MIN_OP_S or n >= MAX_ELEMENTS:
            return args
        n *= 2


def _steps_during(run, args):
    """Main-thread iterations stamped inside one call of run(*args) on a worker thread."""
    stamps, window, done = [], [], threading.Event()

    def worker():
        t0 = time.perf_counter()
        run(*args)
        window.extend((t0, time.perf_counter()))
        done.set()

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)
    try:
        t = threading.Thread(target=worker)
        t.start()
        while not done.is_set():
            stamps.append(time.perf_counter())
        t.join()
    finally:
        sys.setswitchinterval(old)
    t0, t1 = window
    if t1 - t0 < 4 * MARGIN_S:
        pytest.skip(f"the operation took only {t1 - t0:.4f} s even at {MAX_ELEMENTS} elements")
    return sum(1 for s in stamps if t0 + MARGIN_S < s < t1 - MARGIN_S), t1 - t0


def _x(n):
    return (genesis.arange(n, dtype=genesis.float64) * 1e-6,)


CASES = {
    "unary sin": (_x, lambda x: genesis.sin(x)),
    "binary pow": (lambda n: (_x(n)[0], genesis.full((n,), 1.5, dtype=genesis.float64)), lambda a, b: a ** b),
    "in-place pow_": (_x, lambda x: x.pow_(1.0000001)),
    "reduction over a strided view": (lambda n: (_x(n)[0].reshape(-1, 64).t(),), lambda x: x.sum(dim=1)),
    "copy to a new dtype": (_x, lambda x: x.to(genesis.float16)),
    "contiguous copy of a transpose": (lambda n: (_x(n)[0].reshape(-1, 256).t(),), lambda x: x.contiguous()),
    "creation (randn)": (lambda n: (n,), lambda n: genesis.randn(n, dtype=genesis.float64)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_other_threads_progress_during_a_long_operation(name):
    make, run = CASES[name]
    args = _sized(make, run)
    steps, seconds = _steps_during(run, args)
    assert steps >= MIN_STEPS, (f"{name}: the main thread ran {steps} iterations during a {seconds:.3f} s "
                                f"operation: the operation held the GIL")


def test_results_are_unchanged_without_the_gil():
    # Large enough to run without the GIL and on several threads; compared
    # with NumPy, so releasing the GIL changed nothing that is computed.
    a = np.linspace(-3, 3, 1 << 17)
    x = genesis.from_numpy(a)
    np.testing.assert_allclose(genesis.sin(x).numpy(), np.sin(a), rtol=1e-12)
    np.testing.assert_allclose(float((x * x).sum()), float((a * a).sum()), rtol=1e-12)
    np.testing.assert_array_equal(x.reshape(-1, 128).t().contiguous().numpy(), a.reshape(-1, 128).T)
    y = x.clone()
    y.mul_(2.0)
    np.testing.assert_array_equal(y.numpy(), a * 2)


def test_errors_inside_a_released_operation_are_raised():
    # The GIL is re-taken before the C++ error becomes a Python exception.
    a = genesis.ones(1 << 17)
    b = genesis.ones(1 << 16)
    with pytest.raises(ValueError):
        a + b
    with pytest.raises(IndexError):
        a.sum(dim=3)
