"""Records a corpus of real allocation traces with PyTorch's own allocator
(a GPU is needed for the recording; the workloads also run on CPU with tiny
sizes, for tests).

    python bench/torch/record_traces.py record --out DIR [--workloads a,b] [--settings native,...]
    python bench/torch/record_traces.py convert --out DIR     (after record --no-convert)
    python bench/torch/record_traces.py list
    python bench/torch/record_traces.py run-one --workload NAME --out DIR [--setting S] [--record]

Every workload runs in its own process under PyTorch's native caching
allocator, with the allocator's memory history recording from before its
first allocation (torch.cuda.memory._record_memory_history, after
empty_cache and a reset of the peak statistics, with nothing allocated).
At the end the history is taken as a snapshot (torch.cuda.memory._snapshot)
and written to DIR/NAME.pickle; `genesis-mem convert` turns it into the
CSV trace DIR/NAME.trace.csv.gz (the conversion lives in Genesis, not
here), and DIR/NAME.json (the sidecar) says what ran: model, workload,
steps, the trace's peak live bytes, PyTorch's own peak reserved and
allocated bytes of the same run (torch.cuda.max_memory_reserved/allocated),
device, torch version, date, command, and whether the history ring dropped
events. `genesis-mem replay --corpus DIR` replays them all.

--settings adds runs of the same workloads (same seed, same shapes) under
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True and
backend:cudaMallocAsync, in their own processes, without recording: only
their peak reserved and allocated bytes go into the sidecar, so that each
trace has PyTorch's best setting to be compared with. They repeat exactly
the iterations of the recorded run; they measure no time, so --parallel N
runs N of them at once.

Workloads (models built from configs: nothing is downloaded):
  llm_train      GPT-2 124M (transformers GPT2Config), bf16 autocast, AdamW;
                 batch size and sequence length change every step
  llm_serve      a small decoder-only transformer answering requests in
                 batches of 16-64: prompts of varying length, a KV cache per layer
                 grown by one token per decode step (torch.cat, as
                 transformers' DynamicCache), finished requests dropped
                 from the batch (index_select), thousands of requests
  vision_train   torchvision resnet50 training, bf16 autocast, SGD; each
                 epoch ends with a short batch
  diffusion_unet a UNet2DModel (diffusers when installed, else a UNet of
                 the same shape in plain PyTorch) trained to predict noise,
                 then a few denoising steps of sampling
  bert_dynamic   BERT-base classification (transformers BertConfig), every
                 batch padded to its longest sequence
  multi_stream   training with the next batch prefetched from pinned host
                 memory on a side stream (record_stream) and an auxiliary
                 head computed on a second compute stream
  long_run       hundreds of steps of a small GPT-2 (4 layers)
  epochs_eval    training epochs with an eval pass between them at 4x the
                 batch size; torch.cuda.empty_cache() after every phase
                 (so the trace shows segments returned and grown again)

GENESIS_TRACE_SCALE (or --scale, default 1) scales every workload's steps
or requests and its time limit: a recorded run stops its main loop after
--max-seconds (default 20 s x scale) and says how far it got, so the eight
recordings take about four minutes on an H100 or H200 at scale 1, their
start-up included.
"""

import argparse
import contextlib
import datetime
import importlib.util
import json
import os
import pickle
import random
import shlex
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

SETTINGS = {
    "native": None,
    "expandable_segments": "expandable_segments:True",
    "cudaMallocAsync": "backend:cudaMallocAsync",
}
# History entries kept by PyTorch's ring: more than any workload here makes at
# scale 1, and few enough that genesis-mem's bounded pickle reader takes
# the snapshot (about ten pickle objects per entry, at most 16 Mi objects).
DEFAULT_MAX_ENTRIES = 1_500_000
# A workload's main loop stops after this many seconds (times the scale):
# eight recordings then take about four minutes with their start-up, and the
# runs under the other settings repeat the same iterations.
DEFAULT_MAX_SECONDS = 20.0


