"""Snapshots in PyTorch's format (genesis.cuda.memory._snapshot) on a
simulated GPU: every key and type that torch.cuda._memory_viz and the
memory_viz web page read (Note [PyTorch snapshots] in
genesis/_pytorch_snapshot.py), checked here without PyTorch; with PyTorch
importable, memory_viz's own functions run on the snapshot too; with a
snapshot recorded by PyTorch (GENESIS_TORCH_REFERENCE_SNAPSHOT, written by
bench/torch/record_snapshot.py on a GPU machine), the keys and types are
compared with it; and genesis-mem replays the dumped file.
"""

import gzip
import os
import pickle
import pickletools

import pytest

import genesis
import memtrace
from genesis.cuda import memory as gmem
from genesis.testing import SimulatedAllocator

MiB = 1 << 20

# What the memory_viz page's unpickler (torch/utils/viz/MemoryViz.js) knows.
JS_OPCODES = {
    "PROTO", "FRAME", "STOP", "MARK", "APPEND", "APPENDS", "LIST", "TUPLE", "EMPTY_TUPLE", "TUPLE1", "TUPLE2",
    "TUPLE3", "NEWTRUE", "NEWFALSE", "NONE", "BINGET", "LONG_BINGET", "BININT", "BININT1", "BININT2", "LONG1",
    "EMPTY_DICT", "EMPTY_LIST", "MEMOIZE", "BINPUT", "LONG_BINPUT", "SETITEMS", "SETITEM", "DICT",
    "SHORT_BINUNICODE", "BINUNICODE", "BINFLOAT",
}
STATES = {"active_allocated", "active_pending_free", "inactive"}
ACTIONS = {"alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "segment_map",
           "segment_unmap", "oom", "snapshot"}


def alloc_here(sim, n, stream=0):
    return sim.allocate(n, stream)  # the site recorded is this line's caller chain


@pytest.fixture()
def recorded():
    """A simulated GPU with a recorded history: small and large blocks on two
    streams, a block freed while another stream uses it, an OOM."""
    sim = SimulatedAllocator(512 * MiB, index=1, expandable=False)
    gmem._record_memory_history(device=sim, max_entries=100000)
    s1 = sim.create_stream()
    small = [alloc_here(sim, 1000 + i) for i in range(5)]
    big = alloc_here(sim, 30 * MiB)
    other = alloc_here(sim, 3 * MiB, stream=s1)
    with pytest.raises(genesis.OutOfMemoryError):  # (an OOM waits for pending work: before the pending block)
        sim.allocate(4 << 30)
    sim.submit_work(s1)  # s1 busy: its free memory is not lent to stream 0
    pending = alloc_here(sim, 2 * MiB)
    sim.record_stream(pending, s1)
    sim.free(pending)
    sim.free(small[0])
    yield sim, {"small": small[1:], "big": big, "other": other, "pending": pending, "s1": s1}
    gmem._record_memory_history(enabled=None, device=sim)


def check_frames(frames):
    assert isinstance(frames, list)
    for f in frames:
        assert set(f) >= {"filename", "line", "name"}
        assert isinstance(f["filename"], str) and isinstance(f["line"], int) and isinstance(f["name"], str)


