"""Real PyTorch jobs under PyTorch's allocator, its expandable segments, and
Genesis (genesis.torch.use_genesis_allocator), each in its own process with
the same seed and the same sequence of shapes, for memory and speed.

    python bench/torch/jobs.py run --job gpt2 --allocator genesis      # one run, one JSON line
    python bench/torch/jobs.py all --out results.json                   # every job x allocator, 3 rounds
    python bench/torch/jobs.py search --job gpt2 --allocator native --budget-gb 12
    python bench/torch/jobs.py search-all --budget-gb 12 --out search.json

Jobs (models built from configs: nothing is downloaded):
  gpt2     GPT-2 124M (transformers GPT2Config) training, bf16 autocast, AdamW;
           batch size and sequence length change every step
  resnet50 torchvision resnet50 training at 224x224, bf16 autocast, SGD
  serve    a decoder-only model (LlamaConfig, 8 layers) answering requests of
           varying prompt and generation lengths with a KV cache (generate)
  bert     BERT-base classification training with dynamic padding (every
           batch padded to its longest sequence)
Allocators: native (PyTorch's caching allocator), expandable (the same with
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True), genesis (Genesis, default
options: expandable segments behind PyTorch), genesis-expandable (Genesis with
expandable segments asked for), genesis-classic (Genesis with classic
segments).

Each run reports JSON: peak reserved and allocated bytes (torch.cuda's
figures for PyTorch's allocator, genesis.torch's for Genesis: both count
reserved as memory taken from the driver and allocated as blocks handed to
tensors), their ratio, steps per second over the measured steps (after a
few warm-up steps), and the GPU memory in use as the driver reports it at
the end. cuDNN's benchmark mode stays off for every allocator: it asks the
allocator for cacheInfo, which a pluggable allocator cannot answer.
"""

import argparse
import json
import os
import random
import subprocess
import sys
import time

ALLOCATORS = ("native", "expandable", "genesis", "genesis-expandable", "genesis-classic")
JOBS = ("gpt2", "resnet50", "serve", "bert")
# Steps per job: about 5-10 s on an H100 after warm-up.
DEFAULT_STEPS = {"gpt2": 40, "resnet50": 60, "serve": 12, "bert": 50}
WARMUP = 3


# --------------------------------------------------------------- allocator ---
def setup_allocator(name, fraction=None):
    """Before torch touches CUDA: the environment or the Genesis switch."""
    if name == "expandable":
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    else:
        os.environ.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    import torch

    if name.startswith("genesis"):
        import genesis.torch as gt

        opts = {"genesis-expandable": {"expandable_segments": True},
                "genesis-classic": {"expandable_segments": False}}.get(name, {})
        if fraction is not None:
            opts["memory_fraction"] = fraction
        gt.use_genesis_allocator(**opts)
    if fraction is not None:
        torch.cuda.set_per_process_memory_fraction(fraction)
    torch.backends.cudnn.benchmark = False
    return torch


def memory_figures(name):
    import torch

    if name.startswith("genesis"):
        import genesis.torch as gt

        s = gt.memory_stats()
        reserved, allocated = s["reserved_bytes.all.peak"], s["allocated_bytes.all.peak"]
        extra = {"num_alloc_retries": s["num_alloc_retries"], "segments": s["segment.all.current"],
                 "num_device_alloc": s["num_device_alloc"], "num_device_free": s.get("num_device_free", 0),
                 "peak_requested": s.get("requested_bytes.all.peak")}
    else:
        s = torch.cuda.memory_stats()
        reserved, allocated = s["reserved_bytes.all.peak"], s["allocated_bytes.all.peak"]
        extra = {"num_alloc_retries": s.get("num_alloc_retries", 0), "segments": s.get("segment.all.current", 0),
                 "num_device_alloc": s.get("num_device_alloc", 0), "num_device_free": s.get("num_device_free", 0),
                 "peak_requested": s.get("requested_bytes.all.peak")}
    free, total = torch.cuda.mem_get_info()
    requested = extra.get("peak_requested")
    return {"peak_reserved": reserved, "peak_allocated": allocated,
            "reserved_per_allocated": round(reserved / allocated, 4) if allocated else None,
            # The same requests under every allocator: the fairest denominator
            # (allocated counts each allocator's own rounding).
            "reserved_per_requested": round(reserved / requested, 4) if requested else None,
            "device_used_end": total - free, **extra}


