#!/usr/bin/env python3
"""A Genesis job on the GPU to watch with genesis-mem, or to watch itself.

    python3 genesis_job.py [--seconds S] [--leak-mb M] [--in-process]

Each step allocates activations with genesis tensors on cuda:0 (a few
matmuls, element-wise ops), frees them, and with --leak-mb keeps M MiB per
step alive at one line of this file (the planted leak a leak report must
name). Started by `genesis-mem leak -- python3 genesis_job.py ...` it
publishes its allocator's exact figures and sites to the watcher.
--in-process runs genesis.tools.memory.MemoryDebugger on itself (allocation
sites tracked) and prints its leak report, the sampler's CPU cost and the
step rate with and without it. Prints one JSON line at the end.
"""

import argparse
import json
import sys
import time

import genesis


def keep_leaking(store, mb):
    store.append(genesis.empty(int(mb * (1 << 18)), device="cuda"))  # float32: 4 bytes each


def step(n=2048):
    a = genesis.randn(n, n, device="cuda")
    b = genesis.randn(n, n, device="cuda")
    c = (a @ b).relu() + 1.0
    s = c.sum()
    del a, b, c
    return s


def run(seconds, leak_mb):
    store = []
    t0 = time.perf_counter()
    steps = 0
    while time.perf_counter() - t0 < seconds:
        step()
        if leak_mb > 0:
            keep_leaking(store, leak_mb)
        steps += 1
        time.sleep(0.01)  # a data loader's pause: the sawtooth has troughs
    genesis.cuda.synchronize()
    return steps, time.perf_counter() - t0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=20)
    p.add_argument("--leak-mb", type=float, default=0.0)
    p.add_argument("--in-process", action="store_true")
    a = p.parse_args()
    out = {}
    if a.in_process:
        from genesis.tools.memory import MemoryDebugger
        steps0, secs0 = run(a.seconds / 2, 0)
        out["steps_per_s_alone"] = round(steps0 / secs0, 2)
        d = MemoryDebugger(sampling_interval=0.1, leak_window=a.seconds / 4)
        genesis.set_memory_debug(True)  # Python allocation sites
        d.start_monitoring()
        steps1, secs1 = run(a.seconds / 2, a.leak_mb)
        d.stop_monitoring()
        genesis.set_memory_debug(False)
        out["steps_per_s_watched"] = round(steps1 / secs1, 2)
        report = d.get_status_report()
        out["sampler"] = report.get("sampler")
        leak = report.get("leak", {}).get("devices", {})
        out["leak"] = {k: {"leak_detected": v.get("leak_detected"),
                           "growth_rate_mb_per_min": v.get("growth_rate_mb_per_min"),
                           "top_site": (v.get("sites") or [{}])[0].get("site")} for k, v in leak.items()}
        out["expected_leak_mb_per_min"] = round(a.leak_mb * steps1 / secs1 * 60, 1)
    else:
        steps, secs = run(a.seconds, a.leak_mb)
        out["steps_per_s"] = round(steps / secs, 2)
        out["expected_leak_mb_per_min"] = round(a.leak_mb * steps / secs * 60, 1)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