def check_snapshot(s):
    """Every key and type the readers use (memory_viz.py: segments, memory,
    compare, segsum, trace; MemoryViz.js: annotate_snapshot,
    process_alloc_data, MemoryView)."""
    assert set(s) >= {"segments", "device_traces"}
    assert isinstance(s["segments"], list) and isinstance(s["device_traces"], list)
    for seg in s["segments"]:
        for key, t in (("device", int), ("address", int), ("total_size", int), ("allocated_size", int),
                       ("active_size", int), ("requested_size", int), ("stream", int), ("segment_type", str),
                       ("is_expandable", bool), ("blocks", list), ("frames", list)):
            assert isinstance(seg[key], t), (key, seg[key])
        assert seg["segment_type"] in ("small", "large")
        assert seg["segment_pool_id"] == (0, 0)
        assert seg["device"] < len(s["device_traces"])
        addr = seg["address"]
        allocated = active = requested = 0
        for b in seg["blocks"]:
            assert b["address"] == addr  # the page adds sizes to find addresses
            assert isinstance(b["size"], int) and b["size"] > 0
            assert isinstance(b["requested_size"], int) and 0 <= b["requested_size"] <= b["size"]
            assert b["state"] in STATES
            check_frames(b["frames"])
            if b["state"] == "active_allocated":
                allocated += b["size"]
                requested += b["requested_size"]
            if b["state"] != "inactive":
                active += b["size"]
            addr += b["size"]
        assert addr - seg["address"] == seg["total_size"]  # segsum asserts this
        assert (allocated, active, requested) == (seg["allocated_size"], seg["active_size"], seg["requested_size"])
    for trace in s["device_traces"]:
        assert isinstance(trace, list)
        for e in trace:
            assert e["action"] in ACTIONS
            assert isinstance(e["size"], int) and e["size"] >= 0
            assert isinstance(e["stream"], int) and isinstance(e["time_us"], int)
            if e["action"] == "oom":
                assert isinstance(e["device_free"], int)
            else:
                assert isinstance(e["addr"], int)
            check_frames(e.get("frames", []))
    settings = s.get("allocator_settings", {})
    assert isinstance(settings.get("expandable_segments", False), bool)


def test_the_snapshot_has_every_key_memory_viz_reads(recorded):
    sim, a = recorded
    s = gmem._snapshot(sim)
    check_snapshot(s)
    assert len(s["device_traces"]) == 2 and s["device_traces"][0] == []  # device 1: index 1
    segs = s["segments"]
    assert {seg["device"] for seg in segs} == {1}
    blocks = {b["address"]: (seg, b) for seg in segs for b in seg["blocks"]}
    seg, b = blocks[a["big"]]
    assert b["state"] == "active_allocated" and b["requested_size"] == 30 * MiB
    assert seg["segment_type"] == "large" and seg["stream"] == 0
    assert blocks[a["small"][0]][0]["segment_type"] == "small"
    assert blocks[a["other"]][0]["stream"] == a["s1"]
    assert blocks[a["pending"]][1]["state"] == "active_pending_free"
    # Sites: the test's own frames, innermost first.
    frames = b["frames"]
    assert frames and frames[0]["filename"].endswith("test_torch_snapshot.py")
    assert frames[0]["name"] == "alloc_here" and frames[1]["name"] == "recorded"
    stats = sim.memory_stats()
    assert sum(seg["total_size"] for seg in segs) == stats["reserved_bytes"]
    assert sum(seg["allocated_size"] for seg in segs) == stats["allocated_bytes"]


def test_the_trace_holds_the_history_in_order(recorded):
    sim, a = recorded
    trace = gmem._snapshot(sim)["device_traces"][1]
    actions = [e["action"] for e in trace]
    assert actions.count("alloc") == 8 and actions.count("segment_alloc") >= 3
    assert actions.count("free_requested") == 2 and actions.count("free_completed") == 2
    times = [e["time_us"] for e in trace]
    assert times == sorted(times)
    i = actions.index("free_requested")
    assert actions[i + 1] == "free_completed" and trace[i]["addr"] == trace[i + 1]["addr"]
    (oom,) = [e for e in trace if e["action"] == "oom"]
    assert oom["size"] == 4 << 30 and 0 < oom["device_free"] <= 512 * MiB
    allocs = {e["addr"]: e for e in trace if e["action"] == "alloc"}
    assert allocs[a["big"]]["size"] == 30 * MiB
    assert allocs[a["big"]]["frames"][0]["name"] == "alloc_here"
    assert allocs[a["other"]]["stream"] == a["s1"]


def test_options_of_record_memory_history(recorded):
    sim, _ = recorded
    gmem._record_memory_history(device=sim, max_entries=3, skip_actions=["segment_alloc"])
    trace = gmem._snapshot(sim)["device_traces"][1]
    assert len(trace) == 3 and all(e["action"] != "segment_alloc" for e in trace)
    gmem._record_memory_history(device=sim, clear_history=True)
    sim.free(sim.allocate(4096))
    assert [e["action"] for e in gmem._snapshot(sim)["device_traces"][1]] == [
        "alloc", "free_requested", "free_completed"]
    gmem._record_memory_history(enabled=None, device=sim)
    sim.free(sim.allocate(4096))
    assert len(gmem._snapshot(sim)["device_traces"][1]) == 3  # stopped
    for bad in (dict(enabled="some"), dict(context="stack"), dict(stacks="cpp"), dict(max_entries=0),
                dict(skip_actions=["teleport"]), dict(skip_actions="teleport")):
        with pytest.raises(ValueError):
            gmem._record_memory_history(device=sim, **bad)


