"""The PyTorch jobs benchmark's summary over repeated rounds (bench/torch/jobs.py): what it quotes
must survive a machine whose speed drifts between rounds. Needs neither torch nor a GPU."""
import importlib.util
from pathlib import Path

import pytest

JOBS_PY = Path(__file__).resolve().parents[2] / "bench" / "torch" / "jobs.py"


@pytest.fixture(scope="module")
def jobs():
    spec = importlib.util.spec_from_file_location("genesis_bench_jobs", JOBS_PY)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run(job, alloc, rnd, rate, **kw):
    return {"job": job, "allocator": alloc, "round": rnd, "ok": True, "steps_per_s": rate, **kw}


def test_every_allocator_leads_one_round(jobs):
    allocs = ["native", "expandable", "genesis"]
    firsts = [jobs.rotated(allocs, k)[0] for k in range(3)]
    assert sorted(firsts) == sorted(allocs)
    for k in range(5):
        assert sorted(jobs.rotated(allocs, k)) == sorted(allocs)


def test_ratio_to_the_baseline_is_paired_by_round(jobs):
    # The machine runs twice as fast in round 1: each allocator's own median
    # moves with it, the ratio within a round does not.
    rows = [run("gpt2", "native", 0, 10.0), run("gpt2", "genesis", 0, 9.9),
            run("gpt2", "native", 1, 20.0), run("gpt2", "genesis", 1, 19.8),
            run("gpt2", "native", 2, 12.0), run("gpt2", "genesis", 2, 11.88)]
    summary = {(r["job"], r["allocator"]): r for r in jobs.summarize(rows)}
    g = summary[("gpt2", "genesis")]
    assert g["runs"] == 3 and g["failed"] == 0
    assert g["vs_baseline"] == pytest.approx(0.99)
    assert g["vs_baseline_min"] == pytest.approx(0.99) and g["vs_baseline_max"] == pytest.approx(0.99)
    assert g["steps_per_s"] == pytest.approx(11.88)
    assert g["spread"] == pytest.approx((19.8 - 9.9) / 11.88, abs=1e-4)
    assert summary[("gpt2", "native")]["vs_baseline"] == pytest.approx(1.0)


def test_failed_runs_are_counted_not_averaged(jobs):
    rows = [run("bert", "native", 0, 8.0), run("bert", "genesis", 0, 7.0, peak_reserved=100),
            {"job": "bert", "allocator": "genesis", "round": 1, "ok": False, "error": "OutOfMemoryError"},
            run("bert", "native", 1, 8.0), run("bert", "genesis", 2, 7.5, peak_reserved=120)]
    g = {(r["job"], r["allocator"]): r for r in jobs.summarize(rows)}[("bert", "genesis")]
    assert g["runs"] == 2 and g["failed"] == 1
    # Round 2 has no native run: only round 0's ratio is paired.
    assert g["vs_baseline"] == pytest.approx(7.0 / 8.0)
    assert g["peak_reserved"] == 120  # the largest over the rounds


def test_an_allocator_that_never_ran_is_listed_with_its_failures(jobs):
    rows = [run("serve", "native", 0, 3.0),
            {"job": "serve", "allocator": "genesis", "round": 0, "ok": False, "error": "crash"}]
    g = {(r["job"], r["allocator"]): r for r in jobs.summarize(rows)}[("serve", "genesis")]
    assert g["runs"] == 0 and g["failed"] == 1 and "steps_per_s" not in g
