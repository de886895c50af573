"""Records a memory snapshot with PyTorch's own allocator (a GPU is needed):
the reference whose keys and types python/tests/test_torch_snapshot.py
compares Genesis's snapshots with (GENESIS_TORCH_REFERENCE_SNAPSHOT), and a
real PyTorch snapshot for genesis-mem replay.

    python bench/torch/record_snapshot.py OUT.pickle [--expandable]
"""

import argparse
import os
import pickle
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out")
    ap.add_argument("--expandable", action="store_true", help="PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")
    args = ap.parse_args()
    if args.expandable:
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    import torch

    if not torch.cuda.is_available():
        sys.exit("record_snapshot.py: needs a CUDA GPU")
    torch.cuda.memory._record_memory_history(max_entries=100000)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024)).cuda()
    opt = torch.optim.AdamW(model.parameters())
    side = torch.cuda.Stream()
    for step in range(4):
        x = torch.randn(64 * (step + 1), 1024, device="cuda")
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        y = torch.empty(1 << 20, device="cuda")
        with torch.cuda.stream(side):
            y.mul_(2)
        y.record_stream(side)
        del y
    try:
        torch.empty(1 << 50, dtype=torch.uint8, device="cuda")
    except torch.OutOfMemoryError:
        pass
    torch.cuda.synchronize()
    torch.cuda.memory._dump_snapshot(args.out)
    with open(args.out, "rb") as f:
        s = pickle.load(f)
    print(f"record_snapshot: {args.out}: {len(s['segments'])} segments, "
          f"{sum(len(t) for t in s['device_traces'])} trace entries, keys {sorted(s)}")


if __name__ == "__main__":
    main()
