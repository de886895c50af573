"""Allocator options as text (GENESIS_ALLOC_CONF) and as keyword arguments:
one parser (genesis/memory/alloc_conf.h) for every front end. The
environment is read once per process, so those tests run in fresh ones."""

import os
import subprocess
import sys
import textwrap

import pytest

from genesis import _C, _alloc_conf
from genesis.testing import SimulatedAllocator

MiB = 1 << 20


def run(code, **env):
    e = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), **env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=e,
                          timeout=60)


def test_text_and_keywords_give_the_same_options():
    text = _alloc_conf.conf_text(expandable_segments=True, memory_fraction=0.5, cache_size="2GB",
                                 thread_cache=False, arenas=2)
    assert text == "expandable_segments:True,memory_fraction:0.5,cache_size:2GB,thread_cache:False,arenas:2"
    d = _alloc_conf.parse(text)
    assert d["expandable_segments"] is True and d["memory_fraction"] == 0.5
    assert d["cache_size"] == 2_000_000_000 and d["thread_cache"] is False and d["arenas"] == 2
    assert _alloc_conf.parse(_alloc_conf.conf_text(cache_size=None))["cache_size"] is None
    assert _alloc_conf.parse("")["expandable_segments"] == "auto"
    assert _C.format_alloc_conf(" thread_cache : 0 ,") == "thread_cache:False"
    # The thread cache is the allocator's to resolve unless asked for.
    assert _alloc_conf.parse("")["thread_cache"] == "auto"
    assert _alloc_conf.parse("thread_cache:auto")["thread_cache"] == "auto"
    assert _alloc_conf.parse(_alloc_conf.conf_text(thread_cache=True))["thread_cache"] is True
    # So is how many pages a chunk may strand past a block, unless a number is given.
    assert _alloc_conf.parse("")["chunk_strand_pages"] == "auto"
    assert _alloc_conf.parse("chunk_strand_pages:4")["chunk_strand_pages"] == 4
    # Device memory's threads move out of the shared pool when they contend, unless told not to.
    assert _alloc_conf.parse("")["arena_move_window"] == 256
    assert _alloc_conf.parse(_alloc_conf.conf_text(arena_move_window=0))["arena_move_window"] == 0
    assert _alloc_conf.parse(_alloc_conf.conf_text(chunk_strand_pages="auto"))["chunk_strand_pages"] == "auto"
    # Classic segments keep every free segment unless asked to give them back at the mark.
    assert _alloc_conf.parse("")["classic_release_at_mark"] is False
    assert _alloc_conf.parse(_alloc_conf.conf_text(classic_release_at_mark=True))["classic_release_at_mark"] is True
    # Lending free blocks across streams: on unless turned off.
    assert _alloc_conf.parse("")["stream_borrow"] is True
    assert _alloc_conf.parse(_alloc_conf.conf_text(stream_borrow=False))["stream_borrow"] is False


def test_stream_borrow_off_keeps_each_streams_segments():
    def run_streams(**options):
        sim = SimulatedAllocator(256 * MiB, expandable=False, **options)
        s1, s2 = sim.create_stream(), sim.create_stream()
        p = sim.allocate(12 * MiB, stream=s1)
        sim.free(p)
        q = sim.allocate(12 * MiB, stream=s2)
        stats = sim.memory_stats()
        sim.free(q)
        return p == q, stats["num_stream_borrows"], stats["reserved_bytes"]

    assert run_streams() == (True, 1, 12 * MiB)
    assert run_streams(conf="stream_borrow:False") == (False, 0, 24 * MiB)


