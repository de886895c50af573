"""genesis-mem replay reads PyTorch memory snapshots (pickles) directly:
dicts shaped like torch.cuda.memory._snapshot(), pickled by Python in every
protocol (0 to 5), give the same trace as the CSV of the same
events; malformed, truncated and code-carrying pickles fail with one clear
line and never crash (the reader is genesis/debug/pickle.h)."""

import gzip
import json
import os
import pickle
import random

import pytest

import memtrace
from memtrace import run_genesis_mem

pytestmark = pytest.mark.skipif(memtrace.genesis_mem_path() is None,
                                reason="genesis-mem is not built next to the genesis package (build target genesis-mem)")

BASE = 0x7F1200000000


def frames(line):
    return [{"filename": "/job/train.py", "line": line, "name": "step"},
            {"filename": "/job/train.py", "line": 7, "name": "<module>"}]


def snapshot_dict(n=200, seed=3, devices=1):
    """A snapshot with n allocations (and their frees, most of them) on two
    streams, with the actions the replay ignores mixed in."""
    rng = random.Random(seed)
    traces = []
    for d in range(devices):
        t, trace, live = 1_700_000_000_000_000, [], []
        for i in range(n):
            t += rng.randint(1, 50)
            addr, size = BASE + (d << 36) + i * 4096, rng.randint(1, 1 << 20)
            stream = rng.choice([0, 94_000_000_000])
            if i % 40 == 0:
                trace.append({"action": "segment_alloc", "addr": addr, "size": 20 << 20, "stream": stream,
                              "time_us": t, "frames": []})
            trace.append({"action": "alloc", "addr": addr, "size": size, "stream": stream, "time_us": t,
                          "frames": frames(10 + i % 5)})
            live.append((addr, size, stream))
            if rng.random() < 0.6 and live:
                a, s, st = live.pop(rng.randrange(len(live)))
                for action in ("free_requested", "free_completed"):
                    trace.append({"action": action, "addr": a, "size": s, "stream": st, "time_us": t + 1,
                                  "frames": []})
        trace.append({"action": "oom", "device_free": 12345, "size": 1 << 40, "stream": 0, "time_us": t + 2,
                      "frames": frames(99)})
        traces.append(trace)
    return {"segments": [], "device_traces": traces,
            "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "", "expandable_segments": False,
                                   "max_split_size": -1, "garbage_collection_threshold": 0.0,
                                   "roundup_power2_divisions": {}},
            "external_annotations": []}


def as_csv(snapshot, path, device=0):
    with open(path, "w") as f:
        f.write("time_us,action,addr,size,stream\n")
        for e in snapshot["device_traces"][device]:
            if e["action"] == "oom":
                f.write(f"{e['time_us']},oom,0,{e['size']},{e['stream']}\n")
            else:
                f.write(f"{e['time_us']},{e['action']},{e['addr']},{e['size']},{e['stream']}\n")


def replay_json(path, *args):
    p = run_genesis_mem("replay", str(path), "--json", *args)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def error_line(path):
    p = run_genesis_mem("replay", str(path))
    assert p.returncode != 0
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("genesis-mem: error: "), lines[0]
    assert "Traceback" not in p.stderr and "Segmentation" not in p.stderr
    return lines[0]


@pytest.mark.parametrize("protocol", [0, 1, 2, 3, 4, 5])
def test_every_protocol_replays_like_the_csv(tmp_path, protocol):
    snap = snapshot_dict()
    pk = tmp_path / f"snap{protocol}.pickle"
    pk.write_bytes(pickle.dumps(snap, protocol=protocol))
    csv = tmp_path / "snap.csv"
    as_csv(snap, csv)
    a, b = replay_json(pk), replay_json(csv)
    for key in ("alloc", "free_requested", "free_completed", "segment_alloc", "oom", "live_at_end",
                "unknown_frees"):
        assert a["trace"]["counts"][key] == b["trace"]["counts"][key], key
    assert a["trace"]["counts"]["alloc"] == 200
    assert [r["peak_live_bytes"] for r in a["results"]] == [r["peak_live_bytes"] for r in b["results"]]


@pytest.mark.skipif(not os.path.exists(memtrace.RECORDED_PYTORCH_SNAPSHOT),
                    reason="no snapshot recorded by PyTorch in data/snapshots")
