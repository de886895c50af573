"""The workloads of bench/torch/record_traces.py: real PyTorch jobs whose
allocations make the trace corpus, each a function of an Env (the device,
the scale, the seed, how long its main loop may run) returning what it did.
They run on CUDA at full size, or on the CPU at tiny sizes (tests).
Models are built from configs: nothing is downloaded."""

import contextlib
import importlib.util
import random
import time

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
            b = env.rng.randint(8, 32) if not env.tiny else 2
            prompts = [env.rng.randint(16, 512 if not env.tiny else 16) for _ in range(b)]
            gens = [env.rng.randint(4, 64 if not env.tiny else 4) for _ in range(b)]
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
            "workload": f"serving {requests} requests in {batches} batches of 8-32: prompts of 16-512 tokens "
                        f"(left-padded, masked), 4-64 generated tokens each ({tokens} in all), KV cache grown "
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


def moe_train(env):
    """Tokens routed to experts: how many each expert gets, hence the size of
    its activations, changes with every batch and every layer."""
    from transformers import MixtralConfig, MixtralForCausalLM

    torch = env.torch
    if env.tiny:
        cfg = MixtralConfig(vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                            num_attention_heads=2, num_key_value_heads=1, num_local_experts=4,
                            num_experts_per_tok=2, max_position_embeddings=128, output_router_logits=True)
    else:
        cfg = MixtralConfig(vocab_size=32000, hidden_size=768, intermediate_size=2048, num_hidden_layers=8,
                            num_attention_heads=12, num_key_value_heads=4, num_local_experts=8,
                            num_experts_per_tok=2, max_position_embeddings=2048, output_router_logits=True)
    model = env.build(lambda: MixtralForCausalLM(cfg))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    shapes = [(8, 1024), (16, 512), (4, 2048), (32, 256), (12, 640), (6, 1536)]
    for _ in env.loop(env.steps(20)):
        b, t = env.rng.choice(shapes)
        if env.tiny:
            b, t = 2, min(t // 32, cfg.max_position_embeddings)
        lm_step(env, model, opt, cfg.vocab_size, b, t)
    return {"model": f"mixture of experts (MixtralConfig: {cfg.num_hidden_layers} layers, width {cfg.hidden_size}, "
                     f"{cfg.num_local_experts} experts, top {cfg.num_experts_per_tok})",
            "workload": "training with the router's load-balancing loss, bf16 autocast, AdamW; batch and sequence "
                        "length drawn every step from (8,1024) (16,512) (4,2048) (32,256) (12,640) (6,1536)",
            "steps": env.count}


def llama_model(env, layers, width, heads, kv_heads, intermediate):
    """A Llama-style decoder from its config (tiny on the CPU), in bf16 on CUDA."""
    from transformers import LlamaConfig, LlamaForCausalLM

    if env.tiny:
        layers, width, heads, kv_heads, intermediate = 2, 64, 2, 1, 128
    cfg = LlamaConfig(vocab_size=1000 if env.tiny else 32000, hidden_size=width, intermediate_size=intermediate,
                      num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
                      max_position_embeddings=256 if env.tiny else 4096)
    dtype = env.torch.bfloat16 if env.cuda else env.torch.float32
    return env.build(lambda: LlamaForCausalLM(cfg)).to(dtype), cfg


def llm_generate(env):
    """transformers' own generate(): its dynamic KV cache, logits processors
    and stopping checks, for batches of left-padded prompts."""
    torch = env.torch
    model, cfg = llama_model(env, layers=8, width=1024, heads=16, kv_heads=8, intermediate=2816)
    model.eval()
    # Random weights: no end-of-sequence token, so each batch generates exactly
    # the tokens it asked for, the same in every run.
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    requests = tokens = 0
    with torch.inference_mode():
        for _ in env.loop(env.steps(40)):
            b = env.rng.randint(1, 48) if not env.tiny else 2
            lengths = [env.rng.randint(8, 1024 if not env.tiny else 16) for _ in range(b)]
            gen = env.rng.randint(8, 128) if not env.tiny else 3
            t = max(lengths)
            ids = torch.randint(3, cfg.vocab_size, (b, t), device=env.device)
            mask = (torch.arange(t, device=env.device)[None, :] >=
                    torch.tensor([t - n for n in lengths], device=env.device)[:, None]).long()
            model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=gen,
                           do_sample=False, pad_token_id=0)
            requests += b
            tokens += b * gen
    return {"model": f"Llama-style decoder (LlamaConfig: {cfg.num_hidden_layers} layers, width {cfg.hidden_size}, "
                     f"{cfg.num_attention_heads} heads, {cfg.num_key_value_heads} KV heads), bf16",
            "workload": f"transformers generate(), greedy, {requests} requests in {env.count} batches of 1-48: "
                        f"prompts of 8-1024 tokens left-padded, 8-128 new tokens per batch ({tokens} in all), "
                        "dynamic KV cache", "steps": env.count, "requests": requests, "generated_tokens": tokens}


