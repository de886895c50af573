"""genesis-mem on the inputs a new user hands it: traces with idle gaps,
pipes and links where files were expected, replays that run out of memory,
sizes and options at their edges, servers and workers that get nowhere."""

import gzip
import json
import os
import pathlib
import socket
import subprocess
import time

import pytest

import memtrace
from memtrace import run_genesis_mem

pytestmark = pytest.mark.skipif(memtrace.genesis_mem_path() is None,
                                reason="genesis-mem is not built next to the genesis package (build target genesis-mem)")

MiB = 1 << 20
SNAPSHOT_GZ = pathlib.Path(__file__).resolve().parents[2] / "data" / "snapshots" / "pytorch_reference.pickle.gz"


def write_trace(path, rows):
    path.write_text("time_us,action,addr,size,stream\n" + "".join(",".join(map(str, r)) + "\n" for r in rows))
    return path


def small_trace(path):
    """1 MiB at 0 s, 2 MiB at 0.01 s, the first freed at 1 s, 4 MiB at 2.5 s, the 2 MiB freed at 5 s."""
    return write_trace(path, [(0, "alloc", 0x1000, MiB, 0), (10_000, "alloc", 0x2000, 2 * MiB, 0),
                              (1_000_000, "free_requested", 0x1000, 0, 0), (2_500_000, "alloc", 0x3000, 4 * MiB, 0),
                              (5_000_000, "free_requested", 0x2000, 0, 0)])


def device_report(stdout):
    d = json.loads(stdout)
    return d, next(iter(d["devices"].values()))


def test_max_speed_skips_idle_gaps(tmp_path):
    # Thirty years without an event: at max speed nothing changes until the
    # next event, so its samples are skipped instead of taken every 0.1 s.
    gap = write_trace(tmp_path / "gap.csv", [(0, "alloc", 0x1000, MiB, 0), (10**15, "free_requested", 0x1000, 0, 0),
                                             (10**15 + 1, "alloc", 0x2000, 3 * MiB, 0)])
    started = time.monotonic()
    p = run_genesis_mem("profile", "--trace", gap, "--speed", "max", "-q", "--duration", "0", "--json", timeout=60)
    assert p.returncode == 0, p.stderr
    assert time.monotonic() - started < 30
    d, dev = device_report(p.stdout)
    assert d["summary"]["duration_seconds"] == pytest.approx(1e9, rel=1e-3)
    assert dev["peak_memory"] == 3 * MiB
    p = run_genesis_mem("interactive", "--trace", gap, "--speed", "max", "--frames", "6", timeout=60)
    assert p.returncode == 0, p.stderr


def test_duration_is_watched_to_its_end(tmp_path):
    t = small_trace(tmp_path / "t.csv")
    # 2.6 s in steps of 1 s: the last sample is at 2.6 s, after the 4 MiB.
    p = run_genesis_mem("profile", "--trace", t, "--speed", "max", "-q", "--duration", "2.6", "--interval", "1",
                        "--json")
    assert p.returncode == 0, p.stderr
    _, dev = device_report(p.stdout)
    assert dev["statistics"]["duration_seconds"] == pytest.approx(2.6)
    assert dev["peak_memory"] == 6 * MiB
    # Shorter than one interval: still watched, to its end.
    p = run_genesis_mem("profile", "--trace", t, "--speed", "max", "-q", "--duration", "0.05", "--json")
    assert p.returncode == 0, p.stderr
    _, dev = device_report(p.stdout)
    assert dev["statistics"]["duration_seconds"] == pytest.approx(0.05)
    assert dev["peak_memory"] == 3 * MiB


