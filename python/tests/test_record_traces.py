"""bench/torch/record_traces.py without a GPU: a synthetic PyTorch snapshot
(the dict torch.cuda.memory._snapshot() returns) goes through the script's
conversion (genesis-mem convert) into the CSV trace and its sidecar, which
genesis-mem replay --corpus then reads; the history ring's drop detection;
and, where PyTorch is installed, every workload at tiny sizes on the CPU."""

import gzip
import importlib.util
import json
import pathlib
import pickle
import random

import pytest

import memtrace
from memtrace import run_genesis_mem

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "torch" / "record_traces.py"


@pytest.fixture(scope="module")
def rt():
    spec = importlib.util.spec_from_file_location("record_traces", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # must not need torch at import
    return mod


def snapshot(n=300, seed=5):
    """What PyTorch records: segments, allocations on two streams, frees
    requested and completed, an OOM (device_free instead of addr), an
    annotation; a few allocations never freed."""
    rng = random.Random(seed)
    base, t, entries, live = 0x7F3400000000, 1_790_000_000_000_000, [], []
    for i in range(n):
        t += rng.randint(1, 40)
        stream = rng.choice([0, 140_000_000_000])
        addr = base + i * 8192
        if i % 50 == 0:
            entries.append({"action": "segment_alloc", "addr": addr, "size": 20 << 20, "stream": stream,
                            "time_us": t, "frames": []})
        size = rng.randint(1, 4 << 20)
        entries.append({"action": "alloc", "addr": addr, "size": size, "stream": stream, "time_us": t,
                        "frames": [{"filename": "train.py", "line": 10 + i % 7, "name": "step"}]})
        live.append((addr, size, stream))
        if rng.random() < 0.7:
            a, s, st = live.pop(rng.randrange(len(live)))
            entries.append({"action": "free_requested", "addr": a, "size": s, "stream": st, "time_us": t + 1,
                            "frames": []})
            entries.append({"action": "free_completed", "addr": a, "size": s, "stream": st, "time_us": t + 2,
                            "frames": []})
    entries.append({"action": "annotate", "addr": 0, "size": 0, "stream": 0, "time_us": t + 3, "frames": []})
    entries.append({"action": "oom", "device_free": 1 << 20, "size": 1 << 40, "stream": 0, "time_us": t + 4,
                    "frames": []})
    return {"segments": [], "device_traces": [entries], "allocator_settings": {}}


def test_history_info_detects_a_full_ring(rt):
    snap = snapshot(n=20)
    n = len(snap["device_traces"][0])
    info = rt.history_info(snap, max_entries=n + 1)
    assert info == {"device_index": 0, "entries": n, "max_entries": n + 1, "dropped": False,
                    "first_action": "segment_alloc"}
    assert rt.history_info(snap, max_entries=n)["dropped"] is True  # full: the oldest may be gone
    two = {"device_traces": [[], snap["device_traces"][0]]}
    assert rt.history_info(two, max_entries=10 ** 6)["device_index"] == 1
    assert rt.history_info({"device_traces": []}, max_entries=5)["entries"] == 0


needs_genesis_mem = pytest.mark.skipif(memtrace.genesis_mem_path() is None,
                                       reason="genesis-mem is not built next to the genesis package")


@needs_genesis_mem
def test_a_snapshot_becomes_a_csv_trace_and_a_sidecar_the_corpus_replay_reads(rt, tmp_path):
    snap = snapshot()
    entries = snap["device_traces"][0]
    pk = tmp_path / "job.pickle"
    pk.write_bytes(pickle.dumps(snap, protocol=pickle.HIGHEST_PROTOCOL))
    out = tmp_path / "job.trace.csv.gz"
    converted = rt.convert(memtrace.genesis_mem_path(), pk, out)

    # Every entry but the annotation, in order, with its real address.
    with gzip.open(out, "rt") as f:
        lines = f.read().splitlines()
    assert lines[0] == "time_us,action,addr,size,stream"
    kept = [e for e in entries if e["action"] != "annotate"]
    assert len(lines) - 1 == len(kept) == converted["rows"]
    for line, e in zip(lines[1:], kept):
        t, action, addr, size, stream = line.split(",")
        assert action == e["action"]
        assert int(addr) == (0 if action == "oom" else e["addr"])
        assert (int(size), int(stream), int(t)) == (e["size"], e["stream"], e["time_us"])
    assert converted["annotations"] == 1
    assert converted["peak_live_bytes"] == memtrace.snapshot_peak_live(entries)
    assert converted["counts"]["alloc"] == sum(e["action"] == "alloc" for e in entries)
    assert converted["counts"]["unknown_frees"] == 0

    info = {"model": "synthetic", "workload": "a test", "steps": 3, "device": "none", "torch": "none"}
    peaks = {"native": {"peak_reserved_bytes": converted["peak_live_bytes"] * 2, "peak_allocated_bytes": 7},
             "cudaMallocAsync": {"error": "not run"}}
    side = rt.sidecar("job", info, peaks, rt.history_info(snap, 10 ** 6), converted, "pytest")
    assert side["peak_live_bytes"] == converted["peak_live_bytes"]
    assert side["history"]["dropped"] is False
    for key in ("model", "workload", "steps", "pytorch", "device", "torch", "date", "command"):
        assert key in side, key
    (tmp_path / "job.json").write_text(json.dumps(side))
    p = run_genesis_mem("replay", "--corpus", tmp_path, "--json", "--config", "genesis", "--no-progress", timeout=120)
    assert p.returncode == 0, p.stderr
    rep = json.loads(p.stdout)
    (t,) = rep["traces"]
    assert t["name"] == "job" and t["path"].endswith("job.trace.csv.gz")  # the CSV, not the pickle
    assert t["peak_live_bytes"] == converted["peak_live_bytes"]
    assert t["pytorch"]["native"]["reserved_per_live"] == pytest.approx(2.0)
    assert t["pytorch_best"] == "native"


@needs_genesis_mem
def test_conversion_errors_name_the_file(rt, tmp_path):
    bad = tmp_path / "bad.pickle"
    bad.write_bytes(pickle.dumps({"segments": []}, protocol=4))
    with pytest.raises(RuntimeError, match="bad.pickle.*no device_traces"):
        rt.convert(memtrace.genesis_mem_path(), bad, tmp_path / "bad.trace.csv.gz")
    p = run_genesis_mem("convert", tmp_path / "missing.pickle", tmp_path / "x.csv")
    assert p.returncode == 2 and "cannot open snapshot" in p.stderr


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="PyTorch is not installed")
@pytest.mark.parametrize("name", ["llm_train", "llm_serve", "vision_train", "diffusion_unet", "bert_dynamic",
                                  "multi_stream", "long_run", "epochs_eval", "moe_train", "llm_generate",
                                  "seq2seq_train", "detection_train", "lora_finetune"])