def empty_cache(name):
    import gc

    import torch

    gc.collect()
    torch.cuda.empty_cache()  # reaches Genesis through the reset hook


def is_oom(e):
    import torch

    if isinstance(e, torch.OutOfMemoryError):
        return True
    try:
        import genesis.torch as gt

        return gt.is_genesis_oom(e)
    except ImportError:
        return False


# -------------------------------------------------------------------- jobs ---
class Gpt2:
    """GPT-2 124M training; the shape of every step comes from the seed."""

    def __init__(self, torch, seed, batch=None):
        from transformers import GPT2Config, GPT2LMHeadModel

        self.torch = torch
        cfg = GPT2Config(n_positions=1024, n_embd=768, n_layer=12, n_head=12, vocab_size=50257)
        self.model = GPT2LMHeadModel(cfg).cuda()
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-4)
        self.rng = random.Random(seed)
        self.batch = batch

    def step(self):
        torch = self.torch
        b = self.batch or self.rng.choice([4, 6, 8, 10, 12, 16])
        t = 512 if self.batch else self.rng.choice([256, 384, 512, 640])
        ids = torch.randint(0, 50257, (b, t), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = self.model(input_ids=ids, labels=ids).loss
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        return b


class Resnet50:
    def __init__(self, torch, seed, batch=None):
        import torchvision

        self.torch = torch
        self.model = torchvision.models.resnet50(weights=None).cuda()
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01, momentum=0.9)
        self.batch = batch or 64
        self.rng = random.Random(seed)

    def step(self):
        torch = self.torch
        x = torch.randn(self.batch, 3, 224, 224, device="cuda")
        y = torch.randint(0, 1000, (self.batch,), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(self.model(x), y)
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        return self.batch


class Serve:
    """Requests of varying prompt and generation lengths, a KV cache each."""

    def __init__(self, torch, seed, batch=None):
        from transformers import LlamaConfig, LlamaForCausalLM

        self.torch = torch
        cfg = LlamaConfig(vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=8,
                          num_attention_heads=16, num_key_value_heads=8, max_position_embeddings=4096)
        self.model = LlamaForCausalLM(cfg).to(device="cuda", dtype=torch.bfloat16).eval()
        self.rng = random.Random(seed)
        self.batch = batch

    def step(self):
        torch = self.torch
        # A fixed batch (the largest-batch search) serves its longest requests.
        b = self.batch or self.rng.choice([1, 2, 4, 8])
        prompt = 1024 if self.batch else self.rng.choice([64, 128, 256, 512, 1024])
        new = 64 if self.batch else self.rng.choice([16, 32, 64, 128])
        ids = torch.randint(3, 32000, (b, prompt), device="cuda")
        with torch.inference_mode():
            out = self.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=new,
                                      min_new_tokens=new, do_sample=False, pad_token_id=0)
        assert out.shape == (b, prompt + new)
        return b * new