def test_oom_report_leads_with_allocations_that_failed(tmp_path):
    t = small_trace(tmp_path / "t.csv")
    p = run_genesis_mem("oom", "--trace", t, "--speed", "max", "-q", "--capacity", "5MiB", "--json")
    assert p.returncode == 0, p.stderr
    _, dev = device_report(p.stdout)
    risk = dev["risk_assessment"]
    assert risk["risk_level"] == "critical" and risk["ooms"] == 1
    assert "failed with out of memory" in risk["recommendation"]
    assert not any("No action needed" in r for r in risk["recommendations"])
    text = run_genesis_mem("oom", "--trace", t, "--speed", "max", "-q", "--capacity", "5MiB").stdout
    assert "1 allocations out of memory" in text and "No action needed" not in text
    # A fitted rate without confidence is not called growth.
    fits = run_genesis_mem("oom", "--trace", t, "--speed", "max", "-q").stdout
    assert "No action needed" in fits and "peaks growing" not in fits


def test_replay_that_runs_out_of_memory_says_so(tmp_path):
    t = small_trace(tmp_path / "big.trace.csv")
    p = run_genesis_mem("replay", t, "--capacity", "5MiB")
    assert p.returncode == 4, p.stderr
    row = next(line for line in p.stdout.splitlines() if line.startswith("genesis "))
    assert " OOM " in row
    assert "does not fit" in p.stderr and "1 allocations failed" in p.stderr
    p = run_genesis_mem("replay", t, "--capacity", "5MiB", "--json")
    assert p.returncode == 4 and json.loads(p.stdout)["results"][0]["ooms"] == 1

    # In a corpus the row shows OOM and stays out of the geometric mean.
    write_trace(tmp_path / "small.trace.csv", [(0, "alloc", 0x1000, MiB, 0), (1, "free_requested", 0x1000, 0, 0)])
    p = run_genesis_mem("replay", "--corpus", tmp_path, "--config", "genesis", "--capacity", "5MiB", "--json")
    assert p.returncode == 4, p.stderr
    d = json.loads(p.stdout)
    small = next(r for r in d["traces"] if r["name"] == "small")
    assert d["geometric_mean"]["reserved_per_live"]["genesis"] == pytest.approx(
        small["results"][0]["reserved_per_live"])
    p = run_genesis_mem("replay", "--corpus", tmp_path, "--config", "genesis", "--capacity", "5MiB")
    big_row = next(line for line in p.stdout.splitlines() if line.startswith("big "))
    assert "OOM" in big_row


def test_sizes_past_2_62_are_refused_with_their_line(tmp_path):
    t = write_trace(tmp_path / "huge.csv", [(0, "alloc", 0x1000, 100, 0), (1, "alloc", 0x2000, 2**62 + 1, 0)])
    for args in (("replay", t), ("profile", "--trace", t, "--speed", "max", "-q")):
        p = run_genesis_mem(*args)
        assert p.returncode == 2, p.stderr
        assert "huge.csv:3" in p.stderr and "2^62" in p.stderr
        assert p.stdout == ""
    # Many sizes of 2^62 would add up past 2^64.
    t = write_trace(tmp_path / "sum.csv", [(i, "alloc", 0x1000 * (i + 1), 2**62, 0) for i in range(5)])
    p = run_genesis_mem("replay", t)
    assert p.returncode == 2 and "2^64" in p.stderr


def test_empty_trace_is_not_a_result(tmp_path):
    t = tmp_path / "empty.csv"
    t.write_text("time_us,action,addr,size,stream\n")
    p = run_genesis_mem("replay", t)
    assert p.returncode == 2 and "no allocations" in p.stderr


def test_unsupported_pickle_protocol_is_named(tmp_path):
    t = tmp_path / "p6.pickle"
    t.write_bytes(b"\x80\x06}q\x00.")
    p = run_genesis_mem("replay", t)
    assert p.returncode == 2 and "protocol 6" in p.stderr