def test_a_snapshot_pytorch_recorded_replays_event_for_event():
    # Written by torch.cuda.memory._dump_snapshot on a GPU (bench/torch/
    # record_snapshot.py), gzipped: every event PyTorch's history holds is
    # read, and the replay ends with the allocations the program still held.
    with gzip.open(memtrace.RECORDED_PYTORCH_SNAPSHOT, "rb") as f:
        snap = pickle.load(f)
    trace = max(snap["device_traces"], key=len)
    want = {a: sum(1 for e in trace if e["action"] == a) for a in ("alloc", "free_requested", "free_completed",
                                                                   "segment_alloc", "oom")}
    assert want["alloc"] > 50 and want["oom"] >= 1
    out = replay_json(memtrace.RECORDED_PYTORCH_SNAPSHOT)
    counts = out["trace"]["counts"]
    for action, n in want.items():
        assert counts[action] == n, action
    assert counts["live_at_end"] == counts["alloc"] - counts["free_requested"] - counts["unknown_frees"]
    assert counts["unknown_frees"] == 0 and want["free_requested"] > 0
    peak = memtrace.snapshot_peak_live(trace)
    assert out["trace"]["peak_live_bytes"] == peak
    assert all(r["peak_reserved_bytes"] >= peak for r in out["results"])


@pytest.mark.parametrize("protocol", [0, 1, 2, 3, 4, 5])
def test_every_protocol_converts_to_the_same_csv(tmp_path, protocol):
    # Protocols 0 and 1 declare no protocol and write numbers and strings as
    # text; genesis-mem convert tells them from a CSV trace all the same.
    snap = snapshot_dict(n=60)
    snap["device_traces"][0][0]["frames"] = [{"filename": "/job/caf\u00e9\\x\n.py", "line": 3, "name": "f"}]
    ref = tmp_path / "ref.pickle"
    ref.write_bytes(pickle.dumps(snap, protocol=5))
    pk = tmp_path / f"snap{protocol}.pickle"
    pk.write_bytes(pickle.dumps(snap, protocol=protocol))
    outs = []
    for src in (ref, pk):
        out = tmp_path / (src.stem + ".csv")
        p = run_genesis_mem("convert", str(src), str(out))
        assert p.returncode == 0, p.stderr
        outs.append(out.read_text())
    assert outs[0] == outs[1]
    assert outs[0].count("\n") > 60


def test_the_busiest_device_is_replayed(tmp_path):
    snap = snapshot_dict(devices=2)
    snap["device_traces"][0] = snap["device_traces"][0][:50]
    pk = tmp_path / "two.pickle"
    pk.write_bytes(pickle.dumps(snap, protocol=4))
    out = replay_json(pk)
    assert out["trace"]["counts"]["alloc"] == 200  # device 0 keeps 50 entries only


def test_malformed_pickles_fail_with_one_line(tmp_path):
    good = pickle.dumps(snapshot_dict(n=20), protocol=4)

    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    cases = {
        "truncated.pickle": (good[: len(good) // 2], "truncated"),
        "code.pickle": (pickle.dumps({"device_traces": [[Evil()]]}, protocol=4), "is refused"),
        "set.pickle": (pickle.dumps({"device_traces": [[{"action": "alloc"}]], "s": {1}}, protocol=4), "is refused"),
        "list.pickle": (pickle.dumps([1, 2], protocol=4), "not a memory snapshot"),
        "notraces.pickle": (pickle.dumps({"segments": []}, protocol=2), "no device_traces"),
        "noaddr.pickle": (pickle.dumps({"device_traces": [[{"action": "alloc", "size": 4}]]}, protocol=5),
                          "device_traces[0][0]: no 'addr'"),
    }
    for name, (data, says) in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        line = error_line(path)
        assert says in line, (name, line)
        assert name in line, (name, line)


def test_random_damage_never_crashes(tmp_path):
    good = bytearray(pickle.dumps(snapshot_dict(n=30), protocol=4))
    rng = random.Random(11)
    for i in range(60):
        data = bytearray(good)
        for _ in range(rng.randint(1, 6)):
            data[rng.randrange(2, len(data))] = rng.randrange(256)
        path = tmp_path / f"d{i}.pickle"
        path.write_bytes(bytes(data))
        p = run_genesis_mem("replay", str(path), "--json")
        assert p.returncode in (0, 1, 2), (i, p.returncode, p.stderr)
        assert "Segmentation" not in p.stderr and "terminate" not in p.stderr, p.stderr
