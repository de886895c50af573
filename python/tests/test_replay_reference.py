"""genesis-mem replay prints a trace's reference figures from the JSON file
next to it, `<trace>.reference.json` (Note [Reference figures] in
include/genesis/debug/replay_reference.h): the rows appear when the file
exists, whatever the trace is called; a trace without one gets none, even
when it is named like the bundled GPT-2 trace; a malformed file is one clear
error line naming the file, and no replay is printed."""

import json

import pytest

import memtrace
from memtrace import run_genesis_mem

pytestmark = pytest.mark.skipif(memtrace.genesis_mem_path() is None,
                                reason="genesis-mem is not built next to the genesis package (build target genesis-mem)")

TRACE = ("time_us,action,addr,size,stream\n"
         "0,alloc,4096,1000,0\n"
         "1,alloc,8192,3000000,0\n"
         "2,free_requested,4096,1000,0\n"
         "3,free_requested,8192,3000000,0\n")

REFERENCE = {
    "label": "measured by hand, not run here",
    "results": [
        {"allocator": "Other allocator", "peak_reserved_bytes": 123456789, "reserved_per_live": 1.234,
         "ns_per_event": 4321},
        {"allocator": "Untimed allocator", "peak_reserved_bytes": 5, "reserved_per_live": 2.5},
    ],
}


def write_trace(tmp_path, name):
    path = tmp_path / name
    path.write_text(TRACE)
    return path


def test_figures_printed_when_the_file_exists(tmp_path):
    trace = write_trace(tmp_path, "any_name.csv")
    (tmp_path / "any_name.csv.reference.json").write_text(json.dumps(REFERENCE))

    p = run_genesis_mem("replay", trace)
    assert p.returncode == 0, p.stderr
    assert "measured by hand, not run here:" in p.stdout
    row = next(ln for ln in p.stdout.splitlines() if "Other allocator" in ln)
    assert "123,456,789" in row and "1.234" in row and "4321" in row, row
    assert "Untimed allocator" in p.stdout

    p = run_genesis_mem("replay", trace, "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["reference"]["label"] == REFERENCE["label"]
    assert out["reference"]["path"] == str(trace) + ".reference.json"
    assert [r["allocator"] for r in out["reference"]["results"]] == ["Other allocator", "Untimed allocator"]
    assert out["reference"]["results"][0]["peak_reserved_bytes"] == 123456789
    assert out["reference"]["results"][1]["ns_per_event"] == 0


@pytest.mark.parametrize("name", ["gpt2_train.trace.csv", "plain.csv"])
def test_no_figures_without_the_file(tmp_path, name):
    trace = write_trace(tmp_path, name)
    p = run_genesis_mem("replay", trace)
    assert p.returncode == 0, p.stderr
    assert "reference" not in p.stdout
    assert "PyTorch" not in p.stdout

    p = run_genesis_mem("replay", trace, "--json")
    assert p.returncode == 0, p.stderr
    assert "reference" not in json.loads(p.stdout)


@pytest.mark.parametrize("text,expected", [
    ("{not json", "is not valid JSON"),
    ('{"label": "x"}', 'has no "results"'),
    ('{"results": [{"allocator": "A", "peak_reserved_bytes": "lots", "reserved_per_live": 1}]}',
     '"peak_reserved_bytes", an integer >= 0'),
])
def test_malformed_file_is_a_clear_error(tmp_path, text, expected):
    trace = write_trace(tmp_path, "t.csv")
    ref = tmp_path / "t.csv.reference.json"
    ref.write_text(text)
    p = run_genesis_mem("replay", trace)
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert p.stdout == ""
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("genesis-mem: error: reference file '" + str(ref) + "'"), lines[0]
    assert expected in lines[0], lines[0]
