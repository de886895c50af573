"""Synthetic allocation traces for the memory debugger's tests.

Every writer produces a CSV trace in the format of data/traces/README.md
(``time_us,action,addr,size,stream,site``) and returns a ``TraceInfo`` with
the figures the trace was built to have, so tests compare what genesis-mem
reports with what is known to be true:

- ``steady_training``: weights live throughout, a sawtooth of activations
  allocated during each step and freed at its end.
- ``leaky_training``: the same plus one allocation per step at a named site,
  never freed, at a known rate.
- ``warmup_then_flat``: optimizer state that grows during the first steps,
  then a steady job.
- ``linear_growth``: memory that grows at a constant rate (to predict an OOM
  against a given capacity).
- ``fragmenting``: interleaved small and large blocks whose large half is
  freed, leaving holes that the next, larger requests cannot use.
"""

import dataclasses
import os

MiB = 1 << 20
GiB = 1 << 30
BLOCK = 512  # what the allocator rounds each request up to

LEAK_SITE = "leaky.py:42 in train_step|leaky.py:90 in main"
LEAK_FRAMES = ["leaky.py:42 in train_step", "leaky.py:90 in main"]
WEIGHTS_SITE = "model.py:10 in build|train.py:5 in main"
ACTIVATION_SITE = "model.py:30 in forward|train.py:20 in step"