@pytest.mark.parametrize("kwargs, says", [
    (dict(colour="blue"), "unknown option 'colour'"),
    (dict(thread_cache="maybe"), "bad value 'maybe' for thread_cache"),
    (dict(thread_cache="maybe"), "True, False, auto"),
    (dict(memory_fraction=1.5), "(0, 1]"),
    (dict(arenas=99), "from 0 to 8"),
    (dict(arena_move_window=-1), "arena_move_window"),
    (dict(chunk_strand_pages="some"), "auto or a whole number from 0 to 1048576"),
    (dict(cache_size="lots"), "2GB, 512MiB"),
    (dict(cache_size="1GB,thread_cache:0"), "must not contain"),
    (dict(expandable_segments=None), "None is only allowed for cache_size"),
])
def test_bad_keywords_name_the_key(kwargs, says):
    with pytest.raises((ValueError, TypeError)) as e:
        _alloc_conf.conf_text(source="test", **kwargs)
    assert says in str(e.value)
    if "unknown" in says:
        for k in _alloc_conf.keys():
            assert k in str(e.value)


def test_pytorch_only_options_are_named():
    with pytest.raises(ValueError, match="'max_split_size_mb' is an option of PyTorch's allocator"):
        _C.parse_alloc_conf("expandable_segments:True,max_split_size_mb:128", "GENESIS_ALLOC_CONF")


def test_a_simulated_allocator_takes_the_text():
    sim = SimulatedAllocator(256 * MiB, conf="expandable_segments:False,memory_fraction:0.5,cache_size:8MiB")
    assert sim._allocator().expandable_segments is False
    s = sim.memory_stats()
    assert s["memory_limit"] == 128 * MiB and s["cache_limit"] == 8 * MiB
    with pytest.raises(ValueError, match="SimulatedAllocator"):
        SimulatedAllocator(MiB, conf="expandable:1")


def test_the_environment_configures_gpu_allocators_and_front_ends_add_to_it():
    p = run("""
        from genesis import _C
        print("ENV", _C.cuda_alloc_conf())
        _C.configure_cuda_allocators("memory_fraction:0.75", "test")
        print("NOW", _C.cuda_alloc_conf())
    """, GENESIS_ALLOC_CONF="expandable_segments:True, thread_cache_small_count:16")
    assert p.returncode == 0, p.stderr
    assert "ENV expandable_segments:True,thread_cache_small_count:16" in p.stdout
    assert "NOW expandable_segments:True,memory_fraction:0.75,thread_cache_small_count:16" in p.stdout


def test_idle_release_takes_seconds_or_text_and_gives_the_cache_back():
    assert _alloc_conf.conf_text(idle_release=30) == "idle_release:30000ms"
    assert _alloc_conf.conf_text(idle_release=0.25) == "idle_release:250ms"
    assert _alloc_conf.conf_text(idle_release=None) == "idle_release:off"
    assert _alloc_conf.conf_text(idle_release="5min") == "idle_release:5min"
    assert _alloc_conf.parse("idle_release:30000ms")["idle_release"] == 30.0
    assert _alloc_conf.parse("")["idle_release"] is None
    assert _C.format_alloc_conf("idle_release:30000ms") == "idle_release:30s"
    for bad in (-1, "30", "1.5s"):
        with pytest.raises(ValueError, match="idle_release"):
            _alloc_conf.conf_text(idle_release=bad)
    import time
    sim = SimulatedAllocator(256 * MiB, conf="idle_release:20ms")
    p = sim.allocate(16 * MiB)
    sim.free(p)
    assert sim.memory_stats()["reserved_bytes"] > 0
    deadline = time.monotonic() + 10
    while sim.memory_stats()["reserved_bytes"] > 0 and time.monotonic() < deadline:
        time.sleep(0.005)
    assert sim.memory_stats()["reserved_bytes"] == 0


