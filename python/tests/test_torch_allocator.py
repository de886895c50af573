"""Genesis as PyTorch's CUDA allocator, on a GPU with PyTorch (and CuPy when
present). Skipped cleanly without torch or a GPU.

Swapping PyTorch's allocator is once per process and must precede CUDA's
initialisation, so every scenario runs in a fresh interpreter (a small
script below) and reports with asserts and a final "OK".
"""

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest


def _gpu_torch():
    if importlib.util.find_spec("torch") is None:
        return "PyTorch is not installed"
    import torch

    if not torch.cuda.is_available():
        return "PyTorch sees no CUDA GPU"
    import genesis

    if not genesis.cuda.is_available():
        return "Genesis was built without CUDA or sees no GPU"
    return None


WHY = _gpu_torch()
pytestmark = pytest.mark.skipif(WHY is not None, reason=f"needs PyTorch and a CUDA GPU: {WHY}")

PRELUDE = """
import ctypes, gc, os, sys
import torch
import genesis
import genesis.torch as gt
"""


def run(body, env=None, timeout=180):
    code = PRELUDE + textwrap.dedent(body) + "\nprint('OK')\n"
    e = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), **(env or {}))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e, timeout=timeout)
    assert p.returncode == 0 and p.stdout.rstrip().endswith("OK"), f"stdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    return p


def test_tensors_and_a_training_step_run_on_genesis():
    run("""
        a = gt.use_genesis_allocator(expandable_segments=False)
        assert gt.is_active() and a.record_stream_forwarded
        torch.manual_seed(0)
        x = torch.randn(512, 256, device="cuda")
        w = torch.randn(256, 128, device="cuda")
        ref = (x.cpu() @ w.cpu())
        assert torch.allclose((x @ w).cpu(), ref, atol=1e-3)
        s = gt.memory_stats()
        assert s["allocated_bytes.all.current"] >= 512 * 256 * 4 + 256 * 128 * 4
        assert s["allocated_bytes.all.current"] == genesis.cuda.memory_stats(0)["allocated_bytes"]
        model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 10)).cuda()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        y = torch.randint(0, 10, (512,), device="cuda")
        losses = []
        for _ in range(20):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        assert losses[-1] < losses[0], losses
        peak = gt.max_memory_allocated()
        assert peak >= gt.memory_allocated() > 0
        del x, w, model, opt, loss
        gc.collect()
        before = gt.memory_reserved()
        torch.cuda.empty_cache()           # PyTorch's call reaches Genesis
        assert gt.memory_reserved() < before
        try:
            torch.cuda.memory_stats()
        except RuntimeError as e:          # PyTorch has no statistics of a pluggable allocator
            assert "getDeviceStats" in str(e) or "not yet support" in str(e), e
    """)


def test_record_stream_keeps_a_block_from_being_reused_early():
    run("""
        gt.use_genesis_allocator()
        n = 1 << 22
        side = torch.cuda.Stream()
        x = torch.full((n,), 3.0, device="cuda")
        torch.cuda.synchronize()
        ptr = x.data_ptr()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            # z first, and a copy: some operations (an allocation of a new
            # segment, out= arithmetic) wait for the stream, which would end
            # the sleep before the test begins.
            z = torch.empty_like(x)
            torch.cuda._sleep(200_000_000)   # the side stream is busy...
            z.copy_(x)                        # ...then reads x
        assert not side.query(), "the side stream finished too early: the test proves nothing"
        x.record_stream(side)
        del x
        y = torch.empty(n, device="cuda")     # same size, same stream as x
        assert y.data_ptr() != ptr, "x's block was handed out while the side stream still used it"
        y.fill_(7.0)
        torch.cuda.synchronize()
        assert bool((z == 3.0).all()), z[:4]
        # Without cross-stream use a block is reused on its stream at once.
        t = torch.empty(n, device="cuda"); p = t.data_ptr(); del t
        assert torch.empty(n, device="cuda").data_ptr() == p
    """)


