"""genesis-mem over recorded traces: the figures of every command's report
against what the synthetic traces (memtrace.py) were built to hold."""

import json
import re
import zlib

import pytest

import memtrace
from memtrace import MiB, run_genesis_mem

pytestmark = pytest.mark.skipif(memtrace.genesis_mem_path() is None,
                                reason="genesis-mem is not built next to the genesis package (build target genesis-mem)")


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    return memtrace.make_traces(tmp_path_factory.mktemp("traces"))


def report(*args, **kwargs):
    """Runs a command with --json at max speed; (report dict, process)."""
    p = run_genesis_mem(*args, "--speed", "max", "--json", "-q", **kwargs)
    assert p.returncode in (0, 3), p.stderr
    return json.loads(p.stdout), p


def png_size_and_colours(path):
    """(width, height, distinct RGB(A) pixels of a sample of rows) of a PNG,
    decoded with zlib (filters undone for the rows read)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        n = int.from_bytes(data[pos:pos + 4], "big")
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    width, height = int.from_bytes(header[0:4], "big"), int.from_bytes(header[4:8], "big")
    bit_depth, colour_type, interlace = header[8], header[9], header[12]
    assert bit_depth == 8 and colour_type in (2, 6) and interlace == 0, "unexpected PNG layout"
    bpp = 3 if colour_type == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    prev = bytearray(stride)
    colours = set()
    for y in range(height):
        row_start = y * (stride + 1)
        ftype = raw[row_start]
        row = bytearray(raw[row_start + 1:row_start + 1 + stride])
        for i in range(stride):
            a = row[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if ftype == 1:
                row[i] = (row[i] + a) & 255
            elif ftype == 2:
                row[i] = (row[i] + b) & 255
            elif ftype == 3:
                row[i] = (row[i] + (a + b) // 2) & 255
            elif ftype == 4:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                row[i] = (row[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        if y % 7 == 0:
            colours.update(bytes(row[i:i + 3]) for i in range(0, stride, bpp))
        prev = row
    return width, height, colours


# --- profile ------------------------------------------------------------------

def test_profile_peak_current_and_samples_match_the_trace(traces):
    info = traces["steady"]
    r, _ = report("profile", "--trace", info.path, "--duration", "0", "--interval", "0.25")
    dev = r["devices"]["0"]
    # Peak allocated: the trace's peak live bytes with each block rounded to 512.
    assert dev["peak_memory"] == info.peak_block_bytes
    assert dev["peaks"]["allocated"] == info.peak_block_bytes
    assert info.peak_block_bytes != info.peak_live_bytes  # the rounding is really tested
    cur = dev["current_memory"]
    assert cur["allocated"] == info.live_at_end_block_bytes
    assert cur["num_allocs"] == info.num_allocs
    assert cur["exact"] is True
    assert cur["reserved"] >= cur["allocated"] and cur["cached"] == cur["reserved"] - cur["allocated"]
    assert cur["total"] == 128 << 30  # the default simulated capacity for a small trace
    stats = dev["statistics"]
    # Samples every 0.25 s of trace time from 0 to the last tick, plus one at the end.
    ticks = int(info.duration_s / 0.25) + 1
    assert stats["num_snapshots"] in (ticks, ticks + 1)
    assert stats["duration_seconds"] == pytest.approx(info.duration_s, abs=1e-6)
    assert 0 < stats["avg_fragmentation"] <= stats["max_fragmentation"] <= 100
    assert r["summary"]["total_devices"] == 1
    assert "steady.csv" in r["source"]


def test_profile_duration_is_trace_time(traces):
    r, _ = report("profile", "--trace", traces["steady"].path, "--duration", "30", "--interval", "1")
    stats = r["devices"]["0"]["statistics"]
    assert stats["num_snapshots"] == 31
    assert stats["duration_seconds"] == pytest.approx(30.0)


def test_profile_summary_names_peaks(traces):
    p = run_genesis_mem("profile", "--trace", traces["steady"].path, "--speed", "max", "--duration", "0", "-q")
    assert p.returncode == 0, p.stderr
    assert "peak      allocated 372.1 MiB" in p.stdout
    assert "trace finished" in p.stdout


def test_trace_from_stdin(traces):
    info = traces["steady"]
    with open(info.path, encoding="utf-8") as f:
        r, _ = report("profile", "--trace", "-", "--duration", "0", stdin=f)
    assert r["devices"]["0"]["peak_memory"] == info.peak_block_bytes


# --- leak ---------------------------------------------------------------------

def test_leak_found_at_its_rate_and_site(traces):
    info = traces["leaky"]
    r, p = report("leak", "--trace", info.path, "--duration", "0", "--enable-tracking", "--check")
    assert p.returncode == 3
    dev = r["devices"]["0"]
    assert dev["leak_detected"] is True
    assert dev["growth_rate_mb_per_min"] == pytest.approx(info.leak_rate_mib_per_min, rel=0.2)
    assert dev["tracking"] is True
    top = dev["sites"][0]
    assert top["frames"] == memtrace.LEAK_FRAMES
    assert top["growth_rate_mb_per_min"] == pytest.approx(info.leak_rate_mib_per_min, rel=0.2)
    # Growth over the last window (60 s): one minute of the leak.
    assert top["growth_bytes"] == pytest.approx(info.leak_rate_mib_per_min * MiB, rel=0.1)
    # Held at the end: one leaked block per step, all of them.
    steps = int(info.duration_s)  # steps 1 .. 600, the last ending at 600.9 s
    assert top["count"] == steps
    assert top["bytes"] == steps * int(info.leak_rate_mib_per_min * MiB / 60)
    # The weights never grow: they are not ranked above the leak (if at all).
    assert all(s["frames"] != memtrace.LEAK_FRAMES for s in dev["sites"][1:])


def test_leak_summary_prints_the_site(traces):
    p = run_genesis_mem("leak", "--trace", traces["leaky"].path, "--speed", "max", "--duration", "0",
                        "--enable-tracking", "-q")
    assert p.returncode == 0, p.stderr  # without --check a leak is not an error
    assert "LEAK" in p.stdout
    assert "leaky.py:42 in train_step" in p.stdout and "called from leaky.py:90 in main" in p.stdout


@pytest.mark.parametrize("name", ["steady", "warmup"])
def test_no_leak_in_steady_or_warming_up_jobs(traces, name):
    r, p = report("leak", "--trace", traces[name].path, "--duration", "0", "--check")
    assert p.returncode == 0
    dev = r["devices"]["0"]
    assert dev["leak_detected"] is False
    assert abs(dev["growth_rate_mb_per_min"]) < 1.0
    assert dev["warmup_seconds"] >= 60


def test_leak_threshold_above_the_rate_is_no_leak(traces):
    _, p = report("leak", "--trace", traces["leaky"].path, "--duration", "0", "--threshold", "45", "--check")
    assert p.returncode == 0


# --- oom ----------------------------------------------------------------------

def test_oom_predicts_time_and_risk_of_growing_job(traces):
    info = traces["growth"]
    capacity = 4400 * MiB
    # The truth: live memory reaches the capacity this long after the trace ends.
    truth = (capacity - info.peak_block_bytes) / info.growth_bytes_per_s
    p = run_genesis_mem("oom", "--trace", info.path, "--speed", "max", "--duration", "0",
                        "--capacity", "4400MiB", "--json")
    assert p.returncode == 0, p.stderr
    risk = json.loads(p.stdout)["devices"]["0"]["risk_assessment"]
    assert risk["predicted_oom_time_seconds"] == pytest.approx(truth, rel=0.2)
    assert risk["growth_rate_mb_per_sec"] == pytest.approx(info.growth_bytes_per_s / MiB, rel=0.05)
    # Under 85 % used, OOM in under two minutes: high.
    assert risk["current_usage_percent"] < 85
    assert risk["risk_level"] == "high"
    assert risk["recommendations"] and risk["recommendation"] == risk["recommendations"][0]
    warnings = [line for line in p.stderr.splitlines() if line.startswith("genesis-mem: warning:")]
    assert warnings, p.stderr
    assert re.match(r"genesis-mem: warning: high OOM risk on device 0: \d+\.\d% used, out of memory in about",
                    warnings[-1])


def test_oom_summary_uses_the_same_growth_unit_as_the_json(traces):
    p = run_genesis_mem("oom", "--trace", traces["growth"].path, "--speed", "max", "--duration", "0",
                        "--capacity", "8GiB", "-q")
    assert p.returncode == 0, p.stderr
    assert "peaks growing 8.00 MiB/s" in p.stdout  # the JSON's growth_rate_mb_per_sec is in MiB (2^20 bytes) too


def test_oom_low_risk_on_steady_job(traces):
    r, _ = report("oom", "--trace", traces["steady"].path, "--duration", "0", "--capacity", "16GiB")
    risk = r["devices"]["0"]["risk_assessment"]
    assert risk["risk_level"] == "low"
    assert risk["predicted_oom_time_seconds"] < 0 or risk["predicted_oom_time_seconds"] > 3600
    assert r["devices"]["0"]["warnings"] == []


# --- fragment -----------------------------------------------------------------

def test_fragment_samples_and_averages(traces):
    info = traces["fragmenting"]
    r, _ = report("fragment", "--trace", info.path, "--duration", "0", "--interval", "0.5")
    dev = r["devices"]["0"]
    samples = dev["samples"]
    assert dev["num_samples"] == len(samples)
    assert len(samples) >= int(info.duration_s / 0.5)
    fr = [s["fragmentation"] for s in samples]
    assert dev["max_fragmentation"] == pytest.approx(max(fr))
    assert dev["avg_fragmentation"] == pytest.approx(sum(fr) / len(fr), rel=1e-6)
    last = samples[-1]
    assert last["allocated"] == info.live_at_end_block_bytes
    assert last["cached"] == last["reserved"] - last["allocated"]
    assert dev["current_fragmentation"] == pytest.approx(100 * last["cached"] / last["reserved"])
    # Holes between live blocks: many free blocks, none larger than a hole.
    assert dev["free_blocks"] >= 64
    assert dev["largest_free_block"] <= 4 * MiB
    steady, _ = report("fragment", "--trace", traces["steady"].path, "--duration", "0", "--interval", "0.5")
    assert dev["avg_fragmentation"] > steady["devices"]["0"]["avg_fragmentation"] + 5


# --- monitor and interactive --------------------------------------------------

def test_monitor_all_runs_every_tool(traces):
    r, _ = report("monitor", "--all", "--trace", traces["leaky"].path)
    for key in ("profile", "oom", "leak", "fragment", "sampler"):
        assert key in r, key
    assert r["leak"]["devices"]["0"]["leak_detected"] is True
    assert r["profile"]["devices"]["0"]["peak_memory"] == traces["leaky"].peak_block_bytes
    assert r["oom"]["devices"]["0"]["risk_assessment"]["risk_level"] == "low"
    # Only the leaking site grows over the OOM horizon; the weights were
    # allocated once, at the start.
    recs = r["oom"]["devices"]["0"]["risk_assessment"]["recommendations"]
    growing = [x for x in recs if x.startswith("Growing site")]
    assert growing and all("leaky.py:42 in train_step" in x for x in growing), recs
    assert r["sampler"]["rounds"] >= 6000


def test_monitor_without_all_is_profile_and_oom(traces):
    r, _ = report("monitor", "--trace", traces["steady"].path, "--duration", "10")
    assert "profile" in r and "oom" in r
    assert "leak" not in r and "fragment" not in r


def test_interactive_plain_frames(traces):
    p = run_genesis_mem("interactive", "--trace", traces["leaky"].path, "--speed", "max", "--frames", "3",
                        "--plain")
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("genesis-mem interactive") == 3
    assert "\x1b[" not in p.stdout  # plain: no colours, no screen clearing
    device_lines = [ln for ln in p.stdout.splitlines() if re.match(r"> 0 +\d", ln)]
    assert len(device_lines) == 3
    assert "top allocation sites" in p.stdout and "model.py:10 in build" in p.stdout
    times = [float(t) for t in re.findall(r"t=(\d+\.\d+) s", p.stdout)]
    assert times == sorted(times) and times[-1] > times[0]


# --- output files -------------------------------------------------------------

def test_plot_html_and_chrome_trace_outputs(traces, tmp_path):
    out = tmp_path / "run.json"
    html = tmp_path / "run.html"
    chrome = tmp_path / "run.trace.json"
    p = run_genesis_mem("profile", "--trace", traces["steady"].path, "--speed", "max", "--duration", "120", "-q",
                        "-o", out, "--plot", "--html", html, "--chrome-trace", chrome)
    assert p.returncode == 0, p.stderr
    assert json.loads(out.read_text())["devices"]["0"]["statistics"]["num_snapshots"] == 1201
    # The PNG: next to the JSON, a real picture (axes, lines, text).
    png = tmp_path / "run.png"
    assert png.exists(), p.stderr
    width, height, colours = png_size_and_colours(png)
    assert width >= 600 and height >= 300
    assert len(colours) >= 20
    assert f"plots written to {png}" in p.stderr
    assert "matplotlib is not installed" not in p.stderr
    # The HTML page: self-contained, with a chart.
    page = html.read_text()
    assert page.lstrip().lower().startswith("<!doctype html")
    assert "<svg" in page and "<script" not in page
    assert "steady.csv" in page
    # The Chrome trace: events of the replay, counters of allocated bytes.
    t = json.loads(chrome.read_text())
    events = t["traceEvents"]
    counters = [e for e in events if e["ph"] == "C"]
    assert counters and max(e["args"]["allocated"] for e in counters) == traces["steady"].peak_block_bytes
    # No reserved counter stuck at 0: the trace source records no segments.
    assert all(e["args"].get("reserved", 1) > 0 for e in counters[1:])
    assert any(e["ph"] == "X" for e in events)
    assert max(e.get("ts", 0) for e in events) <= 120.0e6 + 1  # the replay stopped at --duration
