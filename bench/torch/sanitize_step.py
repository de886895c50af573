"""A short training loop on the Genesis allocator, for compute-sanitizer
(scripts/torch_gpu.sh runs it under --tool memcheck): kernels of PyTorch
reading and writing Genesis blocks, blocks reused across steps and streams,
record_stream, an OOM and its recovery. Prints OK at the end.

    compute-sanitizer --tool memcheck python bench/torch/sanitize_step.py
"""

import torch

import genesis.torch as gt

gt.use_genesis_allocator()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
side = torch.cuda.Stream()
for step in range(4):
    x = torch.randn(64 + 16 * step, 256, device="cuda")
    y = torch.randint(0, 10, (x.shape[0],), device="cuda")
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    z = torch.ones(4096, device="cuda")
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        w = z * 3
    z.record_stream(side)
    del z
    torch.cuda.current_stream().wait_stream(side)
    assert float(w.sum()) == 3 * 4096
try:
    with gt.oom_as_torch_error():
        torch.empty(1 << 50, dtype=torch.uint8, device="cuda")
except torch.OutOfMemoryError:
    pass
torch.cuda.synchronize()
print("loss", float(loss), "peak", gt.max_memory_allocated())
print("OK")