def test_out_of_memory_carries_genesis_explanation():
    run("""
        gt.use_genesis_allocator(memory_fraction=0.05)
        total = torch.cuda.get_device_properties(0).total_memory
        try:
            torch.empty(int(total * 0.1), dtype=torch.uint8, device="cuda")
            raise SystemExit("no OOM")
        except RuntimeError as e:
            msg = str(e)
            assert msg.startswith("CUDA out of memory. Tried to allocate"), msg
            assert "Genesis allocator" in msg and "memory fraction" in msg, msg
            assert gt.is_genesis_oom(e)
        try:
            with gt.oom_as_torch_error():
                torch.empty(int(total * 0.1), dtype=torch.uint8, device="cuda")
            raise SystemExit("no OOM")
        except torch.OutOfMemoryError as e:
            assert "Genesis allocator" in str(e)
        assert gt.memory_stats()["num_ooms"] == 2
        x = torch.ones(1 << 20, device="cuda")   # still usable
        assert float(x.sum()) == float(1 << 20)
    """)


def test_frees_genesis_cannot_do_are_reported_not_fatal():
    p = run("""
        gt.use_genesis_allocator()
        x = torch.ones(10, device="cuda")
        try:
            torch.cuda.caching_allocator_delete(0x1234)   # PyTorch's own check comes first
        except RuntimeError as e:
            assert "not allocated here" in str(e), e
        from genesis.torch import _library
        lib = _library.load().lib
        lib.genesis_torch_free.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]
        lib.genesis_torch_free(0x1234, 16, 0, None)
        assert genesis._C._torch_bad_frees() == 1
        assert float((x + 1).sum()) == 20.0
    """)
    assert "which Genesis cannot free" in p.stderr


def test_a_late_switch_is_a_clear_error():
    for first in ("torch.ones(1, device='cuda')", "torch.cuda.current_device()"):
        run(f"""
            {first}
            try:
                gt.use_genesis_allocator()
                raise SystemExit("switched late")
            except RuntimeError as e:
                assert "before PyTorch initialises CUDA" in str(e) and "mem_pool" in str(e), e
            assert not gt.is_active()
        """)


def test_no_gpu_for_pytorch_is_a_clear_error():
    run("""
        try:
            gt.use_genesis_allocator()
            raise SystemExit("no error")
        except RuntimeError as e:
            assert "PyTorch sees no CUDA device" in str(e), e
    """, env={"CUDA_VISIBLE_DEVICES": ""})


def test_options_reach_the_allocators_and_bad_ones_are_refused_first():
    run("""
        try:
            gt.use_genesis_allocator(max_split_size_mb=128)
            raise SystemExit("accepted")
        except ValueError as e:
            assert "max_split_size_mb" in str(e) and "expandable_segments" in str(e), e
        assert not gt.is_active() and not torch.cuda.is_initialized()
        gt.use_genesis_allocator(expandable_segments=True, cache_size="1GB", thread_cache_small_count=64)
        x = torch.ones(1 << 24, device="cuda")
        a = genesis._C.cuda_allocator(0)
        assert a.expandable_segments
        assert gt.memory_stats()["cache_limit"] == 1_000_000_000
        gt.use_genesis_allocator(memory_fraction=0.5)       # can change while it lives
        assert gt.memory_stats()["memory_limit"] > 0
        try:
            gt.use_genesis_allocator(expandable_segments=False)   # cannot
            raise SystemExit("accepted")
        except ValueError as e:
            assert "cannot change while it lives" in str(e), e
        torch.cuda.set_per_process_memory_fraction(0.25)   # PyTorch's call reaches Genesis
        total = torch.cuda.get_device_properties(0).total_memory
        assert abs(gt.memory_stats()["memory_limit"] - 0.25 * total) < total * 0.01
    """)


def test_mem_pool_beside_pytorch_allocator():
    run("""
        pool = gt.mem_pool()
        with gt.use_mem_pool(pool):
            x = torch.arange(1 << 20, device="cuda", dtype=torch.float32)
        y = torch.ones(1 << 20, device="cuda")           # PyTorch's own allocator
        assert float(x[-1]) == float((1 << 20) - 1)
        g = genesis.cuda.memory_stats(0)
        assert g["reserved_bytes"] >= (1 << 22) and g["allocated_bytes"] >= (1 << 22)
        assert torch.cuda.memory_stats()["allocated_bytes.all.current"] >= 2 * (1 << 22)
        total = torch.cuda.get_device_properties(0).total_memory
        genesis.cuda.set_memory_fraction(0.05)
        try:
            with gt.use_mem_pool(pool):
                torch.empty(int(total * 0.1), dtype=torch.uint8, device="cuda")
            raise SystemExit("no OOM")
        except torch.OutOfMemoryError as e:
            assert "Genesis:" in str(e), e
        del x
        gc.collect()
        del pool
        gc.collect()
        torch.cuda.empty_cache()
        try:
            gt.use_genesis_allocator()
        except RuntimeError as e:
            assert "initialises CUDA" in str(e)
    """)


