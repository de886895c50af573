"""A short training loop on the Genesis allocator, for compute-sanitizer
(scripts/torch_gpu.sh runs it under --tool memcheck): kernels of PyTorch
reading and writing Genesis blocks, blocks reused across steps and streams,
record_stream, an OOM and its recovery, and a CUDA graph captured into a
private pool and replayed. Prints OK at the end.

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
# A graph captured on Genesis's private pool, replayed while the program
# allocates outside it: the replays must read and write only the pool's blocks.
static_x = torch.randn(128, 256, device="cuda")
warm = torch.cuda.Stream()
warm.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(warm), torch.no_grad():
    model(static_x)
torch.cuda.current_stream().wait_stream(warm)
graph = torch.cuda.CUDAGraph()
with torch.no_grad(), torch.cuda.graph(graph):
    static_y = model(static_x).relu().sum(dim=1)
outside = []
for i in range(3):
    static_x.copy_(torch.randn(128, 256, device="cuda"))
    graph.replay()
    outside.append(torch.full((1 << 16,), float(i), device="cuda"))
    with torch.no_grad():
        torch.testing.assert_close(static_y, model(static_x).relu().sum(dim=1))
assert [float(t[0]) for t in outside] == [0.0, 1.0, 2.0]
del graph, static_y
torch.cuda.synchronize()
print("loss", float(loss), "peak", gt.max_memory_allocated())
print("OK")