def test_recording_options_outlive_the_recording_and_belong_to_their_allocator():
    a = SimulatedAllocator("8GB", expandable=False, thread_cache=False)
    b = SimulatedAllocator("8GB", expandable=False, thread_cache=False)
    gmem._record_memory_history(device=a, max_entries=3)
    blocks = [a.allocate(1000 * (i + 1)) for i in range(6)]
    assert len(gmem._snapshot(a)["device_traces"][0]) == 3
    # Stopping keeps what was recorded, as it was asked for: still three.
    gmem._record_memory_history(enabled=None, device=a)
    assert len(gmem._snapshot(a)["device_traces"][0]) == 3
    # Another allocator's options do not change this one's snapshot.
    gmem._record_memory_history(device=b, skip_actions=["alloc"])
    b.free(b.allocate(4096))
    assert len(gmem._snapshot(a)["device_traces"][0]) == 3
    assert "alloc" in [e["action"] for e in gmem._snapshot(a)["device_traces"][0]]
    assert "alloc" not in [e["action"] for e in gmem._snapshot(b)["device_traces"][0]]
    gmem._record_memory_history(enabled=None, device=b)
    for p in blocks:
        a.free(p)


def test_one_action_name_is_one_skipped_action(recorded):
    sim, _ = recorded
    gmem._record_memory_history(device=sim, clear_history=True, skip_actions="free_requested")
    sim.free(sim.allocate(4096))
    assert [e["action"] for e in gmem._snapshot(sim)["device_traces"][1]] == ["alloc", "free_completed"]
    with pytest.raises(ValueError, match="unknown action 'allocate' in skip_actions"):
        gmem._record_memory_history(device=sim, skip_actions="allocate")


def test_expandable_segments_are_described_by_what_they_map():
    sim = SimulatedAllocator(512 * MiB, index=0, expandable=True)
    gmem._record_memory_history(device=sim)
    try:
        ptrs = [sim.allocate(3 * MiB + i * 4096) for i in range(4)]
        sim.free(ptrs[1])
        s = gmem._snapshot(sim)
        check_snapshot(s)
        assert all(seg["is_expandable"] for seg in s["segments"])
        assert s["allocator_settings"]["expandable_segments"] is True
        # A size of memory, not of the reserved address range.
        assert sum(seg["total_size"] for seg in s["segments"]) <= 64 * MiB
        actions = {e["action"] for e in s["device_traces"][0]}
        assert "segment_map" in actions and "segment_alloc" not in actions
    finally:
        gmem._record_memory_history(enabled=None, device=sim)


def test_expandable_segments_with_holes_list_only_their_mapped_runs():
    # Pages given back leave holes: PyTorch lists each mapped run as a
    # segment, and the segments add up to the reserved memory.
    sim = SimulatedAllocator(1 << 30, index=0, expandable=True)
    a = sim.allocate(40 * MiB)
    b = sim.allocate(3 * MiB)
    c = sim.allocate(5 * MiB)
    sim.free(a)
    sim.empty_cache()
    s = gmem._snapshot(sim)
    check_snapshot(s)
    assert sum(seg["total_size"] for seg in s["segments"]) == sim.memory_reserved()
    live = sorted(blk["size"] for seg in s["segments"] for blk in seg["blocks"]
                  if blk["state"] == "active_allocated")
    assert live == [3 * MiB, 5 * MiB]
    for seg in s["segments"]:
        assert seg["blocks"][0]["address"] == seg["address"]
        assert sum(blk["size"] for blk in seg["blocks"]) == seg["total_size"]
    sim.free(b)
    sim.free(c)


def test_the_dump_is_a_pickle_the_web_page_can_read(recorded, tmp_path):
    sim, _ = recorded
    path = tmp_path / "snap.pickle"
    gmem._dump_snapshot(str(path), device=sim)
    data = path.read_bytes()
    ops = {op.name for op, _arg, _pos in pickletools.genops(data)}
    assert ops <= JS_OPCODES, ops - JS_OPCODES
    assert data[:2] == b"\x80\x04"
    s = pickle.loads(data)
    check_snapshot(s)
    assert s["segments"] == gmem._snapshot(sim)["segments"]