class Bert:
    """Classification with dynamic padding: each batch as long as its longest sequence."""

    def __init__(self, torch, seed, batch=None):
        from transformers import BertConfig, BertForSequenceClassification

        self.torch = torch
        self.model = BertForSequenceClassification(BertConfig(num_labels=4)).cuda()
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=2e-5)
        self.rng = random.Random(seed)
        self.batch = batch or 32

    def step(self):
        torch = self.torch
        lengths = [self.rng.randint(16, 512) for _ in range(self.batch)]
        t = max(lengths)
        ids = torch.randint(1000, 30000, (self.batch, t), device="cuda")
        mask = (torch.arange(t, device="cuda")[None, :] < torch.tensor(lengths, device="cuda")[:, None]).long()
        labels = torch.randint(0, 4, (self.batch,), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = self.model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        return self.batch


JOB_CLASSES = {"gpt2": Gpt2, "resnet50": Resnet50, "serve": Serve, "bert": Bert}


# -------------------------------------------------------------------- runs ---
def run_one(job, allocator, steps, seed, max_seconds):
    out = {"job": job, "allocator": allocator, "seed": seed}
    t_start = time.perf_counter()
    torch = setup_allocator(allocator)
    torch.manual_seed(seed)
    out["torch"] = torch.__version__
    try:
        j = JOB_CLASSES[job](torch, seed)
        for _ in range(WARMUP):
            j.step()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        done = units = 0
        while done < steps:
            units += j.step()
            done += 1
            if time.perf_counter() - t0 > max_seconds:
                out["truncated"] = True
                break
        torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        out.update(ok=True, steps=done, seconds=round(dt, 3), steps_per_s=round(done / dt, 3),
                   units_per_s=round(units / dt, 1))
    except Exception as e:  # an OOM or anything else: reported, not fatal to the batch
        out.update(ok=False, oom=is_oom(e), error=f"{type(e).__name__}: {str(e)[:400]}")
    out.update(memory_figures(allocator))
    out["wall_seconds"] = round(time.perf_counter() - t_start, 2)
    return out


def search_one(job, allocator, budget_gb, seed, probe_steps, max_batch):
    """Largest batch whose steps fit in the budget (binary search, in process)."""
    import genesis

    out = {"job": job, "allocator": allocator, "budget_gb": budget_gb}
    # The device's size before PyTorch initialises CUDA (which must come after
    # the allocator's setup): Genesis asks the driver.
    _free, total = genesis.cuda.mem_get_info(0)
    fraction = min(1.0, budget_gb * (1 << 30) / total)
    torch = setup_allocator(allocator, fraction)
    torch.manual_seed(seed)
    probes = []

    def fits(batch):
        j = None
        try:
            j = JOB_CLASSES[job](torch, seed, batch=batch)
            for _ in range(probe_steps):
                j.step()
            torch.cuda.synchronize()
            ok = True
        except Exception as e:
            if not is_oom(e):
                raise
            ok = False
        finally:
            del j
            empty_cache(allocator)
        probes.append((batch, ok))
        return ok

    t0 = time.perf_counter()
    lo, hi = 0, None
    b = 8
    while hi is None:  # grow until a batch does not fit
        if b > max_batch:
            hi = max_batch + 1
            break
        if fits(b):
            lo, b = b, b * 2
        else:
            hi = b
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    out.update(fraction=round(fraction, 4), largest_batch=lo, probes=probes,
               seconds=round(time.perf_counter() - t0, 2), **memory_figures(allocator))
    return out


def child(cmd):
    """Runs this script in a fresh interpreter; its last stdout line is JSON."""
    p = subprocess.run([sys.executable, os.path.abspath(__file__), *cmd], capture_output=True, text=True)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        return {"cmd": cmd, "ok": False, "error": (p.stderr or p.stdout)[-1500:]}
    return json.loads(lines[-1])


def rotated(items, k):
    """items starting at position k (mod len): round k of a repeated comparison runs the allocators in
    this order, so none always runs first (a cold machine) or last."""
    k %= len(items)
    return items[k:] + items[:k]


def summarize(rows, baseline="native"):
    """One row per job and allocator over the rounds of `all --repeats`: the median steps per second,
    its spread ((max - min) / median), and the steps per second relative to the baseline's run of the
    same round, whose median is the figure to quote: the machine's speed drifts between rounds (a
    GPU's clocks, the host's other tenants), and a ratio within one round cancels most of it. Memory
    figures are the largest over the rounds. Rows that failed are counted, not averaged."""
    from statistics import median

    groups, failed = {}, {}
    for r in rows:
        key = (r.get("job"), r.get("allocator"))
        if r.get("ok") and isinstance(r.get("steps_per_s"), (int, float)) and r["steps_per_s"] > 0:
            groups.setdefault(key, []).append(r)
        else:
            failed[key] = failed.get(key, 0) + 1
    base = {(r["job"], r.get("round", 0)): r["steps_per_s"] for (job, alloc), rs in groups.items()
            if alloc == baseline for r in rs}
    out = []
    for key in sorted(set(groups) | set(failed)):
        job, alloc = key
        rs = groups.get(key, [])
        row = {"job": job, "allocator": alloc, "runs": len(rs), "failed": failed.get(key, 0)}
        if rs:
            rates = [r["steps_per_s"] for r in rs]
            m = median(rates)
            row.update(steps_per_s=round(m, 3), steps_per_s_min=min(rates), steps_per_s_max=max(rates),
                       spread=round((max(rates) - min(rates)) / m, 4))
            ratios = [r["steps_per_s"] / base[(job, r.get("round", 0))] for r in rs
                      if (job, r.get("round", 0)) in base]
            if ratios:
                row.update(vs_baseline=round(median(ratios), 4), vs_baseline_min=round(min(ratios), 4),
                           vs_baseline_max=round(max(ratios), 4))
            for k in ("peak_reserved", "peak_allocated", "reserved_per_allocated", "reserved_per_requested",
                      "num_device_alloc", "num_device_free"):
                vals = [r[k] for r in rs if isinstance(r.get(k), (int, float))]
                if vals:
                    row[k] = max(vals)
        out.append(row)
    return out


def table(rows, keys):
    widths = [max(len(k), *(len(str(r.get(k, ""))) for r in rows)) for k in keys]
    lines = ["  ".join(k.ljust(w) for k, w in zip(keys, widths))]
    lines += ["  ".join(str(r.get(k, "")).ljust(w) for k, w in zip(keys, widths)) for r in rows]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--job", choices=JOBS, required=True)
    r.add_argument("--allocator", choices=ALLOCATORS, required=True)
    r.add_argument("--steps", type=int)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--max-seconds", type=float, default=30.0)
    a = sub.add_parser("all")
    a.add_argument("--jobs", default=",".join(JOBS))
    a.add_argument("--allocators", default="native,expandable,genesis")
    a.add_argument("--steps-scale", type=float, default=1.0)
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--repeats", type=int, default=3,
                   help="rounds of every job x allocator, the allocators' order rotated each round (default 3)")
    a.add_argument("--out")
    s = sub.add_parser("search")
    s.add_argument("--job", choices=JOBS, required=True)
    s.add_argument("--allocator", choices=ALLOCATORS, required=True)
    s.add_argument("--budget-gb", type=float, default=12.0)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--probe-steps", type=int, default=3)
    s.add_argument("--max-batch", type=int, default=1024)
    sa = sub.add_parser("search-all")
    sa.add_argument("--jobs", default=",".join(JOBS))
    sa.add_argument("--allocators", default="native,expandable,genesis")
    sa.add_argument("--budget-gb", type=float, default=12.0)
    sa.add_argument("--out")
    args = ap.parse_args()

    if args.cmd == "run":
        steps = args.steps or DEFAULT_STEPS[args.job]
        print(json.dumps(run_one(args.job, args.allocator, steps, args.seed, args.max_seconds)), flush=True)
    elif args.cmd == "search":
        print(json.dumps(search_one(args.job, args.allocator, args.budget_gb, args.seed, args.probe_steps,
                                    args.max_batch)), flush=True)
    elif args.cmd == "all":
        if args.repeats < 1:
            ap.error(f"--repeats must be at least 1, got {args.repeats}")
        rows = []
        allocators = args.allocators.split(",")
        for rnd in range(args.repeats):
            for job in args.jobs.split(","):
                steps = max(1, int(DEFAULT_STEPS[job] * args.steps_scale))
                for alloc in rotated(allocators, rnd):
                    row = child(["run", "--job", job, "--allocator", alloc, "--steps", str(steps), "--seed",
                                 str(args.seed)])
                    row.setdefault("job", job)
                    row.setdefault("allocator", alloc)
                    row["round"] = rnd
                    for k in ("peak_reserved", "peak_allocated", "device_used_end"):
                        if isinstance(row.get(k), int):
                            row[k + "_mib"] = round(row[k] / (1 << 20), 1)
                    rows.append(row)
                    print(json.dumps(row), flush=True)
        print(table(rows, ["round", "job", "allocator", "ok", "steps_per_s", "peak_reserved_mib",
                           "peak_allocated_mib", "reserved_per_allocated", "reserved_per_requested",
                           "device_used_end_mib", "wall_seconds"]))
        summary = summarize(rows)
        print("\nover the rounds (vs_baseline: steps/s over PyTorch native's in the same round, median and range)")
        print(table(summary, ["job", "allocator", "runs", "failed", "steps_per_s", "spread", "vs_baseline",
                              "vs_baseline_min", "vs_baseline_max", "reserved_per_requested", "num_device_alloc"]))
        if args.out:
            with open(args.out, "w") as f:
                json.dump({"rows": rows, "summary": summary}, f, indent=1)
    elif args.cmd == "search-all":
        rows = []
        for job in args.jobs.split(","):
            for alloc in args.allocators.split(","):
                row = child(["search", "--job", job, "--allocator", alloc, "--budget-gb", str(args.budget_gb)])
                row.setdefault("job", job)
                row.setdefault("allocator", alloc)
                rows.append(row)
                print(json.dumps(row), flush=True)
        print(table(rows, ["job", "allocator", "budget_gb", "largest_batch", "peak_reserved", "seconds"]))
        if args.out:
            with open(args.out, "w") as f:
                json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
