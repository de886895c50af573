"""genesis-mem replay --corpus DIR: every trace of a folder (CSV, gzip CSV,
pickled PyTorch snapshots) through every configuration of --compare, one
table with a geometric-mean row, PyTorch's figures from the sidecars, and
bad files reported by name while the others are still replayed."""

import gzip
import json
import math
import pickle
import random

import pytest

import memtrace
from memtrace import run_genesis_mem

pytestmark = pytest.mark.skipif(memtrace.genesis_mem_path() is None,
                                reason="genesis-mem is not built next to the genesis package (build target genesis-mem)")

HEADER = "time_us,action,addr,size,stream\n"


def training_rows(seed, steps, weights, act):
    """A training-like trace: weights held throughout, activations of a
    size that changes per step, freed at the step's end."""
    rng = random.Random(seed)
    rows, t, addr = [], 0, 0x100000
    live_w = []
    for _ in range(8):
        rows.append((t, "alloc", addr, weights, 0))
        live_w.append(addr)
        addr += 1 << 24
        t += 1
    for _ in range(steps):
        step = []
        for _ in range(12):
            size = rng.randint(act // 4, act)
            rows.append((t, "alloc", addr, size, 0))
            step.append((addr, size))
            addr += 1 << 24
            t += 1
        for a, s in reversed(step):
            rows.append((t, "free_requested", a, s, 0))
            t += 1
    return rows


def write_csv(path, rows, gz=False):
    text = HEADER + "".join(f"{t},{a},{addr},{size},{s}\n" for t, a, addr, size, s in rows)
    if gz:
        with gzip.open(path, "wt") as f:
            f.write(text)
    else:
        path.write_text(text)


def write_pickle(path, rows):
    entries = [{"action": a, "addr": addr, "size": size, "stream": s, "time_us": t, "frames": []}
               for t, a, addr, size, s in rows]
    path.write_bytes(pickle.dumps({"segments": [], "device_traces": [entries]}, protocol=4))


def peak_live(rows):
    live, cur, peak = {}, 0, 0
    for _, a, addr, size, _ in rows:
        if a == "alloc":
            live[addr] = size
            cur += size
            peak = max(peak, cur)
        elif a == "free_requested" and addr in live:
            cur -= live.pop(addr)
    return peak


@pytest.fixture
def corpus(tmp_path):
    d = tmp_path / "corpus"
    d.mkdir()
    rows = {"alpha": training_rows(1, 20, 3 << 20, 8 << 20), "beta": training_rows(2, 15, 1 << 20, 40 << 20),
            "gamma": training_rows(3, 10, 5 << 20, 2 << 20)}
    write_csv(d / "alpha.trace.csv", rows["alpha"])
    write_csv(d / "beta.trace.csv.gz", rows["beta"], gz=True)
    write_pickle(d / "beta.pickle", rows["beta"])  # the same trace again: replayed once
    write_pickle(d / "gamma.pickle", rows["gamma"])
    (d / "alpha.json").write_text(json.dumps({
        "model": "synthetic", "steps": 20,
        "pytorch": {"native": {"peak_reserved_bytes": 3 * peak_live(rows["alpha"]) // 2, "peak_allocated_bytes": 1},
                    "expandable_segments": {"peak_reserved_bytes": 5 * peak_live(rows["alpha"]) // 4,
                                            "peak_allocated_bytes": 1},
                    "cudaMallocAsync": {"error": "the run failed"}},
        "genesis_torch": {"peak_reserved_bytes": 101 * peak_live(rows["alpha"]) // 100, "peak_allocated_bytes": 1}}))
    (d / "notes.md").write_text("not a trace")
    return d, rows


def replay(*args):
    return run_genesis_mem("replay", *map(str, args), "--no-progress", timeout=300)


def test_every_trace_through_every_configuration_with_geometric_means(corpus):
    d, rows = corpus
    p = replay("--corpus", d, "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    compare = json.loads(replay(d / "alpha.trace.csv", "--compare", "--json").stdout)
    configs = [r["config"] for r in compare["results"]]
    assert out["configs"] == configs and len(configs) >= 4
    assert [t["name"] for t in out["traces"]] == ["alpha", "beta", "gamma"]
    assert out["traces"][1]["path"].endswith("beta.trace.csv.gz")
    assert [x.split("/")[-1] for x in out["duplicates"]] == ["beta.pickle"]
    for t in out["traces"]:
        assert t["peak_live_bytes"] == peak_live(rows[t["name"]])
        assert [r["config"] for r in t["results"]] == configs
        # The same figures as a replay of the trace alone (the simulated device is deterministic).
        alone = json.loads(replay(t["path"], "--compare", "--json").stdout)
        assert [r["peak_reserved_bytes"] for r in t["results"]] == [r["peak_reserved_bytes"] for r in alone["results"]]
    for i, c in enumerate(configs):
        ratios = [t["results"][i]["reserved_per_live"] for t in out["traces"]]
        expected = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        assert out["geometric_mean"]["reserved_per_live"][c] == pytest.approx(expected, rel=1e-9)
    # PyTorch's figures: from the sidecar, over the trace's peak live; the failed run left out.
    alpha = out["traces"][0]
    assert set(alpha["pytorch"]) == {"native", "expandable_segments"}
    assert alpha["pytorch"]["native"]["reserved_per_live"] == pytest.approx(1.5, rel=1e-6)
    assert alpha["pytorch_best"] == "expandable_segments"
    assert out["traces"][1]["pytorch"] == {} and out["traces"][1]["pytorch_best"] is None
    assert out["geometric_mean"]["reserved_per_live"]["pytorch best"] == pytest.approx(1.25, rel=1e-6)
    # A live run under Genesis: its own figure, never one of PyTorch's settings.
    assert alpha["genesis_torch"]["reserved_per_live"] == pytest.approx(1.01, rel=1e-6)
    assert out["traces"][1]["genesis_torch"] is None
    assert out["geometric_mean"]["reserved_per_live"]["genesis under pytorch"] == pytest.approx(1.01, rel=1e-6)
    # Over how many traces each mean was taken: every one for the replays,
    # only those with a figure for PyTorch and the live run.
    counts = out["geometric_mean"]["traces"]
    assert all(counts[c] == 3 for c in configs)
    assert counts["pytorch best"] == sum(1 for t in out["traces"] if t["pytorch_best"] is not None)
    assert counts["genesis under pytorch"] == 1
    assert all(r["complete"] for t in out["traces"] for r in t["results"])
    assert out["errors"] == []


def test_the_text_table_has_a_row_per_trace_and_the_pytorch_columns(corpus):
    d, _ = corpus
    p = replay("--corpus", d)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert any(ln.startswith("alpha ") and "1.250 expandable_segments" in ln for ln in lines), p.stdout
    assert any(ln.startswith("gamma ") for ln in lines)
    assert "PyTorch native" in p.stdout and "PyTorch best" in p.stdout
    assert sum(ln.startswith("geometric mean") for ln in lines) == 2  # reserved/live and ns/event
    assert "beta.pickle" in p.stdout  # listed as not replayed
    # --config narrows the columns.
    q = replay("--corpus", d, "--config", "genesis-classic", "--json")
    assert json.loads(q.stdout)["configs"] == ["genesis-classic"]


def test_a_bad_file_is_reported_by_name_and_the_others_still_replay(corpus):
    d, _ = corpus
    (d / "broken.trace.csv").write_text(HEADER + "0,alloc,16,8,0\n1,alloc,32,abc,0\n")
    (d / "cut.pickle").write_bytes(pickle.dumps({"device_traces": [[]]}, protocol=4)[:10])
    (d / "gamma.json").write_text("{not json")
    p = replay("--corpus", d, "--json")
    assert p.returncode == 2, p.stderr
    out = json.loads(p.stdout)
    assert [t["name"] for t in out["traces"]] == ["alpha", "beta", "gamma"]
    errors = {e["file"].split("/")[-1]: e["error"] for e in out["errors"]}
    assert set(errors) == {"broken.trace.csv", "cut.pickle", "gamma.json"}
    assert "broken.trace.csv:3: " in errors["broken.trace.csv"] and "size" in errors["broken.trace.csv"]
    assert "not valid JSON" in errors["gamma.json"]
    t = replay("--corpus", d)
    assert t.returncode == 2
    assert "errors (3):" in t.stdout and "broken.trace.csv" in t.stdout


def test_folder_errors_are_one_clear_line(tmp_path):
    def error_line(*args):
        p = replay(*args)
        assert p.returncode == 2, (args, p.stdout)
        lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and lines[0].startswith("genesis-mem: error: "), p.stderr
        return lines[0]

    assert "does not exist" in error_line("--corpus", tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    assert "holds no traces" in error_line("--corpus", tmp_path / "empty")
    f = tmp_path / "one.trace.csv"
    f.write_text(HEADER + "0,alloc,16,8,0\n")
    assert "is not a folder" in error_line("--corpus", f)
    assert "not both" in error_line(f, "--corpus", tmp_path)
    assert "name a trace file" in error_line()