def block_bytes(size):
    """The bytes a request of ``size`` occupies once rounded to 512."""
    return -(-size // BLOCK) * BLOCK


@dataclasses.dataclass
class TraceInfo:
    path: str
    duration_s: float  # trace time of the last event
    peak_live_bytes: int  # largest sum of requested sizes of live allocations
    peak_block_bytes: int  # the same with every request rounded up to 512
    live_at_end_block_bytes: int
    num_allocs: int
    num_frees: int
    leak_rate_mib_per_min: float = 0.0
    growth_bytes_per_s: float = 0.0


class _Writer:
    """Hands out addresses and keeps the live totals while events are written."""

    def __init__(self, path):
        self.path = str(path)
        self.lines = ["time_us,action,addr,size,stream,site"]
        self.next_addr = 0x7F0000000000
        self.live = {}  # addr -> size
        self.live_bytes = 0
        self.live_blocks = 0
        self.peak_live = 0
        self.peak_blocks = 0
        self.allocs = 0
        self.frees = 0
        self.last_us = 0

    def alloc(self, t_s, size, site=""):
        addr = self.next_addr
        self.next_addr += block_bytes(size) + 4096
        us = int(round(t_s * 1e6))
        field = f'"{site}"' if site else ""
        self.lines.append(f"{us},alloc,{addr:#x},{size},0,{field}")
        self.live[addr] = size
        self.live_bytes += size
        self.live_blocks += block_bytes(size)
        self.peak_live = max(self.peak_live, self.live_bytes)
        self.peak_blocks = max(self.peak_blocks, self.live_blocks)
        self.allocs += 1
        self.last_us = max(self.last_us, us)
        return addr

    def free(self, t_s, addr):
        size = self.live.pop(addr)
        us = int(round(t_s * 1e6))
        self.lines.append(f"{us},free_requested,{addr:#x},{size},0,")
        self.live_bytes -= size
        self.live_blocks -= block_bytes(size)
        self.frees += 1
        self.last_us = max(self.last_us, us)

    def finish(self, **extra):
        with open(self.path, "w", encoding="utf-8") as f:
            f.write("\n".join(self.lines) + "\n")
        return TraceInfo(path=self.path, duration_s=self.last_us / 1e6, peak_live_bytes=self.peak_live,
                         peak_block_bytes=self.peak_blocks, live_at_end_block_bytes=self.live_blocks,
                         num_allocs=self.allocs, num_frees=self.frees, **extra)


# Activation sizes of one step: odd sizes, so rounding to 512 shows.
ACTIVATIONS = (40 * MiB + 123, 24 * MiB + 7, 8 * MiB + 300, 96 * 1024 + 5)


def _step(w, t0, step_s, activations=ACTIVATIONS):
    """One training step: activations allocated over the first half of the
    step and all freed at 90% of it."""
    held = []
    for i, size in enumerate(activations):
        held.append(w.alloc(t0 + step_s * 0.5 * i / len(activations), size, ACTIVATION_SITE))
    for addr in reversed(held):
        w.free(t0 + step_s * 0.9, addr)


def _training(path, minutes, step_s, weights, leak_per_step, warmup_steps=0, warmup_bytes=0):
    w = _Writer(path)
    w.alloc(0.0, weights, WEIGHTS_SITE)
    steps = int(round(minutes * 60 / step_s))
    for k in range(steps):
        t0 = (k + 1) * step_s
        _step(w, t0, step_s)
        if k < warmup_steps:
            w.alloc(t0 + step_s * 0.6, warmup_bytes, "optim.py:7 in init_state|train.py:21 in step")
        if leak_per_step:
            w.alloc(t0 + step_s * 0.7, leak_per_step, LEAK_SITE)
    rate = leak_per_step / MiB * 60 / step_s
    return w.finish(leak_rate_mib_per_min=rate)


def steady_training(path, minutes=10.0, step_s=1.0, weights=300 * MiB + 77):
    """Weights plus a sawtooth of activations per step; nothing grows."""
    return _training(path, minutes, step_s, weights, 0)


def leaky_training(path, minutes=10.0, step_s=1.0, rate_mib_per_min=30.0, weights=300 * MiB + 77):
    """The steady job plus one allocation per step at LEAK_SITE that is never
    freed, growing live memory by ``rate_mib_per_min`` (MiB = 2^20 bytes)."""
    per_step = int(rate_mib_per_min * MiB * step_s / 60)
    per_step -= per_step % BLOCK  # so the rate in blocks is exact too
    return _training(path, minutes, step_s, weights, per_step)


def warmup_then_flat(path, minutes=10.0, step_s=1.0, warmup_steps=30, warmup_bytes=16 * MiB):
    """Optimizer state allocated during the first ``warmup_steps`` steps
    (``warmup_bytes`` each, kept), then a steady job."""
    return _training(path, minutes, step_s, 300 * MiB + 77, 0, warmup_steps, warmup_bytes)


def linear_growth(path, seconds=300.0, step_s=1.0, growth_bytes_per_s=8 * MiB, weights=1 * GiB):
    """Weights, a sawtooth of activations, and ``growth_bytes_per_s`` of
    memory kept every second (in 2 MiB multiples, so reserved memory grows
    at the same rate). Usage at time t: weights + activations + growth * t."""
    w = _Writer(path)
    w.alloc(0.0, weights, WEIGHTS_SITE)
    per_step = int(growth_bytes_per_s * step_s)
    steps = int(round(seconds / step_s))
    for k in range(steps):
        t0 = (k + 1) * step_s
        _step(w, t0, step_s)
        w.alloc(t0 + step_s * 0.95, per_step, "cache.py:12 in remember|train.py:30 in step")
    return w.finish(growth_bytes_per_s=per_step / step_s)


def fragmenting(path, seconds=60.0, rounds=6, pairs=64, small=1 * MiB + 512, large=3 * MiB):
    """Each round allocates ``pairs`` interleaved blocks of ``large`` and
    ``small`` bytes in one segment-sized run, frees the large ones (leaving
    holes between the small ones that stay live) and then asks for blocks a
    little larger than a hole, which need new memory."""
    w = _Writer(path)
    dt = seconds / rounds
    for r in range(rounds):
        t0 = r * dt
        larges = []
        for i in range(pairs):
            t = t0 + dt * 0.4 * i / pairs
            larges.append(w.alloc(t, large))
            w.alloc(t, small)
        for addr in larges:
            w.free(t0 + dt * 0.5, addr)
        for i in range(pairs // 4):
            w.alloc(t0 + dt * 0.6 + dt * 0.3 * i / pairs, large + 4 * MiB)
    return w.finish()


# --- running genesis-mem ----------------------------------------------------

def genesis_mem_path():
    """The genesis-mem executable of the build the genesis package comes from
    (build-dir/python/genesis/_C*.so -> build-dir/genesis-mem), or None. The
    extension module is the build's own file (the .py files may be links
    into the source tree)."""
    import pathlib

    from genesis import _C

    exe = pathlib.Path(_C.__file__).resolve().parents[2] / "genesis-mem"
    return exe if exe.is_file() else None


def run_genesis_mem(*args, timeout=60, **kwargs):
    """Runs genesis-mem with ``args``; returns the CompletedProcess (text)."""
    import subprocess

    exe = genesis_mem_path()
    assert exe is not None, "genesis-mem is not built next to the genesis package"
    return subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True, timeout=timeout, **kwargs)


def make_traces(directory):
    """Writes every synthetic trace into ``directory``; {name: TraceInfo}."""
    import pathlib

    d = pathlib.Path(directory)
    return {
        "steady": steady_training(d / "steady.csv"),
        "leaky": leaky_training(d / "leaky.csv"),
        "warmup": warmup_then_flat(d / "warmup.csv"),
        "growth": linear_growth(d / "growth.csv"),
        "fragmenting": fragmenting(d / "fragmenting.csv"),
    }


# A snapshot recorded by PyTorch's own allocator on a GPU, kept with the
# project (data/snapshots/README.md): the reference the snapshot tests
# compare with and replay on machines without a GPU or PyTorch.
RECORDED_PYTORCH_SNAPSHOT = os.path.join(os.path.dirname(__file__), "..", "..", "data", "snapshots",
                                         "pytorch_reference.pickle.gz")


def snapshot_peak_live(entries):
    """The peak of live bytes of a PyTorch history (``device_traces`` entries):
    allocations add their size, ``free_requested`` of a known address takes
    it back."""
    live, cur, peak = {}, 0, 0
    for e in entries:
        if e["action"] == "alloc":
            live[e["addr"]] = e["size"]
            cur += e["size"]
            peak = max(peak, cur)
        elif e["action"] == "free_requested" and e["addr"] in live:
            cur -= live.pop(e["addr"])
    return peak