def seq2seq_train(env):
    """An encoder-decoder: two sequence lengths that change independently,
    and cross-attention between them."""
    from transformers import T5Config, T5ForConditionalGeneration

    torch = env.torch
    if env.tiny:
        cfg = T5Config(vocab_size=1000, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=2,
                       decoder_start_token_id=0, pad_token_id=0)
    else:
        cfg = T5Config(vocab_size=32128, d_model=512, d_kv=64, d_ff=2048, num_layers=6, num_decoder_layers=6,
                       num_heads=8, decoder_start_token_id=0, pad_token_id=0)
    model = env.build(lambda: T5ForConditionalGeneration(cfg))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in env.loop(env.steps(40)):
        b = env.rng.choice([16, 32, 48, 64]) if not env.tiny else 2
        src = env.rng.randint(32, 512) if not env.tiny else 12
        tgt = env.rng.randint(8, 128) if not env.tiny else 5
        ids = torch.randint(1, cfg.vocab_size, (b, src), device=env.device)
        labels = torch.randint(1, cfg.vocab_size, (b, tgt), device=env.device)
        with env.autocast():
            loss = model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return {"model": "T5-small-like encoder-decoder (T5Config: 6+6 layers, width 512, 8 heads)",
            "workload": "training, bf16 autocast, AdamW; batch 16-64, source length 32-512 and target length "
                        "8-128 drawn every step", "steps": env.count}


def detection_train(env):
    """An object detector: images of different shapes, a variable number of
    boxes and region proposals, so that nearly every tensor changes size."""
    import torchvision

    torch = env.torch
    sizes = dict(min_size=64, max_size=96) if env.tiny else {}
    model = env.build(lambda: torchvision.models.detection.fasterrcnn_resnet50_fpn(
        weights=None, weights_backbone=None, num_classes=91, **sizes))
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.005, momentum=0.9, weight_decay=1e-4)
    images_seen = 0
    for _ in env.loop(env.steps(40)):
        n = env.rng.randint(2, 6) if not env.tiny else 2
        images, targets = [], []
        for _ in range(n):
            h = env.rng.randint(360, 800) if not env.tiny else 48
            w = env.rng.randint(480, 1200) if not env.tiny else 64
            images.append(torch.rand(3, h, w, device=env.device))
            k = env.rng.randint(1, 30)
            x0 = torch.rand(k, device=env.device) * (w * 0.7)
            y0 = torch.rand(k, device=env.device) * (h * 0.7)
            bw = 8 + torch.rand(k, device=env.device) * (w * 0.3)
            bh = 8 + torch.rand(k, device=env.device) * (h * 0.3)
            targets.append({"boxes": torch.stack([x0, y0, x0 + bw, y0 + bh], dim=1),
                            "labels": torch.randint(1, 91, (k,), device=env.device)})
        losses = model(images, targets)
        sum(losses.values()).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        images_seen += n
    return {"model": "torchvision Faster R-CNN, ResNet-50 FPN backbone (no pretrained weights), 91 classes",
            "workload": f"training, fp32, SGD; {images_seen} images in batches of 2-6, each 360-800 x 480-1200 "
                        "pixels (resized by the model to 800 on the short side), 1-30 random boxes each",
            "steps": env.count}


def lora_finetune(env):
    """Fine-tuning with adapters: a frozen bf16 base model, small trainable
    matrices, activation checkpointing and gradient accumulation over
    micro-batches of different shapes."""
    from peft import LoraConfig, get_peft_model

    torch = env.torch
    base, cfg = llama_model(env, layers=12, width=2048, heads=16, kv_heads=16, intermediate=5632)
    base.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model = get_peft_model(base, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.05,
                                            target_modules=["q_proj", "k_proj", "v_proj", "o_proj"]))
    model.train()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=2e-4)
    micro = [(4, 1024), (8, 512), (2, 2048), (16, 256), (6, 768)]
    for _ in env.loop(env.steps(16)):
        for _ in range(4):  # gradient accumulation
            b, t = env.rng.choice(micro)
            if env.tiny:
                b, t = 2, t // 64
            ids = torch.randint(0, cfg.vocab_size, (b, t), device=env.device)
            with env.autocast():
                loss = model(input_ids=ids, labels=ids).loss / 4
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return {"model": f"Llama-style decoder (LlamaConfig: {cfg.num_hidden_layers} layers, width {cfg.hidden_size}) "
                     "in bf16, frozen, with LoRA adapters (peft, rank 16, on the attention projections)",
            "workload": "fine-tuning with activation checkpointing, 4 micro-batches per step drawn from (4,1024) "
                        "(8,512) (2,2048) (16,256) (6,768), bf16 autocast, AdamW on the adapters",
            "steps": env.count}