def test_genesis_mem_replays_the_dump(recorded, tmp_path):
    import json

    import memtrace

    if memtrace.genesis_mem_path() is None:
        pytest.skip("genesis-mem is not built")
    sim, _ = recorded
    path = tmp_path / "snap.pickle"
    gmem._dump_snapshot(str(path), device=sim)
    p = memtrace.run_genesis_mem("replay", str(path), "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    counts = out["trace"]["counts"] if "trace" in out else out["counts"]
    assert counts["alloc"] == 8 and counts["free_requested"] == 2 and counts["oom"] == 1


def test_memory_viz_reads_it_when_torch_is_here(recorded):
    viz = pytest.importorskip("torch.cuda._memory_viz")
    sim, _ = recorded
    s = gmem._snapshot(sim)
    s2 = gmem._snapshot(sim)

    def lines(text):  # format_flamegraph without the download: the raw lines
        return text

    assert "total_reserved" in viz.segsum(s)
    assert "entries" in viz.trace(s)
    assert "stream_" in viz.segments(s, format_flamegraph=lines)
    assert "stream_" in viz.memory(s, format_flamegraph=lines)
    viz.compare(s["segments"], s2["segments"], format_flamegraph=lines)
    for html in (viz.trace_plot(s), viz.trace_plot(s, plot_segments=True), viz.segment_plot(s)):
        assert "snapshot.pickle" in html and "base64" in html


def test_keys_and_types_match_a_snapshot_recorded_by_pytorch(recorded):
    path = os.environ.get("GENESIS_TORCH_REFERENCE_SNAPSHOT") or memtrace.RECORDED_PYTORCH_SNAPSHOT
    if not os.path.exists(path):
        pytest.skip("no PyTorch snapshot to compare with (bench/torch/record_snapshot.py writes one on a GPU; "
                    "scripts/torch_gpu.sh brings it back as torch_reference_snapshot.pickle.gz, which belongs "
                    "in data/snapshots/pytorch_reference.pickle.gz)")
    with (gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")) as f:
        ref = pickle.load(f)
    sim, _ = recorded
    ours = gmem._snapshot(sim)

    def shape(d):
        return {k: type(v).__name__ for k, v in d.items()}

    def first(items, pred=lambda x: True):
        return next(x for x in items if pred(x))

    assert set(ref) - {"external_annotations", "host_segments", "host_traces"} <= set(ours)
    ref_seg, our_seg = ref["segments"][0], ours["segments"][0]
    missing = set(ref_seg) - set(our_seg)
    assert not missing, missing
    for k in ref_seg:
        assert type(ref_seg[k]) is type(our_seg[k]) or k == "segment_pool_id", (k, shape(ref_seg), shape(our_seg))
    ref_block = first(ref_seg["blocks"])
    assert set(ref_block) <= set(our_seg["blocks"][0]), (shape(ref_block), shape(our_seg["blocks"][0]))
    ref_trace = first(ref["device_traces"], bool)
    for action in ("alloc", "free_requested", "free_completed", "segment_alloc"):
        r = first(ref_trace, lambda e, a=action: e["action"] == a)
        o = first(ours["device_traces"][1], lambda e, a=action: e["action"] == a)
        assert set(r) - {"user_metadata", "category", "compile_context"} <= set(o), (action, shape(r), shape(o))
        for k in set(r) & set(o):
            assert type(r[k]) is type(o[k]), (action, k)
    check_snapshot(ref)  # and ours is checked by what PyTorch's passes too


def test_without_a_gpu_the_gpu_wide_calls_say_so():
    if genesis.cuda.is_available():
        pytest.skip("a GPU is here")
    with pytest.raises(genesis.CudaError, match="needs a CUDA GPU"):
        gmem._snapshot()
    with pytest.raises(genesis.CudaError, match="needs a CUDA GPU"):
        gmem._record_memory_history()
    with pytest.raises(genesis.CudaError, match="_dump_snapshot\\(\\) needs a CUDA GPU"):
        gmem._dump_snapshot("never-written.pickle")