def test_cuda_graphs_capture_and_replay_on_genesis():
    run("""
        gt.use_genesis_allocator()
        x = torch.ones(1 << 20, device="cuda")
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):  # warm-up on a side stream, as torch.cuda.graph asks
                (x * 3 + 1).sum()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            tmp = x * 3           # a temporary freed during the capture
            z = tmp + 1
            del tmp
            out = z.sum()
        pools = genesis._C._torch_private_pools()
        assert len(pools) == 1 and pools[0]["live_blocks"] >= 2 and pools[0]["open"] == 0, pools
        # torch.cuda's totals count the graph's pool, as PyTorch's own do.
        key = "reserved_bytes.all.current"
        assert torch.cuda.memory_stats()[key] == genesis.cuda.memory_stats(0)[key] + pools[0]["stats"][key] > 0
        x.fill_(2.0)
        g.replay()
        torch.cuda.synchronize()
        assert float(out) == 7.0 * (1 << 20)
        # What the program allocates outside the graph never lands on the graph's memory.
        junk = [torch.full((1 << 20,), 5.0, device="cuda") for _ in range(16)]
        x.fill_(1.0)
        g.replay()
        torch.cuda.synchronize()
        assert float(out) == 4.0 * (1 << 20) and all(float(j[0]) == 5.0 for j in junk)
        del g
        gc.collect()
        assert genesis._C._torch_private_pools()[0]["released"], "the graph's outputs still hold its pool"
        del out, z
        gc.collect()
        assert genesis._C._torch_private_pools() == []
    """)


def test_a_graph_pool_keeps_its_memory_and_shows_in_snapshots():
    """A graph replays into blocks of its pool that are free between replays:
    empty_cache must not give them back, and the pool's segments show in
    snapshots under its id, as PyTorch lists its own graph pools."""
    run("""
        from torch.cuda import _memory_viz as viz
        gt.use_genesis_allocator()
        torch.cuda.memory._record_memory_history(max_entries=10000)
        x = torch.ones(1 << 20, device="cuda")
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                (x * 3 + 1).sum()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            tmp = x * 3            # free between replays, written by each
            out = (tmp + 1).sum()
            del tmp
        (pool,) = genesis._C._torch_private_pools()
        held = pool["stats"]["reserved_bytes.all.current"]
        assert held >= 4 << 20, pool
        torch.cuda.empty_cache()
        genesis.cuda.empty_cache()
        (after,) = genesis._C._torch_private_pools()
        assert after["stats"]["reserved_bytes.all.current"] == held, (pool, after)
        # Other memory the program frees still goes back.
        junk = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
        del junk
        torch.cuda.empty_cache()
        assert genesis.cuda.memory_stats(0)["reserved_bytes.all.current"] < (256 << 20)
        for v in (2.0, 5.0):
            x.fill_(v)
            g.replay()
            torch.cuda.synchronize()
            assert float(out) == (3 * v + 1) * (1 << 20)
        snap = torch.cuda.memory._snapshot()
        ids = {tuple(seg["segment_pool_id"]) for seg in snap["segments"]}
        mine = [seg for seg in snap["segments"] if tuple(seg["segment_pool_id"]) == tuple(pool["id"])]
        assert mine and sum(seg["total_size"] for seg in mine) == held, (ids, pool["id"])
        assert any(b["state"] == "active_allocated" for seg in mine for b in seg["blocks"])
        assert "base64" in viz.segment_plot(snap)
        torch.cuda.memory._record_memory_history(enabled=None)
        del g, out
        gc.collect()
        assert genesis._C._torch_private_pools() == []
    """)