def vit_train(env):
    """A vision transformer: activations grow with the batch as the square of
    nothing (fixed patches), but attention's buffers and the optimizer's state
    are large beside the convolutional models."""
    import torchvision

    torch = env.torch
    if env.tiny:
        make = lambda: torchvision.models.VisionTransformer(image_size=32, patch_size=16, num_layers=2,  # noqa: E731
                                                            num_heads=2, hidden_dim=32, mlp_dim=64)
        res, batches = 32, [2, 3]
    else:
        make = lambda: torchvision.models.vit_b_16(weights=None)  # noqa: E731
        res, batches = 224, [64, 48, 96, 32, 80]
    model = env.build(make)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in env.loop(env.steps(24)):
        b = env.rng.choice(batches)
        x = torch.randn(b, 3, res, res, device=env.device)
        y = torch.randint(0, 1000, (b,), device=env.device)
        with env.autocast():
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
    return {"model": "torchvision vit_b_16" if not env.tiny else "torchvision VisionTransformer (tiny)",
            "workload": f"training at {res}x{res}, batch drawn every step from {batches}, bf16 autocast, AdamW, "
                        "gradient clipping", "steps": env.count}


def gnn_train(env):
    """Message passing over graphs of random sizes: every tensor's size is a
    node or edge count drawn per batch, so no two steps allocate alike and
    few sizes are round."""
    torch = env.torch
    nn = torch.nn
    width, layers = (16, 2) if env.tiny else (256, 4)
    lins = nn.ModuleList([nn.Linear(width, width) for _ in range(layers)]).to(env.device)
    msgs = nn.ModuleList([nn.Linear(2 * width, width) for _ in range(layers)]).to(env.device)
    head = nn.Linear(width, 8).to(env.device)
    opt = torch.optim.Adam([*lins.parameters(), *msgs.parameters(), *head.parameters()], lr=1e-3)
    for _ in env.loop(env.steps(80)):
        graphs = 2 if env.tiny else env.rng.randint(8, 48)
        sizes = [env.rng.randint(5, 40) if env.tiny else env.rng.randint(200, 2000) for _ in range(graphs)]
        n = sum(sizes)
        e = n * (3 if env.tiny else env.rng.randint(4, 16))
        h = torch.randn(n, width, device=env.device)
        src = torch.randint(0, n, (e,), device=env.device)
        dst = torch.randint(0, n, (e,), device=env.device)
        batch = torch.repeat_interleave(torch.arange(graphs, device=env.device),
                                        torch.tensor(sizes, device=env.device))
        for lin, msg in zip(lins, msgs):
            m = msg(torch.cat([h[src], h[dst]], dim=1)).relu()
            agg = torch.zeros_like(h).index_add_(0, dst, m)
            h = (lin(h) + agg).relu()
        pooled = torch.zeros(graphs, width, device=env.device).index_add_(0, batch, h)
        y = torch.randint(0, 8, (graphs,), device=env.device)
        loss = nn.functional.cross_entropy(head(pooled), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return {"model": f"graph network ({layers} message-passing layers, width {width})",
            "workload": "training on batches of 8-48 random graphs of 200-2000 nodes and 4-16 edges per node: "
                        "gathers, concatenations and index_add_ whose sizes change every step", "steps": env.count}


def lstm_packed(env):
    """A recurrent model over packed sequences of varying lengths: cuDNN's
    workspace and reserve buffers, sized by the batch's total length."""
    torch = env.torch
    nn = torch.nn
    feat, hidden, layers = (8, 16, 1) if env.tiny else (80, 512, 3)
    rnn = nn.LSTM(feat, hidden, num_layers=layers, bidirectional=True, batch_first=True).to(env.device)
    head = nn.Linear(2 * hidden, 32).to(env.device)
    opt = torch.optim.Adam([*rnn.parameters(), *head.parameters()], lr=1e-3)
    pack = nn.utils.rnn.pack_padded_sequence
    for _ in env.loop(env.steps(60)):
        b = 2 if env.tiny else env.rng.choice([16, 24, 32, 48])
        lengths = sorted((env.rng.randint(4, 12) if env.tiny else env.rng.randint(50, 1500) for _ in range(b)),
                         reverse=True)
        x = torch.randn(b, lengths[0], feat, device=env.device)
        out, _ = rnn(pack(x, torch.tensor(lengths), batch_first=True))
        logits = head(out.data)
        y = torch.randint(0, 32, (logits.shape[0],), device=env.device)
        loss = nn.functional.cross_entropy(logits, y)
        loss.backward()
        nn.utils.clip_grad_norm_(rnn.parameters(), 5.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
    return {"model": f"bidirectional LSTM ({layers} layers, hidden {hidden}, cuDNN)",
            "workload": "speech-like training on packed batches of 16-48 sequences of 50-1500 frames, fp32, Adam, "
                        "gradient clipping", "steps": env.count}


WORKLOADS = {
    "llm_train": llm_train,
    "llm_serve": llm_serve,
    "vision_train": vision_train,
    "diffusion_unet": diffusion_unet,
    "bert_dynamic": bert_dynamic,
    "multi_stream": multi_stream,
    "long_run": long_run,
    "epochs_eval": epochs_eval,
    "moe_train": moe_train,
    "llm_generate": llm_generate,
    "seq2seq_train": seq2seq_train,
    "detection_train": detection_train,
    "lora_finetune": lora_finetune,
    "vit_train": vit_train,
    "gnn_train": gnn_train,
    "lstm_packed": lstm_packed,
}
