"""genesis-mem as a program: bad input, watched commands, Ctrl-C, output
errors, and the same commands through python -m genesis.tools.memory."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

import memtrace
from memtrace import run_genesis_mem

pytestmark = pytest.mark.skipif(memtrace.genesis_mem_path() is None,
                                reason="genesis-mem is not built next to the genesis package (build target genesis-mem)")


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    """Ten minutes of a steady training job (trace time)."""
    return memtrace.steady_training(tmp_path_factory.mktemp("cli") / "steady.csv")


def one_line_error(p):
    """The error line of a failed run (exactly one line on stderr)."""
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("genesis-mem: error: "), lines[0]
    return lines[0]


def test_version_is_the_packages():
    # One version everywhere: genesis-mem and the Python package both take it
    # from the generated genesis/version.h.
    import genesis

    p = run_genesis_mem("--version")
    assert p.returncode == 0
    assert p.stdout.strip() == "genesis-mem " + genesis.__version__
    assert genesis.__version__ == genesis._C.__version__
    assert all(part.isdigit() for part in genesis.__version__.split(".")) and genesis.__version__.count(".") == 2


def test_bad_inputs_fail_with_one_line_naming_the_problem(trace, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("time_us,action,addr,size,stream\n0,alloc,0x10,100,0\n5,alloc,0x20,abc,0\n")
    cases = [
        (["frobnicate"], ["unknown command 'frobnicate'", "profile"]),
        (["profile", "--frobnicate"], ["--frobnicate"]),
        (["profile", "--trace", trace.path, "--speed", "max", "--devices", "7"], ["unknown device '7'", "0"]),
        (["profile", "--pid", "999999999"], ["999999999"]),
        (["profile", "--", "/nonexistent/genesis-mem-test-cmd"], ["cannot run", "/nonexistent/genesis-mem-test-cmd"]),
        (["profile", "--trace", bad, "--speed", "max"], ["bad.csv:3", "size", "abc"]),
        (["profile", "--trace", tmp_path / "missing.csv"], ["missing.csv"]),
        (["profile", "--trace", trace.path, "--speed", "fast"], ["speed", "fast"]),
        (["profile", "--trace", trace.path, "--interval", "0"], ["--interval"]),
        (["leak", "--trace", trace.path, "--threshold", "0"], ["--threshold"]),
        (["oom", "--trace", trace.path, "--threshold", "150"], ["--threshold", "150"]),
    ]
    for args, words in cases:
        p = run_genesis_mem(*args)
        assert p.returncode == 2, (args, p.stderr)
        line = one_line_error(p)
        for w in words:
            assert w in line, (args, line)
        assert p.stdout == "", args


def test_outputs_never_overwrite_each_other_or_the_trace(trace, tmp_path):
    import shutil
    victim = tmp_path / "victim.csv"
    shutil.copy(trace.path, victim)
    before = victim.read_bytes()
    r = str(tmp_path / "r.json")
    cases = [
        (["-o", str(victim)], ["--output", "is the trace being read"]),
        (["-o", str(tmp_path / "." / "victim.csv")], ["is the trace being read"]),
        (["--html", str(victim)], ["--html", "is the trace being read"]),
        (["-o", r, "--html", r], ["--output and --html both write"]),
        (["--html", r, "--chrome-trace", r], ["--html and --chrome-trace both write"]),
        (["-o", str(tmp_path / "v.png"), "--plot"], ["--output and --plot both write", ".png"]),
    ]
    for extra, words in cases:
        p = run_genesis_mem("profile", "--trace", str(victim), "--speed", "max", "-q", *extra)
        assert p.returncode == 2, (extra, p.stderr)
        line = one_line_error(p)
        for w in words:
            assert w in line, (extra, line)
    assert victim.read_bytes() == before
    assert not (tmp_path / "r.json").exists() and not (tmp_path / "v.png").exists()


def test_a_chosen_python_is_the_one_used_for_plots(trace, tmp_path):
    # GENESIS_MEM_PYTHON names the interpreter: one that cannot run is an
    # error (no quiet fallback), and one that fails silently says so.
    for python, words in ((str(tmp_path / "no-such-python"), ["GENESIS_MEM_PYTHON=", "cannot be run"]),
                          ("/bin/false", ["failed without a message", "exit status 1"])):
        p = subprocess.run([str(memtrace.genesis_mem_path()), "profile", "--trace", trace.path, "--speed", "max",
                            "-q", "--plot", "-o", str(tmp_path / "r.json")],
                           capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, GENESIS_MEM_PYTHON=python))
        assert p.returncode == 1, p.stderr
        for w in words:
            assert w in p.stderr, (python, p.stderr)
        assert (tmp_path / "r.json").exists()  # the report itself is written


def test_unwritable_output_fails_before_watching(trace):
    started = time.monotonic()
    # At real speed the trace would take ten minutes: the check comes first.
    p = run_genesis_mem("profile", "--trace", trace.path, "--speed", "1", "--duration", "0",
                        "-o", "/nonexistent/dir/report.json", timeout=20)
    assert p.returncode == 2
    assert time.monotonic() - started < 10
    line = one_line_error(p)
    assert "/nonexistent/dir/report.json" in line and "No such file or directory" in line


def test_no_nvml_names_the_other_sources():
    from genesis import _C

    if _C.nvml_available():
        pytest.skip("NVML is available here: the default source works")
    p = run_genesis_mem("profile", "--duration", "1")
    assert p.returncode != 0
    line = one_line_error(p)
    assert "NVML" in line and "--trace" in line and "--pid" in line


def test_stdout_full_is_an_error(trace):
    with open("/dev/full", "w") as full:
        for extra in ([], ["--json"]):
            p = subprocess.run([str(memtrace.genesis_mem_path()), "profile", "--trace", trace.path, "--speed", "max",
                                "-q", *extra], stdout=full, stderr=subprocess.PIPE, text=True, timeout=30)
            assert p.returncode != 0, extra
            assert "standard output" in p.stderr


def test_watched_command_exit_status_is_reported(tmp_path):
    out = tmp_path / "child.json"
    p = run_genesis_mem("profile", "--duration", "0", "--interval", "0.05", "-q", "-o", out, "--",
                        "sh", "-c", "sleep 0.3; exit 3")
    assert p.returncode == 1
    assert "exited with 3" in p.stderr
    r = json.loads(out.read_text())
    assert "sh -c" in r["source"]
    (dev,) = r["devices"].values()
    assert dev["statistics"]["num_snapshots"] >= 3


def test_watched_command_success_is_status_0(tmp_path):
    p = run_genesis_mem("profile", "--duration", "0", "-q", "--json", "--", "true")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["devices"]


def catches_sigint(pid):
    """Whether process `pid` has installed a SIGINT handler (its SigCgt mask in /proc)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) & (1 << (signal.SIGINT - 1)))
    except OSError:
        pass
    return False