def test_torch_compile_reduce_overhead_runs_on_genesis():
    run("""
        gt.use_genesis_allocator()
        torch.manual_seed(0)
        m = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 256)).cuda()
        cm = torch.compile(m, mode="reduce-overhead")
        with torch.no_grad():
            for i in range(6):
                x = torch.randn(64, 256, device="cuda")
                torch.testing.assert_close(cm(x).clone(), m(x), rtol=2e-3, atol=2e-3)
        assert genesis._C._torch_private_pools(), "no private pool: the graphs were not captured on Genesis"
    """, timeout=600)


def test_graph_trees_record_a_second_path_over_a_restored_pool():
    """torch.compile's CUDA graph trees: f then g recorded as one path; then
    f replayed and h (not a child of f) recorded after it, which restores the
    pool to its state after f while f's output lives. Every result must stay
    right, and the pool must end holding nothing once the outputs are gone."""
    run("""
        gt.use_genesis_allocator()
        torch.manual_seed(0)
        w1 = torch.randn(256, 512, device="cuda")
        w2 = torch.randn(512, 128, device="cuda")
        f = torch.compile(lambda x: (x @ w1).relu(), mode="reduce-overhead")
        g = torch.compile(lambda y: (y @ w2).sum(1), mode="reduce-overhead")
        h = torch.compile(lambda y: (y * 2).amax(1), mode="reduce-overhead")
        restores = []
        orig = torch._C._cuda_setCheckpointPoolState
        def counting(*a):
            restores.append(1)
            return orig(*a)
        torch._C._cuda_setCheckpointPoolState = counting
        with torch.no_grad():
            for second in (g, h, g, h):
                for _ in range(3):
                    torch.compiler.cudagraph_mark_step_begin()
                    x = torch.randn(64, 256, device="cuda")
                    y = f(x)
                    z = second(y)
                    ref_y = (x @ w1).relu()
                    ref_z = (ref_y @ w2).sum(1) if second is g else (ref_y * 2).amax(1)
                    torch.testing.assert_close(y, ref_y, rtol=2e-3, atol=2e-3)
                    torch.testing.assert_close(z, ref_z, rtol=2e-3, atol=2e-2)
        assert restores, "no checkpoint was restored: the test did not reach a second path"
        del x, y, z, ref_y, ref_z
        gc.collect()
        pools = genesis._C._torch_private_pools()
        assert pools, "no private pool: the graphs were not captured on Genesis"
        torch.cuda.memory_stats()  # a look at the pools: outputs that died give their blocks back
        print("restores", len(restores), "live", [p["live_blocks"] for p in genesis._C._torch_private_pools()])
    """, timeout=600)


def test_hf_static_cache_generate_under_reduce_overhead_runs_on_genesis():
    """A decoder generating with transformers' static KV cache, which
    transformers compiles with mode="reduce-overhead" by itself: graph pools,
    cache tensors allocated once and per-token replays together. The same
    script on PyTorch's own allocator is the reference: same tokens."""
    if importlib.util.find_spec("transformers") is None:
        pytest.skip("transformers is not installed")
    body = """
        import transformers
        from transformers import LlamaConfig, LlamaForCausalLM
        if USE_GENESIS:
            gt.use_genesis_allocator()
        torch.manual_seed(0)
        cfg = LlamaConfig(vocab_size=512, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
        model = LlamaForCausalLM(cfg).cuda().eval()
        outs = []
        for n in (12, 12, 20, 12):   # prompts of two lengths: more than one path of graphs
            prompt = torch.randint(0, 512, (2, n), device="cuda", generator=None)
            outs.append(model.generate(prompt, max_new_tokens=16, do_sample=False, cache_implementation="static"))
        if USE_GENESIS:
            assert genesis._C._torch_private_pools(), "no private pool: transformers did not compile the decode step"
        s = torch.cuda.memory_stats()
        assert s["allocated_bytes.all.current"] > 0 and s["reserved_bytes.all.peak"] >= s["allocated_bytes.all.peak"]
        print("transformers", transformers.__version__, "tokens", [o[0, -4:].tolist() for o in outs])
    """
    native = run("USE_GENESIS = False\n" + textwrap.dedent(body), timeout=600)
    on_genesis = run("USE_GENESIS = True\n" + textwrap.dedent(body), timeout=600)
    tokens = lambda p: [line for line in p.stdout.splitlines() if line.startswith("transformers")]
    assert tokens(on_genesis) == tokens(native)