# ------------------------------------------------------------- device glue ---
class Env:
    """Where a workload runs: CUDA, or CPU with tiny sizes (tests)."""

    def __init__(self, torch, device, scale, seed=0, max_seconds=None, fixed=None):
        self.torch = torch
        self.device = device
        self.cuda = device == "cuda"
        self.tiny = not self.cuda
        self.scale = scale
        self.rng = random.Random(seed)
        torch.manual_seed(seed)
        # Note [Bounded workloads]: a recorded run stops its main loop at
        # max_seconds (so that the corpus fits its time on the GPU machine);
        # the runs under other allocator settings then do exactly as many
        # iterations (`fixed`), with the same seed, hence the same shapes.
        self.deadline = None if max_seconds is None else time.perf_counter() + max_seconds
        self.fixed = fixed
        self.count = 0

    def steps(self, n):
        """n at scale 1; at least 1 (2 on CPU: tests stay short)."""
        return 2 if self.tiny else max(1, int(round(n * self.scale)))

    def loop(self, n):
        """The main loop's iterations: n, or `fixed`, or fewer when the
        deadline passes (Note [Bounded workloads]); self.count says how many."""
        if self.fixed is not None:
            n = self.fixed
        self.count = 0
        while self.count < n:
            if self.fixed is None and self.deadline is not None and self.count > 0 and \
                    time.perf_counter() > self.deadline:
                break
            yield self.count
            self.count += 1

    def build(self, make):
        """A model made on the device itself: no host-side initialisation
        followed by a copy (seconds for GPT-2 on a CPU)."""
        with self.torch.device(self.device):
            return make().to(self.device)

    def autocast(self):
        return self.torch.autocast(self.device, dtype=self.torch.bfloat16)

    def stream(self):
        return self.torch.cuda.Stream() if self.cuda else None

    def on(self, stream):
        return self.torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext()

    def wait(self, stream, on=None):
        """`on` (default: the current stream) waits for `stream`'s work so far."""
        if stream is not None:
            (on or self.torch.cuda.current_stream()).wait_stream(stream)

    def pin(self, t):
        return t.pin_memory() if self.cuda else t


# --------------------------------------------------------------- workloads ---
def gpt2_model(env, layers=12, width=768, heads=12, positions=1024, vocab=50257):
    from transformers import GPT2Config, GPT2LMHeadModel

    if env.tiny:
        layers, width, heads, positions, vocab = 2, 64, 2, 128, 1000
    cfg = GPT2Config(n_positions=positions, n_embd=width, n_layer=layers, n_head=heads, vocab_size=vocab)
    return env.build(lambda: GPT2LMHeadModel(cfg)), cfg