def start_watching(trace, out, extra=(), env=None):
    proc = subprocess.Popen([str(memtrace.genesis_mem_path()), "profile", "--trace", trace.path, "--speed", "1",
                             "--duration", "0", "--interval", "0.05", "-q", "-o", str(out), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    # A loaded machine may take a while to start it: Ctrl-C before its handler
    # is in place would test the default action, not genesis-mem.
    deadline = time.monotonic() + 30
    while not catches_sigint(proc.pid) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(1.0)
    assert proc.poll() is None, proc.communicate()
    return proc


def test_ctrl_c_stops_and_writes_the_report(trace, tmp_path):
    out = tmp_path / "partial.json"
    proc = start_watching(trace, out)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=20)
    assert proc.returncode == 0, stderr
    stats = json.loads(out.read_text())["devices"]["0"]["statistics"]
    # About one second of the ten-minute trace was watched (20 snapshots on
    # an idle machine; fewer when the machine is loaded).
    assert stats["num_snapshots"] >= 5
    assert 0.5 < stats["duration_seconds"] < 10
    assert "observed" in stdout


def test_one_request_delivered_twice_is_one_request(trace, tmp_path):
    # `timeout` signals the child and then its process group: the same
    # request arrives twice within microseconds, and must still write the
    # report.
    out = tmp_path / "once.json"
    proc = start_watching(trace, out)
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.005)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=20)
    assert proc.returncode == 0, stderr
    assert json.loads(out.read_text())["devices"]["0"]["statistics"]["num_snapshots"] >= 1


def test_ctrl_c_twice_exits_130(trace, tmp_path):
    # A second Ctrl-C while the outputs are being written (here: a plot by a
    # "Python" that takes seconds) gives up at once.
    slow = tmp_path / "slow-python"
    slow.write_text("#!/bin/sh\nsleep 5\n")
    slow.chmod(0o755)
    proc = start_watching(trace, tmp_path / "r.json", extra=["--plot"],
                          env=dict(os.environ, GENESIS_MEM_PYTHON=str(slow)))
    proc.send_signal(signal.SIGINT)
    time.sleep(1.5)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=20)
    assert proc.returncode == 130, stderr
    assert "interrupted twice" in stderr


# --- python -m genesis.tools.memory ---------------------------------------------

def run_module(*args):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [_package_dir(), env.get("PYTHONPATH")] if p)
    return subprocess.run([sys.executable, "-m", "genesis.tools.memory", *map(str, args)], capture_output=True,
                          text=True, timeout=60, env=env)


def _package_dir():
    import genesis

    return os.path.dirname(os.path.dirname(os.path.abspath(genesis.__file__)))


def test_module_profile(trace):
    p = run_module("profile", "--trace", trace.path, "--speed", "max", "--duration", "0", "--json", "-q")
    assert p.returncode == 0, p.stderr
    dev = json.loads(p.stdout)["devices"]["0"]
    assert dev["peak_memory"] == trace.peak_block_bytes


def test_module_leak_check(tmp_path):
    leaky = memtrace.leaky_training(tmp_path / "leaky.csv")
    p = run_module("leak", "--trace", leaky.path, "--speed", "max", "--duration", "0", "--check",
                   "--enable-tracking", "-q")
    assert p.returncode == 3, p.stderr
    assert "leaky.py:42 in train_step" in p.stdout


def test_module_errors():
    p = run_module("frobnicate")
    assert p.returncode == 2
    assert "unknown command 'frobnicate'" in p.stderr
    assert "python -m genesis.tools.memory" in p.stderr or "genesis-mem" in p.stderr