def test_snapshots_of_the_pytorch_program_feed_memory_viz(tmp_path):
    path = tmp_path / "genesis_snapshot.pickle"
    run(f"""
        import pickle
        from torch.cuda import _memory_viz as viz
        gt.use_genesis_allocator()
        genesis.cuda.memory._record_memory_history(max_entries=100000)
        model = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 512)).cuda()
        opt = torch.optim.AdamW(model.parameters())
        for _ in range(3):
            loss = model(torch.randn(256, 512, device="cuda")).square().mean()
            loss.backward(); opt.step(); opt.zero_grad()
        s = genesis.cuda.memory._snapshot()
        assert s["segments"] and s["device_traces"][0]
        assert any(f["name"] == "<module>" for e in s["device_traces"][0] for f in e.get("frames", []))
        print(viz.segsum(s)[:200])
        viz.trace(s)
        for html in (viz.trace_plot(s), viz.segment_plot(s), viz.trace_plot(s, plot_segments=True)):
            assert "base64" in html
        lines = lambda t: t
        assert "stream_" in viz.memory(s, format_flamegraph=lines)
        viz.compare(s["segments"], genesis.cuda.memory._snapshot()["segments"], format_flamegraph=lines)
        genesis.cuda.memory._dump_snapshot({str(path)!r})
        genesis.cuda.memory._record_memory_history(enabled=None)
    """)
    import memtrace

    if memtrace.genesis_mem_path() is not None:
        p = memtrace.run_genesis_mem("replay", str(path), "--json")
        assert p.returncode == 0, p.stderr


def test_torch_cudas_own_memory_functions_answer_from_genesis(tmp_path):
    path = tmp_path / "torch_api_snapshot.pickle"
    run(f"""
        from torch.cuda import _memory_viz as viz
        gt.use_genesis_allocator()
        torch.cuda.memory._record_memory_history(max_entries=10000)
        x = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
        y = torch.empty(1000, dtype=torch.uint8, device="cuda")
        s = torch.cuda.memory_stats()
        g = gt.memory_stats()
        assert s["allocated_bytes.all.current"] == g["allocated_bytes.all.current"] >= (64 << 20) + 1000, s
        assert s["requested_bytes.all.current"] == (64 << 20) + 1000, s
        assert torch.cuda.memory_allocated() == s["allocated_bytes.all.current"]
        assert torch.cuda.memory_reserved() >= torch.cuda.memory_allocated()
        del x
        assert torch.cuda.max_memory_allocated() >= (64 << 20)
        torch.cuda.reset_peak_memory_stats()
        assert torch.cuda.max_memory_allocated() < (64 << 20)
        torch.cuda.reset_accumulated_memory_stats()
        assert torch.cuda.memory_stats()["allocation.all.allocated"] == 0
        assert torch.cuda.max_memory_reserved() >= torch.cuda.memory_reserved() > 0
        assert "Allocated memory" in torch.cuda.memory_summary()
        assert torch.cuda.memory_snapshot()
        snap = torch.cuda.memory._snapshot()
        assert any(e["action"] == "alloc" and e["size"] == (64 << 20) for e in snap["device_traces"][0])
        assert torch._C._cuda_isHistoryEnabled()
        torch.cuda.memory._dump_snapshot({str(path)!r})
        assert "base64" in viz.trace_plot(snap)
        torch.cuda.memory._record_memory_history(enabled=None)
        assert not torch._C._cuda_isHistoryEnabled()
    """)
    import memtrace

    if memtrace.genesis_mem_path() is not None:
        p = memtrace.run_genesis_mem("replay", str(path), "--json")
        assert p.returncode == 0, p.stderr


