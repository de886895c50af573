#!/usr/bin/env python3
"""Write synthetic allocation traces that no recorded workload covers.

The recorded corpus (data/traces/corpus) is what real jobs do; these are the
patterns a tuned allocator is most likely to have missed: random sizes with
random lifetimes (small only, log-uniform up to 1 GiB, four streams), a
serving loop whose requests come and go with KV caches grown block by block,
a training loop whose batch size changes every step, a fragmentation
adversary (free every other block, then ask for larger ones) and epochs
whose activations grow. Replay them with

    genesis-mem replay --corpus DIR --compare

Usage: synth_traces.py DIR [--seed N]
"""
import argparse
import os
import random


class Trace:
    """Events of one trace; addresses are unique and never reused."""

    def __init__(self):
        self.events = []
        self.next_addr = 1 << 40
        self.live = {}

    def alloc(self, size, stream=0):
        addr = self.next_addr
        self.next_addr += (size + 4095) // 4096 * 4096 + 4096
        self.events.append(("alloc", addr, size, stream))
        self.live[addr] = (size, stream)
        return addr

    def free(self, addr):
        size, stream = self.live.pop(addr)
        self.events.append(("free_requested", addr, size, stream))

    def write(self, path):
        with open(path, "w") as f:
            f.write("time_us,action,addr,size,stream\n")
            for i, (action, addr, size, stream) in enumerate(self.events):
                f.write(f"{i},{action},{addr},{size},{stream}\n")


def serve_kv(r):
    t, reqs = Trace(), []
    for _ in range(3000):
        if r.random() < 0.3 and len(reqs) < 64:
            reqs.append([t.alloc(r.randint(1, 2048) * 4096 * 2), r.randint(10, 400), []])
        for req in list(reqs):
            t.free(t.alloc(r.randint(1, 64) * 256 * 1024))  # a step's scratch
            req[2].append(t.alloc(128 * 1024 * r.choice([1, 2, 4])))  # one more KV block
            req[1] -= 1
            if req[1] <= 0:
                t.free(req[0])
                for block in req[2]:
                    t.free(block)
                reqs.remove(req)
    return t


def random_sizes(r, n, low, high, streams=1, log_uniform=True, free_share=0.5):
    t, live = Trace(), []
    for _ in range(n):
        if live and r.random() < free_share:
            t.free(live.pop(r.randrange(len(live))))
        else:
            size = int(2 ** r.uniform(low, high)) if log_uniform else r.randint(2 ** low, 2 ** high)
            live.append(t.alloc(size, r.randrange(streams) if streams > 1 else 0))
    return t


def train_bs(r):
    t = Trace()
    for _ in range(100):
        t.alloc(r.randint(1, 50) << 20)  # parameters, alive throughout
    layers = [r.randint(1, 40) for _ in range(40)]
    for _ in range(200):
        batch = r.choice([8, 12, 16, 24, 32])
        acts = []
        for width in layers:
            acts.append(t.alloc(width * batch * 65536 + r.randint(0, 4) * 512))
            t.free(t.alloc(width * batch * 32768))
        for a in reversed(acts):
            grad = t.alloc(t.live[a][0])
            t.free(a)
            t.free(grad)
    return t


def frag_adversary(r):
    t = Trace()
    for _ in range(20):
        xs = [t.alloc(r.randint(1, 8) << 20) for _ in range(200)]
        for x in xs[::2]:
            t.free(x)
        ys = [t.alloc(r.randint(8, 16) << 20) for _ in range(50)]
        for x in xs[1::2]:
            t.free(x)
        for y in ys:
            t.free(y)
    return t


def epochs_grow(r):
    t = Trace()
    t.alloc(300 << 20)  # the model
    for epoch in range(10):
        acts = [t.alloc(r.randint(1, 100) * (1 << 20) * (epoch + 1) // 3 + 1) for _ in range(60)]
        for a in acts:
            t.free(a)
        evals = [t.alloc(r.randint(1, 30) << 20) for _ in range(200)]
        for e in evals:
            t.free(e)
    return t


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("dir")
    p.add_argument("--seed", type=int, default=11)
    args = p.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    r = random.Random(args.seed)
    traces = {
        "serve_kv": serve_kv(r),
        "random_logu": random_sizes(r, 20000, 10, 30),
        "train_bs": train_bs(r),
        "small_only": random_sizes(r, 40000, 0, 20, log_uniform=False, free_share=0.49),
        "multi4": random_sizes(r, 20000, 12, 27, streams=4),
        "frag_adv": frag_adversary(r),
        "epochs_grow": epochs_grow(r),
    }
    for name, t in traces.items():
        t.write(os.path.join(args.dir, f"{name}.trace.csv"))
        print(f"{name}: {len(t.events)} events")


if __name__ == "__main__":
    main()