def test_convert_reads_gzip_and_pipes_and_writes_standard_output(tmp_path):
    # gzip input, the trace on standard output, the summary on standard error.
    p = run_genesis_mem("convert", SNAPSHOT_GZ, "-", timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("time_us,action,addr,size,stream")
    assert "entries ->" in p.stderr
    # /dev/stdout is a pipe here: written, never read back (which would hang).
    p = run_genesis_mem("convert", SNAPSHOT_GZ, "/dev/stdout", timeout=60)
    assert p.returncode == 0 and p.stdout.startswith("time_us,")
    # A snapshot on standard input.
    out = tmp_path / "from_stdin.csv"
    p = subprocess.run([str(memtrace.genesis_mem_path()), "convert", "-", str(out)],
                       input=gzip.decompress(SNAPSHOT_GZ.read_bytes()), capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert out.read_text().startswith("time_us,")


def test_convert_never_overwrites_its_input(tmp_path):
    snap = tmp_path / "s.pickle"
    snap.write_bytes(gzip.decompress(SNAPSHOT_GZ.read_bytes()))
    before = snap.read_bytes()
    (tmp_path / "link.pickle").symlink_to(snap)
    os.link(snap, tmp_path / "hard.pickle")
    for out in ("./s.pickle", str(snap), "link.pickle", "hard.pickle"):
        p = run_genesis_mem("convert", "s.pickle", out, cwd=tmp_path)
        assert p.returncode == 2, (out, p.stderr)
        assert "is the input" in p.stderr
        assert snap.read_bytes() == before


def test_options_at_their_edges_are_refused(tmp_path):
    t = small_trace(tmp_path / "t.csv")
    cases = [
        (("replay", t, "--capacity", ""), "--capacity"),
        (("replay", t, "--capacity", "0"), "above 0 bytes"),
        (("profile", "--trace", t, "--capacity", "0GB"), "above 0 bytes"),
        (("replay", t, "--memory-fraction", "0"), "(0, 1]"),
        (("replay", t, "--memory-fraction", "0.1", "--alloc-conf", "memory_fraction:0.5"), "give one"),
        (("interactive", "--trace", t, "--frames", "-1"), "--frames"),
    ]
    for args, words in cases:
        p = run_genesis_mem(*args)
        assert p.returncode == 2, (args, p.stderr)
        assert words in p.stderr, (args, p.stderr)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_exporter_refuses_other_methods_at_once(tmp_path):
    t = small_trace(tmp_path / "t.csv")
    port = free_port()
    exe = str(memtrace.genesis_mem_path())
    proc = subprocess.Popen([exe, "exporter", "--trace", t, "--speed", "0.01", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the exporter never listened"
                time.sleep(0.05)
        # A POST without Content-Length: httplib would read its body until the
        # read timeout; the answer must come at once.
        for request in (b"POST /metrics HTTP/1.1\r\nHost: x\r\n\r\n", b"PUT / HTTP/1.1\r\nHost: x\r\n\r\n"):
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                t0 = time.monotonic()
                s.sendall(request)
                reply = s.recv(4096).decode()
                assert reply.startswith("HTTP/1.1 405"), reply
                assert "Allow: GET" in reply
                assert time.monotonic() - t0 < 2
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_worker_that_reaches_no_master_fails(tmp_path):
    t = small_trace(tmp_path / "t.csv")
    p = run_genesis_mem("distributed", "--role", "worker", "--master-host", "127.0.0.1", "--port", free_port(),
                        "--trace", t, "--speed", "max", "--interval", "0.2", timeout=120)
    assert p.returncode == 1, p.stderr
    assert "no report reached the master" in p.stderr


def test_interactive_handles_every_key_of_one_read(tmp_path):
    # Keys typed together arrive in one read: 's' then 'q' must still quit.
    t = small_trace(tmp_path / "t.csv")
    master, slave = os.openpty()
    proc = subprocess.Popen([str(memtrace.genesis_mem_path()), "interactive", "--trace", str(t), "--speed", "0.01",
                             "--interval", "0.2"], stdin=slave, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    try:
        time.sleep(1.0)
        os.write(master, b"sq")
        deadline = time.monotonic() + 15
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                os.read(master, 65536)  # keep the terminal drained
            except OSError:
                break
        assert proc.wait(timeout=5) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