def test_cupy_shares_the_pool():
    if importlib.util.find_spec("cupy") is None:
        pytest.skip("CuPy is not installed")
    run("""
        import cupy
        import genesis.cupy as gc_
        gt.use_genesis_allocator()
        cupy.cuda.set_allocator(gc_.allocator())
        before = genesis.cuda.memory_stats(0)["allocated_bytes"]
        a = cupy.arange(1 << 20, dtype=cupy.float32)
        b = (a * 2).sum()
        assert float(b) == float((1 << 20) * ((1 << 20) - 1))
        assert genesis.cuda.memory_stats(0)["allocated_bytes"] >= before + (1 << 22)
        t = torch.from_dlpack(a)               # the same memory, seen by PyTorch
        assert t.data_ptr() == a.data.ptr and float(t[5]) == 5.0
        del t, a
        gc.collect()
        assert genesis.cuda.memory_stats(0)["allocated_bytes"] <= before + 4096
        s = cupy.cuda.Stream(non_blocking=True)
        with s:
            c = cupy.ones(1 << 20)
        assert int(c.sum()) == 1 << 20
    """)


def test_pytorch_and_cupy_get_expandable_segments_unless_the_user_chose():
    run("""
        gt.use_genesis_allocator()
        x = torch.ones(1 << 20, device="cuda")
        a = genesis._C.cuda_allocator(0)
        assert a.expandable_segments
        assert "expandable_segments:True" in genesis._C.cuda_alloc_conf()
        # The allocator exists: a preference changes nothing and is no error.
        assert not genesis._C.prefer_cuda_allocator_defaults("expandable_segments:False", "test")
        assert genesis._C.cuda_allocator(0).expandable_segments
    """)
    run("""
        gt.use_genesis_allocator()
        x = torch.ones(1 << 20, device="cuda")
        assert not genesis._C.cuda_allocator(0).expandable_segments
    """, env={"GENESIS_ALLOC_CONF": "expandable_segments:False"})
    # A driver without virtual memory (as GENESIS_NO_VMM=1 pretends): classic
    # segments, no error.
    run("""
        gt.use_genesis_allocator()
        x = torch.ones(1 << 20, device="cuda")
        assert not genesis._C.cuda_allocator(0).expandable_segments
    """, env={"GENESIS_NO_VMM": "1"})
    # Genesis's own API first: its allocator (classic segments on CUDA) then
    # serves PyTorch as it was made.
    run("""
        t = genesis.empty(1024, device="cuda")
        assert not genesis._C.cuda_allocator(0).expandable_segments
        gt.use_genesis_allocator()
        x = torch.ones(1 << 20, device="cuda")
        assert not genesis._C.cuda_allocator(0).expandable_segments
    """)
    if importlib.util.find_spec("cupy") is not None:
        run("""
            import cupy
            import genesis.cupy as gc_
            cupy.cuda.set_allocator(gc_.allocator())
            a = cupy.arange(1 << 20, dtype=cupy.float32)
            assert genesis._C.cuda_allocator(0).expandable_segments
        """)


def test_idle_release_gives_the_cache_back_under_pytorch():
    # Expandable segments (the adaptor's default) and classic ones: after the
    # program stops allocating for the idle period, what it freed goes back
    # to the driver without an empty_cache() call; while it keeps allocating
    # the cache stays.
    for conf in ("", "expandable_segments:False"):
        run(f"""
            import time
            gt.use_genesis_allocator({conf!r}, idle_release=0.3)
            x = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
            x.fill_(1)
            del x
            torch.cuda.synchronize()
            held = gt.memory_reserved()
            assert held >= 64 << 20, held
            # Busy: an allocation every 50 ms keeps the cache (the same
            # size, so the cached block serves it: a new size may make the
            # allocator trade cached pages for it, which is not a release).
            for _ in range(12):
                y = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
                del y
                time.sleep(0.05)
            assert gt.memory_reserved() >= 64 << 20, gt.memory_reserved()
            free_before = torch.cuda.mem_get_info()[0]
            deadline = time.time() + 5
            while gt.memory_reserved() >= 64 << 20 and time.time() < deadline:
                time.sleep(0.05)
            assert gt.memory_reserved() < 64 << 20, gt.memory_reserved()
            # The driver got it back, not just the books.
            assert torch.cuda.mem_get_info()[0] >= free_before + (60 << 20)
            assert genesis.cuda.memory_stats(0)["num_cache_flushes"] >= 1
        """)
