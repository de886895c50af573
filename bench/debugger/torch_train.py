#!/usr/bin/env python3
"""A PyTorch job to watch with genesis-mem on a GPU machine.

    python3 torch_train.py [--steps N] [--batch B] [--seq S] [--leak-mb M] [--grow-gb-per-s G]

Trains GPT-2 (124M, built from its configuration: nothing is downloaded;
a plain MLP when `transformers` is missing) with bf16 autocast and AdamW,
batch sizes changing between steps. --leak-mb keeps M MiB per step alive
(a planted leak); --grow-gb-per-s keeps allocating G GiB per second of wall
time until CUDA runs out of memory (an OOM to predict). Prints one JSON line
at the end: steps, seconds, steps_per_s, peak allocated/reserved, and for
--grow the time of the OOM since the start.
"""

import argparse
import json
import random
import sys
import time

import torch


def build_model(device):
    try:
        from transformers import GPT2Config, GPT2LMHeadModel
        cfg = GPT2Config(n_layer=12, n_head=12, n_embd=768, vocab_size=50257, n_positions=1024)
        return GPT2LMHeadModel(cfg).to(device), "gpt2-124M"
    except ImportError:
        model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024))
        return model.to(device), "mlp"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--leak-mb", type=float, default=0.0)
    p.add_argument("--grow-gb-per-s", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    torch.manual_seed(a.seed)
    random.seed(a.seed)
    dev = torch.device("cuda")
    model, name = build_model(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    leaked, grown = [], []
    t0 = time.perf_counter()
    oom_at = None
    steps = 0
    try:
        for step in range(a.steps):
            batch = random.choice([a.batch // 2, a.batch, a.batch + a.batch // 2]) or 1
            with torch.autocast("cuda", dtype=torch.bfloat16):
                if name == "mlp":
                    x = torch.randn(batch * a.seq, 1024, device=dev)
                    loss = model(x).float().pow(2).mean()
                else:
                    ids = torch.randint(0, 50257, (batch, a.seq), device=dev)
                    loss = model(ids, labels=ids).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            if a.leak_mb > 0:
                leaked.append(torch.empty(int(a.leak_mb * (1 << 20)), dtype=torch.uint8, device=dev))
            if a.grow_gb_per_s > 0:
                target = a.grow_gb_per_s * (time.perf_counter() - t0) * (1 << 30)
                have = sum(t.numel() for t in grown)
                while have < target:
                    grown.append(torch.empty(256 << 20, dtype=torch.uint8, device=dev))
                    have += 256 << 20
            steps += 1
        torch.cuda.synchronize()
    except torch.cuda.OutOfMemoryError:
        oom_at = time.perf_counter() - t0
    seconds = time.perf_counter() - t0
    print(json.dumps({"model": name, "steps": steps, "seconds": round(seconds, 3),
                      "steps_per_s": round(steps / seconds, 3),
                      "peak_allocated": torch.cuda.max_memory_allocated(),
                      "peak_reserved": torch.cuda.max_memory_reserved(),
                      "oom_after_s": None if oom_at is None else round(oom_at, 3)}))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