def test_front_end_defaults_fill_only_what_the_user_left_alone():
    # Nothing chosen: the adaptors' preference applies.
    p = run("""
        from genesis import _C
        assert _C.FRAMEWORK_ALLOC_DEFAULTS == "expandable_segments:True"
        print("FIRST", _C.prefer_cuda_allocator_defaults(_C.FRAMEWORK_ALLOC_DEFAULTS, "test"))
        print("NOW", _C.cuda_alloc_conf())
        _C.configure_cuda_allocators("expandable_segments:False", "test")   # a later choice still wins
        print("LATER", _C.cuda_alloc_conf())
    """)
    assert p.returncode == 0, p.stderr
    assert "FIRST True" in p.stdout and "NOW expandable_segments:True\n" in p.stdout
    assert "LATER expandable_segments:False" in p.stdout
    # Chosen in the environment, even as the library's own default: kept;
    # thread_cache was left alone, so the preference sets it.
    for env in ("expandable_segments:False,arenas:2", "expandable_segments:auto"):
        p = run("""
            from genesis import _C
            _C.prefer_cuda_allocator_defaults("expandable_segments:True,thread_cache:False", "test")
            print("NOW[" + _C.cuda_alloc_conf() + "]")
        """, GENESIS_ALLOC_CONF=env)
        assert p.returncode == 0, p.stderr
        got = p.stdout.split("NOW[")[1].split("]")[0]
        assert got == _C.format_alloc_conf(env + ",thread_cache:False"), (env, got)
    # Chosen by a front end before the preference: kept; malformed text is an error.
    p = run("""
        from genesis import _C
        _C.configure_cuda_allocators("expandable_segments:False", "test")
        _C.prefer_cuda_allocator_defaults("expandable_segments:True", "test")
        print("NOW", _C.cuda_alloc_conf())
        try:
            _C.prefer_cuda_allocator_defaults("expandable_segments:maybe", "the adaptor")
        except ValueError as e:
            print("ERR", e)
    """)
    assert p.returncode == 0, p.stderr
    assert "NOW expandable_segments:False" in p.stdout
    assert "ERR" in p.stdout and "the adaptor" in p.stdout and "maybe" in p.stdout


def test_the_adaptors_prefer_nothing_where_pages_cannot_be_mapped():
    # GENESIS_NO_VMM=1 (or no GPU, or a driver without virtual memory): asking
    # for expandable segments would be an error there, so nothing is preferred.
    p = run("""
        from genesis import _C
        print("PREF", _C.prefer_framework_allocator_defaults(0, "test"))
        print("NOW[" + _C.cuda_alloc_conf() + "]")
    """, GENESIS_NO_VMM="1")
    assert p.returncode == 0, p.stderr
    assert "PREF False" in p.stdout and "NOW[]" in p.stdout, p.stdout


def test_a_malformed_environment_is_a_clear_error_at_first_use():
    p = run("""
        import genesis
        from genesis import _C
        try:
            _C.cuda_alloc_conf()
        except ValueError as e:
            print("ERR", e)
        try:
            _C.cuda_alloc_conf()   # still wrong: reported again, not forgotten
        except ValueError as e:
            print("ERR2", e)
    """, GENESIS_ALLOC_CONF="expandable_segments:yes")
    assert p.returncode == 0, p.stderr
    assert "ERR GENESIS_ALLOC_CONF: bad value 'yes' for expandable_segments" in p.stdout
    assert "ERR2 GENESIS_ALLOC_CONF" in p.stdout


def test_classic_segments_give_back_at_the_mark_when_asked():
    """A buffer that grows by a third each step, the old one freed once the
    new one is made: kept, the old buffers add up to several times what is
    live; given back at the mark, reserved memory stays at the live peak."""
    peaks = {}
    for release in (False, True):
        a = SimulatedAllocator("8GB", expandable=False, conf=f"classic_release_at_mark:{release}")
        size = 16 * MiB
        cur = a.allocate(size)
        live_peak = size
        for _ in range(8):
            nxt = -(-(size + size // 3) // (2 * MiB)) * (2 * MiB)
            grown = a.allocate(nxt)
            live_peak = max(live_peak, size + nxt)
            a.free(cur)
            cur, size = grown, nxt
        a.free(cur)
        peaks[release] = a.memory_stats()["reserved_bytes.all.peak"] / live_peak
    assert peaks[True] == 1.0 and peaks[False] > 1.5, peaks
