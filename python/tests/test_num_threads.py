"""CPU thread count (Note [Thread count] in include/genesis/core/threads.h):
genesis.set_num_threads / get_num_threads, GENESIS_NUM_THREADS, and the
default from the affinity mask and the cgroup CPU quota."""

import os
import subprocess
import sys

import numpy as np
import pytest

import genesis


@pytest.fixture
def restore_threads():
    before = genesis.get_num_threads()
    yield
    genesis.set_num_threads(before)


def run_python(code, env=None, preexec_fn=None):
    full = dict(os.environ)
    full.pop("GENESIS_NUM_THREADS", None)
    full.update(env or {})
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=full,
                          preexec_fn=preexec_fn)


def test_set_and_get(restore_threads):
    genesis.set_num_threads(3)
    assert genesis.get_num_threads() == 3
    genesis.set_num_threads(1)
    assert genesis.get_num_threads() == 1


@pytest.mark.parametrize("bad", [0, -1, 1025, 10**30])
def test_invalid_counts_raise_clear_errors(bad, restore_threads):
    before = genesis.get_num_threads()
    with pytest.raises(ValueError, match="from 1 to 1024"):
        genesis.set_num_threads(bad)
    assert genesis.get_num_threads() == before


@pytest.mark.parametrize("bad", [True, 2.0, "4", None])
def test_non_integers_are_type_errors(bad):
    with pytest.raises(TypeError):
        genesis.set_num_threads(bad)


@pytest.mark.parametrize("threads", [1, 2, 5])
def test_results_do_not_depend_on_the_thread_count(threads, restore_threads):
    # Differential against NumPy at each count: large enough to split.
    genesis.set_num_threads(threads)
    a = np.arange(1 << 18, dtype=np.int64) % 1000 - 500
    x = genesis.from_numpy(a)
    assert int(x.sum()) == int(a.sum())
    np.testing.assert_array_equal((x * 3 + 1).numpy(), a * 3 + 1)
    m = np.arange(512 * 300, dtype=np.float64).reshape(512, 300) / 7
    np.testing.assert_allclose(genesis.from_numpy(m).sum(dim=0).numpy(), m.sum(axis=0), rtol=1e-12)
    np.testing.assert_array_equal(genesis.from_numpy(m).t().contiguous().numpy(), m.T)
    np.testing.assert_allclose((genesis.from_numpy(m[:64]) @ genesis.from_numpy(m[:64].T)).numpy(),
                               m[:64] @ m[:64].T, rtol=1e-12)


def test_environment_variable_sets_the_default():
    out = run_python("import genesis; print(genesis.get_num_threads())", env={"GENESIS_NUM_THREADS": "3"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "3"


@pytest.mark.parametrize("bad", ["abc", "0", "-3", "2.5", "1025"])
def test_invalid_environment_variable_fails_at_import(bad):
    out = run_python("import genesis", env={"GENESIS_NUM_THREADS": bad})
    assert out.returncode != 0
    assert "GENESIS_NUM_THREADS" in out.stderr and "from 1 to 1024" in out.stderr, out.stderr


def test_set_num_threads_overrides_the_environment():
    out = run_python("import genesis; genesis.set_num_threads(2); print(genesis.get_num_threads())",
                     env={"GENESIS_NUM_THREADS": "7"})
    assert out.stdout.strip() == "2", out.stderr


def test_default_follows_the_affinity_mask():
    # Pinned to one CPU (as taskset does), the default is one thread.
    cpu = min(os.sched_getaffinity(0))
    out = run_python("import os, genesis; print(genesis.get_num_threads(), genesis.available_cpus(), "
                     "len(os.sched_getaffinity(0)))",
                     preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "1", "1"]


def test_available_cpus_is_affinity_and_quota():
    affinity = len(os.sched_getaffinity(0))
    quota = genesis._C._cgroup_cpu_limit()
    expect = min(affinity, quota) if quota > 0 else affinity
    assert genesis.available_cpus() == expect
    out = run_python("import genesis; print(genesis.get_num_threads())")
    assert int(out.stdout) == min(expect, 64)


def test_cgroup_limit_read_from_a_fake_root(tmp_path):
    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/self/mountinfo").write_text(
        "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n")
    (tmp_path / "proc/self/cgroup").write_text("0::/job\n")
    (tmp_path / "sys/fs/cgroup/job").mkdir(parents=True)
    (tmp_path / "sys/fs/cgroup/job/cpu.max").write_text("150000 100000\n")
    assert genesis._C._cgroup_cpu_limit(str(tmp_path)) == 2
    (tmp_path / "sys/fs/cgroup/job/cpu.max").write_text("max 100000\n")
    assert genesis._C._cgroup_cpu_limit(str(tmp_path)) == 0
