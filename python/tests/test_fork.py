"""A forked child can use Genesis (Note [Fork] in genesis/core/fork.h).

Each case runs in a fresh interpreter with a time limit: before fork handling
a child hung for ever (the CPU thread pool's workers are not in the child, so
the first parallel operation waited for them; the metrics server and the
memory debugger joined threads that do not exist when the child exited). The
children exit through the normal interpreter shutdown (static destructors,
atexit handlers) unless a case says otherwise, since that path hung too.
"""

import os
import subprocess
import sys
import textwrap

import pytest

TIMEOUT_S = 120  # a hang, not a slow machine, is what trips it


def run_script(body, env=None, prelude=""):
    code = prelude + textwrap.dedent(body)
    full_env = dict(os.environ)
    full_env.update(env or {})
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT_S,
                              env=full_env)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"hung (no exit within {TIMEOUT_S} s); output so far:\n{e.stdout}\n{e.stderr}")
    assert proc.returncode == 0, f"exit status {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc.stdout


# What a child checks after the fork: every kind of parallel CPU kernel
# (element-wise, reduction, matmul, copy), with results compared against
# values computed by hand, so a child that ran but computed garbage fails too.
CHILD_WORK = """
def child_work(genesis):
    n = 1 << 20
    a = genesis.ones(n) + 1                      # element-wise, parallel
    assert float(a.sum()) == 2.0 * n             # reduction, parallel
    b = genesis.arange(n, dtype=genesis.int64)
    assert int((b * 2).sum()) == n * (n - 1)
    m = genesis.ones(512, 512)
    p = m @ m                                     # matmul
    assert float(p[3, 7]) == 512.0
    t = genesis.ones(1024, 1024).t().contiguous()  # strided copy, parallel
    assert float(t.sum()) == 1024.0 * 1024.0
    s = genesis.Storage((16 << 20,), genesis.uint8)
    c = s.clone()                                 # large host copy (parallel memcpy)
    assert c.nbytes == 16 << 20
"""


def test_child_after_big_op_runs_parallel_ops_and_exits():
    out = run_script(prelude=CHILD_WORK, body="""
        import os, genesis
        # Start every pool in the parent first: the child inherits their state.
        child_work(genesis)
        pid = os.fork()
        if pid == 0:
            child_work(genesis)
            print("child done", flush=True)
            raise SystemExit(0)   # normal interpreter exit: destructors run
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, status
        child_work(genesis)       # the parent's pools still work
        print("parent done")
    """)
    assert "parent done" in out


def test_grandchild_and_thread_count_in_child():
    out = run_script(prelude=CHILD_WORK, body="""
        import os, genesis
        child_work(genesis)
        pid = os.fork()
        if pid == 0:
            genesis.set_num_threads(2)   # the child's fresh pool takes a setting
            assert genesis.get_num_threads() == 2
            child_work(genesis)
            pid2 = os.fork()
            if pid2 == 0:
                child_work(genesis)
                os._exit(0)
            _, st = os.waitpid(pid2, 0)
            os._exit(os.waitstatus_to_exitcode(st))
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, status
        print("ok")
    """)
    assert "ok" in out


def test_fork_while_other_threads_compute():
    # Threads run large operations without the GIL (allocating, in the CPU
    # pool) while the main thread forks: locks they hold at that instant must
    # not be held for ever in the child.
    out = run_script(prelude=CHILD_WORK, body="""
        import os, threading, genesis
        stop = threading.Event()
        def busy():
            while not stop.is_set():
                x = genesis.ones(1 << 19) * 3
                x.sum()
                genesis.Storage((8 << 20,), genesis.uint8).clone()
        threads = [threading.Thread(target=busy) for _ in range(2)]
        for t in threads:
            t.start()
        try:
            for _ in range(20):
                pid = os.fork()
                if pid == 0:
                    child_work(genesis)
                    os._exit(0)
                _, status = os.waitpid(pid, 0)
                assert os.waitstatus_to_exitcode(status) == 0, status
        finally:
            stop.set()
            for t in threads:
                t.join()
        print("ok")
    """)
    assert "ok" in out


def test_multiprocessing_pool_with_fork_context():
    out = run_script(prelude=CHILD_WORK, body="""
        import multiprocessing as mp, genesis

        def work(i):
            x = genesis.full((1 << 18,), float(i))
            return float((x * 2).sum())

        if __name__ == "__main__":
            genesis.ones(1 << 20).sum()      # the parent's pool is running
            with mp.get_context("fork").Pool(3) as pool:
                got = pool.map(work, range(8))
            assert got == [2.0 * i * (1 << 18) for i in range(8)], got
            print("ok")
    """)
    assert "ok" in out


def test_child_exits_while_parent_serves_metrics():
    out = run_script("""
        import os, urllib.request, genesis
        from genesis.tools.memory import distributed
        port = distributed.start_metrics_server(0)
        pid = os.fork()
        if pid == 0:
            (genesis.ones(1 << 20) + 1).sum()
            assert distributed.metrics_server_port() == 0   # the server is the parent's
            raise SystemExit(0)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, status
        # The child's exit did not stop the parent's server (the listening
        # socket is shared across fork).
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
        assert b"genesis_" in body
        distributed.stop_metrics_server()
        print("ok")
    """)
    assert "ok" in out


def test_child_stops_inherited_memory_debugger():
    out = run_script("""
        import os, time, genesis
        from genesis.tools.memory import MemoryDebugger
        d = MemoryDebugger(sampling_interval=0.005, source="genesis")
        d.start_monitoring()
        time.sleep(0.05)
        pid = os.fork()
        if pid == 0:
            (genesis.ones(1 << 20) + 1).sum()
            assert not d.is_monitoring      # the sampling thread is the parent's
            d.stop_monitoring()
            raise SystemExit(0)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, status
        assert d.is_monitoring
        d.stop_monitoring()
        print("ok")
    """)
    assert "ok" in out


def test_child_of_publishing_process_exits():
    out = run_script("""
        import os, genesis
        (genesis.ones(1 << 20) + 1).sum()
        for _ in range(10):
            pid = os.fork()
            if pid == 0:
                (genesis.ones(1 << 20) + 1).sum()
                raise SystemExit(0)
            _, status = os.waitpid(pid, 0)
            assert os.waitstatus_to_exitcode(status) == 0, status
        assert os.path.exists(f"/dev/shm/genesis-mem.{os.getpid()}")
        print("ok")
    """, env={"GENESIS_MEM_PUBLISH": "1"})
    assert "ok" in out
