#!/usr/bin/env python3
"""Cost of allocation-site tracking per allocation from Python.

Times `x = genesis.empty(n); del x` and `x = genesis.zeros(n); del x` on the
host, in microseconds per call (best of several repeats, like timeit), with:
  * off:      memory debugging off (an AllocationSite is one atomic load);
  * sites:    only site capture on (genesis._C.set_capture_locations(True)),
              the cost of naming `--depth` Python frames (Note [Site cache]
              in python/src/py_location.h);
  * debug:    genesis.enable_memory_debugging(True): sites plus event
              recording (time stamps for leak checks, the event rings).
The call is made from a function --frames deep, so that the site walks as
many frames as a real program's would; rows "(calls)" make each allocation
through three fresh Python calls, whose frames are new each time (as in a
program's step functions), rows without it from the same frames.

    PYTHONPATH=build/python python3 python/bench/bench_sites.py [--n 64] [--depth 4] [--frames 6]
"""

import argparse
import timeit

import genesis
from genesis import _C


def best_us(stmt, env, number, repeat=9):
    timer = timeit.Timer(stmt, globals=env)
    return min(timer.timeit(number) / number * 1e6 for _ in range(repeat))


def nested(frames, fn):
    """fn called `frames` Python frames below the caller."""
    if frames <= 1:
        return fn()
    return nested(frames - 1, fn)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=64, help="elements per tensor (float32)")
    parser.add_argument("--depth", type=int, default=4, help="frames one site names")
    parser.add_argument("--frames", type=int, default=6, help="Python frames above the allocation")
    parser.add_argument("--number", type=int, default=20000, help="calls per repeat")
    args = parser.parse_args()
    genesis.set_site_depth(args.depth)
    n, number = args.n, args.number

    def run(name):
        fn = getattr(genesis, name.split()[0])

        def f1(k):
            return fn(k)

        def f2(k):
            return f1(k)

        def f3(k):
            return f2(k)

        stmt = "x = f3(n); del x" if "calls" in name else "x = fn(n); del x"

        def loop():
            return best_us(stmt, {"fn": fn, "f3": f3, "n": n}, number)

        return nested(args.frames, loop)

    rows = []
    for fn_name in ("empty", "zeros", "empty (calls)"):
        off = run(fn_name)
        _C.set_capture_locations(True)
        try:
            sites = run(fn_name)
        finally:
            _C.set_capture_locations(False)
        genesis.enable_memory_debugging(True)
        try:
            debug = run(fn_name)
        finally:
            genesis.enable_memory_debugging(False)
        off_again = run(fn_name)
        rows.append((fn_name, min(off, off_again), sites, debug))
    print(f"genesis.{{empty,zeros}}({n}) on the host, us per allocation+free, best of 9 x {number}; "
          f"site depth {args.depth}, {args.frames} frames above")
    print(f"{'call':<14} {'off':>8} {'sites':>8} {'+sites':>8} {'debug':>8} {'+debug':>8}")
    for name, off, sites, debug in rows:
        print(f"{name:<14} {off:>8.3f} {sites:>8.3f} {sites - off:>+8.3f} {debug:>8.3f} {debug - off:>+8.3f}")


if __name__ == "__main__":
    main()
