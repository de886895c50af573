#!/usr/bin/env python3
"""Python-level overhead of Genesis tensors: what a call costs before any kernel runs.

Times, per call, in microseconds (best of several repeats, like timeit):
  * allocation round trip: `x = empty(n, device=dev); del x` for Genesis,
    PyTorch and CuPy (goal for Genesis: <= 0.8 us on the GPU machine; PyTorch
    about 2.0 us, CuPy about 1.7 us there: bench/RESULTS.md, "Python overhead");
  * a small element-wise op: `x + y` on 1000-element float32 tensors, plus
    the op and the result's release (GPU: launch cost; synchronised once per
    batch, so queued kernels do not pile up).
PyTorch and CuPy are timed in the same run when importable; missing ones are
reported as such. Without a GPU (or with --device cpu) everything runs on
the host.

    PYTHONPATH=build/python python3 python/bench/bench_python.py [--device cuda] [--n 1024]
"""

import argparse
import timeit

import genesis


def best_us(stmt, env, number, repeat=7, sync=None):
    """Best per-call time in microseconds over `repeat` batches of `number`."""
    timer = timeit.Timer(stmt, globals=env)
    best = float("inf")
    for _ in range(repeat):
        t = timer.timeit(number)
        if sync is not None:
            sync()
        best = min(best, t / number * 1e6)
    return best


def try_import(name):
    try:
        return __import__(name)
    except Exception:  # noqa: BLE001 - any failure means "not available"
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda" if genesis.cuda.is_available() else "cpu")
    ap.add_argument("--n", type=int, default=1024, help="elements per empty() (default 1024)")
    ap.add_argument("--number", type=int, default=200_000, help="calls per timing batch")
    args = ap.parse_args()
    dev = args.device
    cuda = dev.startswith("cuda")
    rows = []  # (benchmark, library, us or None, note)

    # ------------------------------------------------ empty + del round trip ---
    empty = genesis.empty
    genesis.empty(args.n, device=dev)  # warm the pool and the device-string cache
    rows.append(("empty+del", "genesis",
                 best_us("x = empty(n, device=dev); del x", {"empty": empty, "n": args.n, "dev": dev}, args.number),
                 dev))

    torch = try_import("torch")
    if torch is not None and (not cuda or torch.cuda.is_available()):
        torch.empty(args.n, device=dev)
        rows.append(("empty+del", "torch",
                     best_us("x = empty(n, device=dev); del x", {"empty": torch.empty, "n": args.n, "dev": dev},
                             args.number), torch.__version__))
    else:
        rows.append(("empty+del", "torch", None, "not importable" if torch is None else "no CUDA in torch"))

    cupy = try_import("cupy") if cuda else None
    if cupy is not None:
        cupy.empty(args.n)
        rows.append(("empty+del", "cupy",
                     best_us("x = empty(n); del x", {"empty": cupy.empty, "n": args.n}, args.number),
                     cupy.__version__))
    else:
        rows.append(("empty+del", "cupy", None, "not importable" if cuda else "GPU only"))

    # --------------------------------------------------- x + y, 1000 elements ---
    number = max(1000, args.number // 10)
    x = genesis.rand(1000, device=dev) if not cuda else genesis.ones(1000, device=dev)
    y = genesis.ones(1000, device=dev)
    try:
        x + y
        sync = genesis.cuda.synchronize if cuda else None
        rows.append(("x + y (1000)", "genesis", best_us("z = x + y; del z", {"x": x, "y": y}, number, sync=sync), dev))
    except RuntimeError as e:  # CUDA kernels not there yet
        rows.append(("x + y (1000)", "genesis", None, str(e).split("[")[0].strip()))
    if torch is not None and (not cuda or torch.cuda.is_available()):
        tx = torch.ones(1000, device=dev)
        ty = torch.ones(1000, device=dev)
        sync = torch.cuda.synchronize if cuda else None
        rows.append(("x + y (1000)", "torch", best_us("z = x + y; del z", {"x": tx, "y": ty}, number, sync=sync),
                     torch.__version__))
    if cupy is not None:
        cx = cupy.ones(1000, dtype=cupy.float32)
        cy = cupy.ones(1000, dtype=cupy.float32)
        rows.append(("x + y (1000)", "cupy",
                     best_us("z = x + y; del z", {"x": cx, "y": cy}, number,
                             sync=cupy.cuda.runtime.deviceSynchronize), cupy.__version__))

    # ------------------------------------------------------------- the table ---
    print(f"Genesis Python overhead on {dev} (n = {args.n} for empty; best of 7 batches)")
    print(f"{'benchmark':<14} {'library':<8} {'us/call':>9}  note")
    print("-" * 60)
    for bench, lib, us, note in rows:
        shown = f"{us:9.3f}" if us is not None else f"{'-':>9}"
        print(f"{bench:<14} {lib:<8} {shown}  {note}")
    genesis_rt = next(us for b, lib, us, _ in rows if b == "empty+del" and lib == "genesis")
    goal = 0.8
    print(f"\ngenesis empty+del: {genesis_rt:.3f} us ({'meets' if genesis_rt <= goal else 'misses'} "
          f"the {goal} us goal{'' if cuda else '; the goal is for the GPU machine'})")


if __name__ == "__main__":
    main()