def test_every_workload_runs_tiny_on_cpu(rt, name, tmp_path):
    needs = {"llm_train": "transformers", "bert_dynamic": "transformers", "long_run": "transformers",
             "epochs_eval": "transformers", "vision_train": "torchvision", "moe_train": "transformers",
             "llm_generate": "transformers", "seq2seq_train": "transformers", "detection_train": "torchvision",
             "lora_finetune": "peft"}
    if name in needs and importlib.util.find_spec(needs[name]) is None:
        pytest.skip(f"{needs[name]} is not installed")
    res = rt.run_one(name, "native", str(tmp_path), False, 1.0, 0, 1000, False, device="cpu")
    assert res["steps"] >= 1 and res["model"] and res["workload"]


def test_peaks_of_genesis_are_kept_apart_from_pytorchs(rt):
    """A run with Genesis as PyTorch's allocator goes under the sidecar's
    genesis_torch, never among PyTorch's settings (whose best is what Genesis
    is judged against); a failed run keeps its error."""
    side = {"peak_live_bytes": 1000, "pytorch": {"native": {"peak_reserved_bytes": 1500}}}
    rt.store_peaks(side, "genesis", {"ok": True, "peak_reserved_bytes": 1012, "peak_allocated_bytes": 1004,
                                     "peak_requested_bytes": 1000, "seconds": 1.5})
    assert set(side["pytorch"]) == {"native"}
    assert side["genesis_torch"] == {"peak_reserved_bytes": 1012, "peak_allocated_bytes": 1004, "seconds": 1.5,
                                     "peak_requested_bytes": 1000, "reserved_per_live": 1.012}
    rt.store_peaks(side, "expandable_segments", {"ok": False, "error": "CUDA out of memory"})
    assert side["pytorch"]["expandable_segments"] == {"error": "CUDA out of memory"}


def test_a_run_that_did_not_repeat_its_recording_gets_no_ratio(rt):
    """A workload edited since its trace was recorded asks for other bytes:
    its peak compared with the recorded peak would not be like for like."""
    side = {"peak_live_bytes": 771_660_740}
    rt.store_peaks(side, "genesis", {"ok": True, "peak_reserved_bytes": 1_382_023_168,
                                     "peak_allocated_bytes": 1_361_690_624, "peak_requested_bytes": 1_361_688_361,
                                     "seconds": 59.4})
    g = side["genesis_torch"]
    assert "reserved_per_live" not in g
    assert "no longer repeats its recording" in g["not_repeated"] and "1361688361" in g["not_repeated"]
    # Within a thousandth (rounding of what the two runs count) it is the same run.
    side = {"peak_live_bytes": 1_000_000}
    rt.store_peaks(side, "genesis", {"ok": True, "peak_reserved_bytes": 1_013_000, "peak_allocated_bytes": 1_001_000,
                                     "peak_requested_bytes": 1_000_900})
    assert side["genesis_torch"]["reserved_per_live"] == 1.013 and "not_repeated" not in side["genesis_torch"]


def test_peaks_refuses_what_it_cannot_repeat(rt, tmp_path, monkeypatch, capsys):
    args = lambda **kw: type("A", (), {"out": str(tmp_path), "settings": "genesis", "workloads": None, "scale": 1.0,
                                       "seed": 0, "max_entries": 10, "max_seconds": 1.0, "parallel": 1, **kw})()
    with pytest.raises(SystemExit, match="is not a folder"):
        rt.peaks_all(args(out=str(tmp_path / "missing")))
    with pytest.raises(SystemExit, match="native is the recorded run"):
        rt.peaks_all(args(settings="native"))
    with pytest.raises(SystemExit, match="no sidecar"):
        rt.peaks_all(args(workloads="llm_train"))
    (tmp_path / "llm_train.json").write_text(json.dumps({"name": "llm_train", "steps": 5}))
    with pytest.raises(SystemExit, match="no recorded iteration count"):
        rt.peaks_all(args(workloads="llm_train"))
    # Without --workloads such a sidecar is skipped, and nothing runs.
    monkeypatch.setattr(rt, "child", lambda *a: pytest.fail("nothing should run"))
    assert rt.peaks_all(args()) == 0
    assert "no recorded iteration count" in capsys.readouterr().out