def lm_step(env, model, opt, vocab, b, t):
    torch = env.torch
    ids = torch.randint(0, vocab, (b, t), device=env.device)
    with env.autocast():
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def llm_train(env):
    torch = env.torch
    model, cfg = gpt2_model(env)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    # At most 8192 tokens a step: GPT-2 124M then stays under ~20 GB.
    shapes = [(8, 1024), (16, 512), (4, 1024), (12, 512), (8, 768), (24, 256), (6, 640), (10, 384)]
    for _ in env.loop(env.steps(20)):
        b, t = env.rng.choice(shapes)
        if env.tiny:
            b, t = max(1, b // 4), min(t // 8, cfg.n_positions)
        lm_step(env, model, opt, cfg.vocab_size, b, t)
    return {"model": "GPT-2 124M (GPT2Config: 12 layers, width 768, 12 heads)",
            "workload": "training, bf16 autocast, AdamW; batch and sequence length drawn every step from "
                        "(8,1024) (16,512) (4,1024) (12,512) (8,768) (24,256) (6,640) (10,384)",
            "steps": env.count}


class TinyDecoder:
    """A decoder-only transformer (pre-norm, multi-head attention, GELU MLP)
    with an explicit KV cache: what a serving loop allocates, without the
    Python overhead of transformers' generate() per token."""

    def __init__(self, env, layers, width, heads, vocab):
        torch = env.torch
        nn = torch.nn
        self.torch, self.heads, self.width = torch, heads, width
        self.emb = nn.Embedding(vocab, width)
        self.blocks = nn.ModuleList()
        for _ in range(layers):
            self.blocks.append(nn.ModuleDict({
                "ln1": nn.LayerNorm(width), "qkv": nn.Linear(width, 3 * width, bias=False),
                "out": nn.Linear(width, width, bias=False), "ln2": nn.LayerNorm(width),
                "up": nn.Linear(width, 4 * width, bias=False), "down": nn.Linear(4 * width, width, bias=False)}))
        self.ln = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        dtype = torch.bfloat16 if env.cuda else torch.float32
        self.modules = nn.ModuleList([self.emb, self.blocks, self.ln, self.head]).to(env.device, dtype).eval()

    @classmethod
    def make(cls, env, *args):
        with env.torch.device(env.device):
            return cls(env, *args)

    def forward(self, ids, cache, mask=None):
        """ids (b, t); cache: per layer [k, v] of (b, h, T, d) or None; grows in place."""
        torch = self.torch
        F = torch.nn.functional
        x = self.emb(ids)
        b, t, _ = x.shape
        d = self.width // self.heads
        for i, blk in enumerate(self.blocks):
            h = blk["ln1"](x)
            q, k, v = blk["qkv"](h).split(self.width, dim=-1)
            q, k, v = (z.view(b, t, self.heads, d).transpose(1, 2) for z in (q, k, v))
            if cache[i] is not None:  # one token more: a new, longer K and V (the old ones are freed)
                k = torch.cat([cache[i][0], k], dim=2)
                v = torch.cat([cache[i][1], v], dim=2)
            cache[i] = [k, v]
            a = F.scaled_dot_product_attention(q, k, v, is_causal=mask is None and t > 1, attn_mask=mask)
            x = x + blk["out"](a.transpose(1, 2).reshape(b, t, self.width))
            x = x + blk["down"](F.gelu(blk["up"](blk["ln2"](x))))
        return self.head(self.ln(x[:, -1]))


def llm_serve(env):
    torch = env.torch
    layers, width, heads, vocab = (2, 64, 2, 1000) if env.tiny else (2, 1024, 16, 32000)
    model = TinyDecoder.make(env, layers, width, heads, vocab)
    done = tokens = 0
    with torch.inference_mode():
        for _ in env.loop(2 if env.tiny else env.steps(50)):  # batches of requests
            b = env.rng.randint(16, 64) if not env.tiny else 2
            prompts = [env.rng.randint(16, 512 if not env.tiny else 16) for _ in range(b)]
            gens = [env.rng.randint(4, 32 if not env.tiny else 4) for _ in range(b)]
            t = max(prompts)
            # Prompts left-padded to the longest; the padding is masked out.
            ids = torch.randint(3, vocab, (b, t), device=env.device)
            keep = torch.arange(t, device=env.device)[None, :] >= torch.tensor([t - p for p in prompts],
                                                                               device=env.device)[:, None]
            causal = torch.ones(t, t, dtype=torch.bool, device=env.device).tril()
            mask = (causal[None] & keep[:, None, :])[:, None]
            cache = [None] * layers
            nxt = model.forward(ids, cache, mask).argmax(-1, keepdim=True)
            live = list(range(b))
            step = 0
            while live:
                step += 1
                finished = [j for j, r in enumerate(live) if gens[r] <= step]
                if finished:  # requests that are done leave the batch, and their cache with them
                    stay = [j for j in range(len(live)) if j not in finished]
                    live = [live[j] for j in stay]
                    if not live:
                        break
                    idx = torch.tensor(stay, device=env.device)
                    cache = [[k.index_select(0, idx), v.index_select(0, idx)] for k, v in cache]
                    nxt = nxt.index_select(0, idx)
                    keep = keep.index_select(0, idx)
                keep = torch.cat([keep, torch.ones(len(live), 1, dtype=torch.bool, device=env.device)], dim=1)
                nxt = model.forward(nxt, cache, keep[:, None, None, :]).argmax(-1, keepdim=True)
                tokens += len(live)
            done += b
    batches, requests = env.count, done
    return {"model": f"decoder-only transformer, {layers} layers, width {width}, {heads} heads, vocab {vocab}, bf16",
            "workload": f"serving {requests} requests in {batches} batches of 16-64: prompts of 16-512 tokens "
                        f"(left-padded, masked), 4-32 generated tokens each ({tokens} in all), KV cache grown "
                        "by torch.cat every token, finished requests removed from the batch (index_select)",
            "steps": batches, "requests": requests, "generated_tokens": tokens}


def vision_train(env):
    import torchvision

    torch = env.torch
    model = env.build(lambda: torchvision.models.resnet50(weights=None))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    batch, res = (2, 32) if env.tiny else (64, 224)
    for s in env.loop(env.steps(16)):
        b = batch if (s + 1) % 8 else max(1, batch * 5 // 8)  # every 8th step: an epoch's last, short batch
        x = torch.randn(b, 3, res, res, device=env.device)
        y = torch.randint(0, 1000, (b,), device=env.device)
        with env.autocast():
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return {"model": "torchvision resnet50", "workload": f"training at {res}x{res}, batch {batch} (every 8th "
            f"step {max(1, batch * 5 // 8)}: an epoch's end), bf16 autocast, SGD momentum", "steps": env.count}


def plain_unet(env, base, mults, attn_levels):
    """A UNet2DModel-like network: ResNet blocks with a time embedding,
    downsampling and upsampling with skip connections, self-attention at the
    lower resolutions."""
    torch = env.torch
    nn = torch.nn
    F = torch.nn.functional

    class Res(nn.Module):
        def __init__(self, cin, cout, temb):
            super().__init__()
            self.n1, self.c1 = nn.GroupNorm(8, cin), nn.Conv2d(cin, cout, 3, padding=1)
            self.t = nn.Linear(temb, cout)
            self.n2, self.c2 = nn.GroupNorm(8, cout), nn.Conv2d(cout, cout, 3, padding=1)
            self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

        def forward(self, x, t):
            h = self.c1(F.silu(self.n1(x))) + self.t(t)[:, :, None, None]
            return self.skip(x) + self.c2(F.silu(self.n2(h)))

    class Attn(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.n, self.qkv, self.o = nn.GroupNorm(8, c), nn.Conv2d(c, 3 * c, 1), nn.Conv2d(c, c, 1)

        def forward(self, x):
            b, c, h, w = x.shape
            q, k, v = self.qkv(self.n(x)).reshape(b, 3, c, h * w).transpose(-1, -2).unbind(1)
            a = F.scaled_dot_product_attention(q[:, None], k[:, None], v[:, None])[:, 0]
            return x + self.o(a.transpose(-1, -2).reshape(b, c, h, w))

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            temb = base * 4
            self.temb = nn.Sequential(nn.Linear(base, temb), nn.SiLU(), nn.Linear(temb, temb))
            self.inp = nn.Conv2d(3, base, 3, padding=1)
            chans = [base * m for m in mults]
            self.down, self.up = nn.ModuleList(), nn.ModuleList()
            c, skips = base, [base]
            for i, ch in enumerate(chans):
                blocks = nn.ModuleList([Res(c, ch, temb), Res(ch, ch, temb)])
                c = ch
                skips += [ch, ch]
                self.down.append(nn.ModuleDict({"res": blocks, "attn": Attn(ch) if i in attn_levels else nn.Identity(),
                                                "down": nn.Conv2d(ch, ch, 3, stride=2, padding=1)
                                                if i < len(chans) - 1 else nn.Identity()}))
                if i < len(chans) - 1:
                    skips.append(ch)
            self.mid = nn.ModuleList([Res(c, c, temb), Attn(c), Res(c, c, temb)])
            for i, ch in reversed(list(enumerate(chans))):
                blocks = nn.ModuleList()
                for _ in range(3):
                    blocks.append(Res(c + skips.pop(), ch, temb))
                    c = ch
                self.up.append(nn.ModuleDict({"res": blocks, "attn": Attn(ch) if i in attn_levels else nn.Identity(),
                                              "up": nn.Upsample(scale_factor=2) if i > 0 else nn.Identity()}))
            self.out = nn.Sequential(nn.GroupNorm(8, c), nn.SiLU(), nn.Conv2d(c, 3, 3, padding=1))
            self.base = base

        def forward(self, x, steps):
            half = self.base // 2
            freqs = torch.exp(-torch.arange(half, device=x.device) * (9.21 / half))
            e = steps.float()[:, None] * freqs[None]
            t = self.temb(torch.cat([e.sin(), e.cos()], dim=1))
            h = self.inp(x)
            hs = [h]
            for lvl in self.down:
                for r in lvl["res"]:
                    h = lvl["attn"](r(h, t))
                    hs.append(h)
                if not isinstance(lvl["down"], nn.Identity):
                    h = lvl["down"](h)
                    hs.append(h)
            h = self.mid[2](self.mid[1](self.mid[0](h, t)), t)
            for lvl in self.up:
                for r in lvl["res"]:
                    h = lvl["attn"](r(torch.cat([h, hs.pop()], dim=1), t))
                h = lvl["up"](h)
            return self.out(h)

    return UNet()


def diffusion_unet(env):
    torch = env.torch
    F = torch.nn.functional
    base, mults, attn, res, batch = (16, (1, 2), (1,), 16, 2) if env.tiny else (128, (1, 2, 2, 4), (2, 3), 64, 32)
    if importlib.util.find_spec("diffusers") is not None:
        from diffusers import UNet2DModel

        down = tuple("AttnDownBlock2D" if i in attn else "DownBlock2D" for i in range(len(mults)))
        up = tuple("AttnUpBlock2D" if i in attn else "UpBlock2D" for i in reversed(range(len(mults))))
        net = env.build(lambda: UNet2DModel(sample_size=res, in_channels=3, out_channels=3, layers_per_block=2,
                          block_out_channels=tuple(base * m for m in mults), down_block_types=down,
                          up_block_types=up, norm_num_groups=8))
        call = lambda x, s: net(x, s).sample  # noqa: E731
        kind = "diffusers UNet2DModel"
    else:
        net = env.build(lambda: plain_unet(env, base, mults, attn))
        call = net
        kind = "UNet2DModel-like UNet in plain PyTorch (diffusers not installed)"
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4)
    # A linear DDPM schedule: x_t = sqrt(a) x0 + sqrt(1 - a) noise.
    alphas = torch.cumprod(1 - torch.linspace(1e-4, 0.02, 1000, device=env.device), 0)
    for _ in env.loop(env.steps(16)):
        x0 = torch.randn(batch, 3, res, res, device=env.device)
        noise = torch.randn_like(x0)
        t = torch.randint(0, 1000, (batch,), device=env.device)
        a = alphas[t][:, None, None, None]
        with env.autocast():
            loss = F.mse_loss(call(a.sqrt() * x0 + (1 - a).sqrt() * noise, t).float(), noise)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    sample_steps = 2 if env.tiny else 10
    with torch.no_grad(), env.autocast():
        x = torch.randn(batch // 2 or 1, 3, res, res, device=env.device)
        for i in reversed(range(0, 1000, 1000 // sample_steps)):
            t = torch.full((x.shape[0],), i, device=env.device)
            a = alphas[i]
            x = (x - (1 - a).sqrt() * call(x, t).float()) / a.sqrt() * 0.5 + x * 0.5
    return {"model": f"{kind}: channels {tuple(base * m for m in mults)}, attention at levels {attn}, "
                     f"{res}x{res} RGB",
            "workload": f"noise-prediction training, batch {batch}, bf16 autocast, AdamW; then {sample_steps} "
                        f"sampling steps at batch {batch // 2 or 1}", "steps": env.count}


def bert_dynamic(env):
    from transformers import BertConfig, BertForSequenceClassification

    torch = env.torch
    cfg = BertConfig(num_labels=4)
    if env.tiny:
        cfg = BertConfig(num_labels=4, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=128, vocab_size=1000, max_position_embeddings=64)
    model = env.build(lambda: BertForSequenceClassification(cfg))
    opt = torch.optim.AdamW(model.parameters(), lr=2e-5)
    batch, longest = (4, 64) if env.tiny else (32, 512)
    lengths_seen = []
    for _ in env.loop(env.steps(24)):
        lengths = [env.rng.randint(16 if not env.tiny else 4, longest) for _ in range(batch)]
        t = max(lengths)
        lengths_seen.append(t)
        ids = torch.randint(5, cfg.vocab_size, (batch, t), device=env.device)
        mask = (torch.arange(t, device=env.device)[None, :] <
                torch.tensor(lengths, device=env.device)[:, None]).long()
        labels = torch.randint(0, 4, (batch,), device=env.device)
        with env.autocast():
            loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return {"model": "BERT-base (BertConfig: 12 layers, width 768), sequence classification",
            "workload": f"training with dynamic padding: batch {batch}, lengths 16-{longest} per sample, each batch "
                        f"padded to its longest ({min(lengths_seen)}-{max(lengths_seen)}), bf16 autocast, AdamW",
            "steps": env.count}


def multi_stream(env):
    torch = env.torch
    nn = torch.nn
    width, batch, depth = (32, 8, 2) if env.tiny else (2048, 512, 6)
    trunk = nn.Sequential(*[m for _ in range(depth) for m in (nn.Linear(width, width), nn.GELU())]).to(env.device)
    head = nn.Linear(width, 10).to(env.device)
    aux = nn.Sequential(nn.Linear(width, width * 2), nn.GELU(), nn.Linear(width * 2, 10)).to(env.device)
    opt = torch.optim.AdamW([*trunk.parameters(), *head.parameters(), *aux.parameters()], lr=1e-4)
    copy_stream, aux_stream = env.stream(), env.stream()
    host = [env.pin(torch.randn(batch * (1 + i % 3), width)) for i in range(3)]

    def prefetch(i):
        with env.on(copy_stream):
            return host[i % len(host)].to(env.device, non_blocking=True)

    nxt = prefetch(0)
    for s in env.loop(env.steps(60)):
        env.wait(copy_stream)
        x = nxt
        if copy_stream is not None:
            x.record_stream(torch.cuda.current_stream())  # made on the copy stream, used on this one
        nxt = prefetch(s + 1)  # the next batch copies while this one computes
        y = torch.randint(0, 10, (x.shape[0],), device=env.device)
        with env.autocast():
            feats = trunk(x)
        # The auxiliary head runs on its own stream, overlapping the main loss.
        env.wait(torch.cuda.current_stream() if env.cuda else None, on=aux_stream)
        with env.on(aux_stream), env.autocast():
            aux_loss = nn.functional.cross_entropy(aux(feats.detach()), y)
        if aux_stream is not None:
            feats.record_stream(aux_stream)
            y.record_stream(aux_stream)
        with env.autocast():
            loss = nn.functional.cross_entropy(head(feats), y)
        env.wait(aux_stream)
        (loss + aux_loss).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del x, feats, y, loss, aux_loss
    return {"model": f"MLP trunk ({depth} x Linear {width}) with a main and an auxiliary head",
            "workload": f"training with batches of {batch}-{3 * batch} prefetched from pinned memory on a copy "
                        "stream (record_stream on the compute stream) and the auxiliary head's forward on a second "
                        "compute stream (record_stream of its inputs), bf16 autocast, AdamW",
            "steps": env.count, "streams": 3 if env.cuda else 1}


def long_run(env):
    torch = env.torch
    model, cfg = gpt2_model(env, layers=4, width=256, heads=4, positions=512, vocab=8192)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    for _ in env.loop(env.steps(400)):
        b = env.rng.choice([8, 16, 24, 32]) if not env.tiny else 2
        t = env.rng.choice([128, 256, 384, 512]) if not env.tiny else 16
        lm_step(env, model, opt, cfg.vocab_size, b, t)
    return {"model": "small GPT-2 (GPT2Config: 4 layers, width 256, 4 heads, vocab 8192)",
            "workload": "long training run, bf16 autocast, AdamW; batch 8-32 and sequence length 128-512 drawn "
                        "every step", "steps": env.count}


def epochs_eval(env):
    torch = env.torch
    model, cfg = gpt2_model(env, layers=6, width=512, heads=8, positions=512, vocab=16384)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    epochs, per_epoch = (2, 1) if env.tiny else (3, max(1, int(round(12 * env.scale))))
    batch, t = (2, 16) if env.tiny else (16, 512)
    eval_batches = 1 if env.tiny else 4
    for _ in env.loop(epochs):
        model.train()
        for _ in range(per_epoch):
            lm_step(env, model, opt, cfg.vocab_size, batch, t)
        if env.cuda:
            torch.cuda.empty_cache()
        model.eval()
        with torch.no_grad(), env.autocast():
            for _ in range(eval_batches):
                ids = torch.randint(0, cfg.vocab_size, (batch * 4, t), device=env.device)
                model(input_ids=ids, labels=ids).loss.item()
        if env.cuda:
            torch.cuda.empty_cache()
    epochs = env.count
    return {"model": "GPT-2 (GPT2Config: 6 layers, width 512, 8 heads, vocab 16384)",
            "workload": f"{epochs} epochs of {per_epoch} training steps (batch {batch} x {t}, bf16 autocast, AdamW), "
                        f"an eval pass of {eval_batches} batches of {batch * 4} x {t} under no_grad after each; "
                        "torch.cuda.empty_cache() after every training phase and every eval pass",
            "steps": epochs * per_epoch, "empty_cache_between_phases": True}


WORKLOADS = {
    "llm_train": llm_train,
    "llm_serve": llm_serve,
    "vision_train": vision_train,
    "diffusion_unet": diffusion_unet,
    "bert_dynamic": bert_dynamic,
    "multi_stream": multi_stream,
    "long_run": long_run,
    "epochs_eval": epochs_eval,
}


# ------------------------------------------------------------------ history ---
def history_info(snapshot, max_entries):
    """What the snapshot's history holds for its busiest device, and whether
    PyTorch's ring (max_entries) may have dropped early events: it keeps the
    last max_entries entries, so a full ring means the start is lost."""
    traces = snapshot.get("device_traces", [])
    device = max(range(len(traces)), key=lambda d: len(traces[d])) if traces else -1
    entries = len(traces[device]) if traces else 0
    first = traces[device][0]["action"] if entries else None
    return {"device_index": device, "entries": entries, "max_entries": max_entries,
            "dropped": entries >= max_entries, "first_action": first}


def convert(genesis_mem, pickle_path, trace_path):
    """`genesis-mem convert --json`: the CSV trace and what it holds."""
    p = subprocess.run([str(genesis_mem), "convert", str(pickle_path), str(trace_path), "--json"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"genesis-mem convert {pickle_path}: {(p.stderr or p.stdout).strip()[-800:]}")
    return json.loads(p.stdout)


def find_genesis_mem(explicit=None):
    for c in [explicit, os.environ.get("GENESIS_MEM"), os.path.join(ROOT, "build", "genesis-mem"),
              os.path.join(ROOT, "build-dev", "genesis-mem"), shutil.which("genesis-mem")]:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


def sidecar(name, info, peaks, history=None, converted=None, command=None):
    """The JSON sidecar of a trace (Note [Trace corpus] in
    include/genesis/debug/replay_corpus.h: genesis-mem reads "pytorch")."""
    out = {"name": name, "model": info.get("model"), "workload": info.get("workload"), "steps": info.get("steps")}
    for k, v in info.items():
        if k not in ("model", "workload", "steps", "device", "torch", "seconds"):
            out[k] = v
    if converted is not None:
        out["peak_live_bytes"] = converted["peak_live_bytes"]
        out["events"] = converted["events"]
        out["trace_counts"] = converted["counts"]
    out["pytorch"] = peaks
    out["history"] = history
    out["device"] = info.get("device")
    out["torch"] = info.get("torch")
    out["date"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    out["command"] = command
    return out


# --------------------------------------------------------------------- runs ---
def run_one(workload, setting, out_dir, record, scale, seed, max_entries, stacks, device="cuda", max_seconds=None,
            fixed=None):
    """One workload in this process. Returns its JSON result."""
    import torch

    res = {"workload_name": workload, "setting": setting, "torch": torch.__version__}
    if device == "cuda":
        if not torch.cuda.is_available():
            raise SystemExit("record_traces.py: needs a CUDA GPU (or --device cpu for a tiny dry run)")
        torch.cuda.init()
        res["device"] = torch.cuda.get_device_name()
        torch.backends.cudnn.benchmark = False  # the same kernels, so the same workspaces, in every run
        # Nothing may be allocated yet: the trace starts from an empty allocator.
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        if torch.cuda.memory_allocated() != 0:
            raise RuntimeError("memory allocated before the workload started")
        if record:
            torch.cuda.memory._record_memory_history(enabled="all", context="alloc" if stacks else None,
                                                     stacks="python", max_entries=max_entries, clear_history=True)
    else:
        res["device"] = "cpu"
    env = Env(torch, device, scale, seed, max_seconds=max_seconds, fixed=fixed)
    t0 = time.perf_counter()
    info = WORKLOADS[workload](env)
    res["iterations"] = env.count  # of the main loop: what runs under other settings repeat
    if device == "cuda":
        torch.cuda.synchronize()
    res["seconds"] = round(time.perf_counter() - t0, 2)
    res.update(info)
    if device == "cuda":
        res["peak_reserved_bytes"] = torch.cuda.max_memory_reserved()
        res["peak_allocated_bytes"] = torch.cuda.max_memory_allocated()
        if record:
            snap = torch.cuda.memory._snapshot()
            torch.cuda.memory._record_memory_history(enabled=None)
            res["history"] = history_info(snap, max_entries)
            path = os.path.join(out_dir, workload + ".pickle")
            with open(path, "wb") as f:
                pickle.dump(snap, f, protocol=pickle.HIGHEST_PROTOCOL)
            res["pickle"] = path
    return res


def child(args_list, setting):
    """This script in a fresh interpreter with PYTORCH_CUDA_ALLOC_CONF set
    for `setting`; its last stdout line is JSON."""
    env = dict(os.environ)
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    if SETTINGS[setting]:
        env["PYTORCH_CUDA_ALLOC_CONF"] = SETTINGS[setting]
    cmd = [sys.executable, os.path.abspath(__file__), "run-one", "--setting", setting, *args_list]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        return {"ok": False, "error": (p.stderr or p.stdout).strip()[-1500:]}
    r = json.loads(lines[-1])
    r["ok"] = True
    return r


def record_all(args):
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    names = args.workloads.split(",") if args.workloads else list(WORKLOADS)
    for n in names:
        if n not in WORKLOADS:
            raise SystemExit(f"record_traces.py: unknown workload '{n}' (expected one of {', '.join(WORKLOADS)})")
    settings = args.settings.split(",")
    for s in settings:
        if s not in SETTINGS:
            raise SystemExit(f"record_traces.py: unknown setting '{s}' (expected {', '.join(SETTINGS)})")
    genesis_mem = None
    if not args.no_convert:
        genesis_mem = find_genesis_mem(args.genesis_mem)
        if genesis_mem is None:
            raise SystemExit("record_traces.py: genesis-mem not found (build target genesis-mem, or --genesis-mem "
                             "PATH; or --no-convert, then the convert command)")
    common = ["--out", out, "--scale", str(args.scale), "--seed", str(args.seed), "--max-entries",
              str(args.max_entries), "--max-seconds", str(args.max_seconds)] + (["--stacks"] if args.stacks else [])
    command = " ".join(shlex.quote(a) for a in [sys.executable, *sys.argv])
    # 1. The recordings, one at a time (each alone on the GPU), each converted
    # and given its sidecar at once: a run cut short keeps what it finished.
    sidecars, failed = {}, 0
    for n in names:
        t0 = time.perf_counter()
        r = child(["--workload", n, "--record", *common], "native")
        line = {"workload": n, "ok": r["ok"], "seconds": round(time.perf_counter() - t0, 1)}
        if not r["ok"]:
            failed += 1
            line["error"] = r["error"][-300:]
            print(json.dumps(line), flush=True)
            with open(os.path.join(out, n + ".failed.json"), "w") as f:
                json.dump({"name": n, "error": r["error"], "command": command}, f, indent=1)
            continue
        info = {k: v for k, v in r.items() if k not in ("ok", "history", "pickle", "peak_reserved_bytes",
                                                         "peak_allocated_bytes", "setting", "workload_name")}
        peaks = {"native": {"peak_reserved_bytes": r["peak_reserved_bytes"],
                            "peak_allocated_bytes": r["peak_allocated_bytes"], "seconds": r.get("seconds")}}
        converted = None
        if genesis_mem is not None:
            try:
                converted = convert(genesis_mem, r["pickle"], os.path.join(out, n + ".trace.csv.gz"))
            except RuntimeError as e:
                failed += 1
                info["conversion_error"] = str(e)
        side = sidecar(n, info, peaks, r["history"], converted, command)
        sidecars[n] = side
        write_json(os.path.join(out, n + ".json"), side)
        line.update(steps=side["steps"], peak_live=side.get("peak_live_bytes"), peak_reserved=r["peak_reserved_bytes"],
                    peak_allocated=r["peak_allocated_bytes"], entries=r["history"]["entries"],
                    dropped=r["history"]["dropped"],
                    unknown_frees=converted["counts"]["unknown_frees"] if converted else None)
        print(json.dumps(line), flush=True)

    # 2. Peaks under the other settings: nothing is timed, so several at once;
    # each sidecar is rewritten as its runs finish.
    others = [(n, s) for n in sidecars for s in settings if s != "native"]

    def peak_run(ns):
        n, s = ns
        return ns, child(["--workload", n, "--fixed", str(sidecars[n]["iterations"]), *common], s)

    with ThreadPoolExecutor(max_workers=max(1, args.parallel)) as pool:
        for (n, s), r in pool.map(peak_run, others):
            fig = ({"peak_reserved_bytes": r["peak_reserved_bytes"], "peak_allocated_bytes": r["peak_allocated_bytes"],
                    "seconds": r.get("seconds")} if r["ok"] else {"error": r["error"][-300:]})
            sidecars[n]["pytorch"][s] = fig
            write_json(os.path.join(out, n + ".json"), sidecars[n])
            print(json.dumps({"workload": n, "setting": s, **fig}), flush=True)
    for n, side in sidecars.items():
        figs = {s: f["peak_reserved_bytes"] for s, f in side["pytorch"].items() if "peak_reserved_bytes" in f}
        best = min(figs, key=figs.get) if figs else None
        print(json.dumps({"trace": n, "steps": side["steps"], "peak_live": side.get("peak_live_bytes"),
                          "pytorch_reserved": figs, "best": best}), flush=True)
    return 1 if failed else 0


def convert_all(args):
    """Converts every NAME.pickle of --out that has a sidecar (a recording
    made with --no-convert) and completes the sidecar."""
    out = os.path.abspath(args.out)
    genesis_mem = find_genesis_mem(args.genesis_mem)
    if genesis_mem is None:
        raise SystemExit("record_traces.py: genesis-mem not found (build target genesis-mem, or --genesis-mem PATH)")
    failed = 0
    names = sorted(f[:-len(".pickle")] for f in os.listdir(out) if f.endswith(".pickle"))
    if not names:
        raise SystemExit(f"record_traces.py: no NAME.pickle in {out}")
    for n in names:
        side_path = os.path.join(out, n + ".json")
        side = {}
        if os.path.exists(side_path):
            with open(side_path) as f:
                side = json.load(f)
        try:
            c = convert(genesis_mem, os.path.join(out, n + ".pickle"), os.path.join(out, n + ".trace.csv.gz"))
            side.update(peak_live_bytes=c["peak_live_bytes"], events=c["events"], trace_counts=c["counts"])
            side.pop("conversion_error", None)
            print(json.dumps({"trace": n, "peak_live": c["peak_live_bytes"], "events": c["events"],
                              "unknown_frees": c["counts"]["unknown_frees"]}), flush=True)
        except RuntimeError as e:
            failed += 1
            side["conversion_error"] = str(e)
            print(json.dumps({"trace": n, "error": str(e)[-300:]}), flush=True)
        write_json(side_path, side)
    return 1 if failed else 0


def write_json(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    scale_default = float(os.environ.get("GENESIS_TRACE_SCALE", "1"))

    def common(p):
        p.add_argument("--out", required=True, help="output folder")
        p.add_argument("--scale", type=float, default=scale_default, help="steps scale (GENESIS_TRACE_SCALE)")
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--max-entries", type=int, default=DEFAULT_MAX_ENTRIES,
                       help="PyTorch's history ring size (a full ring has dropped early events)")
        p.add_argument("--stacks", action="store_true", help="record Python stacks of allocations (large pickles)")
        p.add_argument("--max-seconds", type=float, default=None,
                       help="stop a workload's main loop after this long (default 20 s x scale; Note [Bounded "
                            "workloads])")

    r = sub.add_parser("record", help="record every workload (or --workloads) into --out")
    common(r)
    r.add_argument("--workloads", help="comma list (default: all)")
    r.add_argument("--settings", default="native",
                   help="comma list of native, expandable_segments, cudaMallocAsync: peaks under each (native "
                        "is the recorded run)")
    r.add_argument("--all-settings", action="store_true", help="--settings native,expandable_segments,cudaMallocAsync")
    r.add_argument("--parallel", type=int, default=2, help="peak-only runs at once")
    r.add_argument("--genesis-mem", help="genesis-mem executable (default: build/, build-dev/, PATH)")
    r.add_argument("--no-convert", action="store_true", help="leave NAME.pickle unconverted (see convert)")
    c = sub.add_parser("convert", help="convert the NAME.pickle files of --out (after record --no-convert)")
    c.add_argument("--out", required=True)
    c.add_argument("--genesis-mem")
    o = sub.add_parser("run-one", help="one workload in this process (what record runs per workload)")
    common(o)
    o.add_argument("--workload", choices=list(WORKLOADS), required=True)
    o.add_argument("--setting", choices=list(SETTINGS), default="native")
    o.add_argument("--record", action="store_true", help="record the history and write NAME.pickle")
    o.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="cpu: tiny sizes, no trace")
    o.add_argument("--fixed", type=int, help="run the main loop exactly this many times (no time limit)")
    sub.add_parser("list", help="the workloads")
    args = ap.parse_args()
    if args.cmd == "list":
        for n, f in WORKLOADS.items():
            print(n)
        return 0
    if args.cmd == "convert":
        return convert_all(args)
    if args.max_seconds is None:
        args.max_seconds = DEFAULT_MAX_SECONDS * args.scale
    if args.cmd == "run-one":
        os.makedirs(args.out, exist_ok=True)
        res = run_one(args.workload, args.setting, args.out, args.record, args.scale, args.seed, args.max_entries,
                      args.stacks, args.device, args.max_seconds, args.fixed)
        print(json.dumps(res), flush=True)
        return 0
    if args.all_settings:
        args.settings = ",".join(SETTINGS)
    return record_all(args)


if __name__ == "__main__":
    sys.exit(main())
