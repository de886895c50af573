"""libgenesis_torch_allocator.so without PyTorch or a GPU: the functions
PyTorch calls, driven through ctypes (as PyTorch's loader does) against a
simulated GPU. The GPU half (PyTorch itself) is test_torch_allocator.py.

What is checked here: allocations and frees reach the one Genesis of
genesis._C; the stream rules (a block freed while another stream uses it is
not handed out early; a pool free waits for the device); an out-of-memory
error carries Genesis's explanation (thrown for PyTorch's allocator, NULL
plus last error for a MemPool); a free of a pointer Genesis never gave out is
reported, not a crash; version checks of the table; and that the library
finds genesis._C by itself, as the same module Python imports.
"""

import ctypes
import os
import subprocess
import sys
import textwrap

import pytest

import genesis
from genesis import _C
from genesis.testing import SimulatedAllocator
from genesis.torch import _library, _torch_api

MiB = 1 << 20

try:
    PATH = _library.library_path()
except FileNotFoundError as e:  # pragma: no cover - only without the target
    PATH = None
    WHY = str(e)

pytestmark = pytest.mark.skipif(PATH is None, reason="libgenesis_torch_allocator.so is not built "
                                "(CMake target genesis_torch_allocator)")

@pytest.fixture()
def lib():
    return _library.load()


@pytest.fixture()
def sim():
    """A simulated GPU behind every device of the adaptor while the test runs."""
    s = SimulatedAllocator(256 * MiB, index=3, expandable=False)
    _C._torch_backend_redirect(s._allocator())
    yield s
    _C._torch_backend_redirect(None)


def c_fn(lib, name, restype, *argtypes):
    f = getattr(lib.lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


def pool_fns(lib):
    m = c_fn(lib, "genesis_torch_pool_malloc", ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p)
    f = c_fn(lib, "genesis_torch_pool_free", None, ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int,
             ctypes.c_void_p)
    return m, f


def malloc(lib, size, stream=0, device=0):
    """genesis_torch_malloc as PyTorch calls it (a C++ exception becomes RuntimeError)."""
    return _C._torch_call_malloc(lib.address(_library.MALLOC), size, device, stream)


def free(lib, ptr, size, stream=0, device=0):
    f = c_fn(lib, "genesis_torch_free", None, ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p)
    f(ptr, size, device, stream)


def record_stream(lib, ptr, stream):
    _C._torch_call_void(lib.address(_library.HOOKS["record_stream"]), ptr, stream)


def test_the_library_is_found_next_to_genesis_and_exports_what_pytorch_calls(lib):
    assert os.path.dirname(PATH) == os.path.dirname(os.path.abspath(_C.__file__))
    for name in (_library.MALLOC, _library.FREE, _library.POOL_MALLOC, _library.POOL_FREE, *_library.HOOKS.values()):
        assert lib.address(name), name
    # Nothing of Genesis is exported: the library is a shim.
    out = subprocess.run(["nm", "-D", "--defined-only", PATH], capture_output=True, text=True)
    if out.returncode == 0:
        exported = {ln.split()[-1] for ln in out.stdout.splitlines() if " T " in ln}
        assert exported == {_library.MALLOC, _library.FREE, _library.POOL_MALLOC, _library.POOL_FREE,
                            *_library.HOOKS.values(), "genesis_torch_attach", "genesis_torch_last_error"}, exported


def test_allocations_go_to_the_genesis_of_this_process(lib, sim):
    before = sim.memory_stats()
    p = malloc(lib, 3000, stream=0)
    assert p and sim.owns(p)
    assert sim.allocation_size(p) == 3072
    s = sim.memory_stats()
    assert s["allocated_bytes"] == before["allocated_bytes"] + 3072
    assert s["requested_bytes"] == before["requested_bytes"] + 3000
    free(lib, p, 3000)
    assert not sim.owns(p)
    assert sim.memory_stats()["allocated_bytes"] == before["allocated_bytes"]
    assert malloc(lib, 0) == 0  # PyTorch asks for 0 bytes for empty tensors
    assert lib.last_error() == ""


def test_a_block_freed_while_another_stream_uses_it_is_not_handed_out_early(lib, sim):
    s1 = sim.create_stream()
    p = malloc(lib, 4 * MiB, stream=0)
    record_stream(lib, p, s1)      # tensor.record_stream(s1)
    sim.submit_work(s1)            # s1 still reads p
    free(lib, p, 4 * MiB, stream=0)
    q = malloc(lib, 4 * MiB, stream=0)
    assert q != p, "reused while s1 still used it"
    sim.complete_all()
    free(lib, q, 4 * MiB, stream=0)
    # Once s1's work is done the block is reusable on its stream.
    reused = {malloc(lib, 4 * MiB, stream=0) for _ in range(2)}
    assert p in reused
    for r in reused:
        free(lib, r, 4 * MiB)


def test_a_block_goes_to_another_stream_only_once_its_stream_is_idle(lib, sim):
    s1 = sim.create_stream()
    s2 = sim.create_stream()
    n = 12 * MiB                   # a segment of its own
    p = malloc(lib, n, stream=s1)
    sim.submit_work(s1)            # a kernel on s1 still uses p
    free(lib, p, n, stream=s1)
    q = malloc(lib, n, stream=s2)
    assert q != p, "handed to s2 while s1's work may still use it"
    r = malloc(lib, n, stream=s1)
    assert r == p  # its own stream: at once (its work is ordered before)
    free(lib, r, n, stream=s1)
    sim.complete_all()
    # s1 is idle: before the pool grows for s2, s1's free block serves it.
    before = sim.memory_stats()
    t = malloc(lib, n, stream=s2)
    assert t == p
    after = sim.memory_stats()
    assert after["num_stream_borrows"] == before["num_stream_borrows"] + 1
    assert after["reserved_bytes"] == before["reserved_bytes"]
    free(lib, t, n, stream=s2)
    free(lib, q, n, stream=s2)


def test_record_stream_of_a_pointer_genesis_does_not_hold_is_an_error(lib, sim):
    with pytest.raises(RuntimeError, match="Genesis allocator: record_stream: 0x1234 is not"):
        record_stream(lib, 0x1234, 0)


def test_a_pool_free_waits_for_the_device(lib, sim):
    pmalloc, pfree = pool_fns(lib)
    s1 = sim.create_stream()
    p = pmalloc(20 * MiB, 0, s1)
    assert p
    sim.submit_work(s1)
    assert sim.pending_work(s1) == 1
    pfree(p, 20 * MiB, 0, s1)
    assert sim.pending_work(s1) == 0  # as cudaFree would have waited
    assert not sim.owns(p)


def test_out_of_memory_carries_genesis_explanation(lib, sim):
    with pytest.raises(RuntimeError) as info:
        malloc(lib, 1 << 30)
    msg = str(info.value)
    assert msg.startswith("CUDA out of memory. Tried to allocate 1.00 GiB")
    assert "(Genesis allocator)" in msg
    assert "Out of memory (sim:3)" in msg  # Genesis's own explanation follows
    assert genesis.torch.is_genesis_oom(info.value)
    assert "sim:3" in genesis.torch.last_oom_message()
    assert genesis.torch.last_oom_message() == ""  # taken once
    # A MemPool's allocator gets NULL and the explanation on the side.
    pmalloc, _ = pool_fns(lib)
    assert pmalloc(1 << 30, 0, 0) is None
    assert "Out of memory (sim:3)" in lib.last_error()
    assert "Out of memory (sim:3)" in _C._torch_take_last_oom()
    assert sim.memory_stats()["num_ooms"] == 2


def test_a_free_of_a_pointer_genesis_never_gave_out_is_reported_not_fatal(lib, sim, capfd):
    before = _C._torch_bad_frees()
    free(lib, 0xDEAD000, 512)
    assert _C._torch_bad_frees() == before + 1
    assert "0xdead000" in lib.last_error().lower() or "not" in lib.last_error()
    err = capfd.readouterr().err
    assert "genesis: PyTorch freed 0xdead000 on cuda:0, which Genesis cannot free" in err
    # Still usable afterwards.
    p = malloc(lib, 512)
    free(lib, p, 512)


def test_empty_cache_and_memory_fraction_hooks(lib, sim):
    p = malloc(lib, 8 * MiB)
    free(lib, p, 8 * MiB)
    assert sim.memory_stats()["reserved_bytes"] > 0
    c_fn(lib, _library.HOOKS["reset"], None)()
    assert sim.memory_stats()["reserved_bytes"] == 0
    c_fn(lib, _library.HOOKS["memory_fraction"], None, ctypes.c_double, ctypes.c_int)(0.25, 0)
    assert sim.memory_stats()["memory_limit"] == 64 * MiB
    with pytest.raises(RuntimeError, match="out of memory"):
        malloc(lib, 100 * MiB)


def test_python_sites_are_recorded_when_the_gil_holder_allocates(lib, sim):
    genesis.set_memory_debug(True)
    try:
        p = malloc(lib, 64 * 1024)
        (a,) = [x for x in sim.detailed_memory_stats().get_large_allocations(0) if x.address == p]
        assert "test_torch_backend.py" in a.location and "in test_python_sites" in a.location
        free(lib, p, 64 * 1024)
    finally:
        genesis.set_memory_debug(False)


def test_tables_of_another_version_are_refused(lib):
    class Table(ctypes.Structure):
        _fields_ = [("abi_version", ctypes.c_uint32), ("size", ctypes.c_uint32)] + \
                   [(f"f{i}", ctypes.c_void_p) for i in range(6)]

    bogus = Table(abi_version=_C._torch_abi_version + 1, size=ctypes.sizeof(Table))
    assert lib.lib.genesis_torch_attach(ctypes.cast(ctypes.pointer(bogus), ctypes.c_void_p)) == 1
    assert "version" in lib.last_error()
    assert lib.lib.genesis_torch_attach(None) == 1
    # The right table again (what genesis.torch attached): accepted.
    assert lib.lib.genesis_torch_attach(ctypes.c_void_p(_C._torch_backend_address())) == 0


def test_the_library_finds_genesis_by_itself_as_the_module_python_imports(tmp_path):
    # A fresh process loads the library before genesis: its first call loads
    # the genesis/_C next to it; `import genesis` then finds that very module
    # loaded (the counter the library's call moved is the one Python sees).
    script = textwrap.dedent(f"""
        import ctypes
        lib = ctypes.CDLL({PATH!r})
        f = lib.genesis_torch_free
        f.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int, ctypes.c_void_p]
        f(0x1000, 16, 0, None)   # no GPU here: reported, not fatal
        import genesis
        print("BAD_FREES", genesis._C._torch_bad_frees())
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "BAD_FREES 1" in p.stdout, (p.stdout, p.stderr)
    assert "which Genesis cannot free" in p.stderr


def test_library_path_override(monkeypatch, tmp_path):
    monkeypatch.setenv(_library.ENV_PATH, str(tmp_path / "nope.so"))
    with pytest.raises(FileNotFoundError, match="nope.so"):
        _library.library_path()


def test_genesis_torch_needs_torch_only_when_used():
    import genesis.torch as gt

    try:
        import torch  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="needs PyTorch"):
            gt.use_genesis_allocator()
        with pytest.raises(ImportError, match="needs PyTorch"):
            gt.mem_pool()
    else:  # pragma: no cover - machines with torch run test_torch_allocator.py
        pytest.skip("torch is installed here")


# --- private pools (CUDA graph captures, use_mem_pool regions) --------------

def begin_pool(lib, pool, streams, device=0):
    """beginAllocateToPool as PyTorch calls it: `streams` are the ones the region covers."""
    _C._torch_call_begin_pool(lib.address(_library.HOOKS["begin_allocate_to_pool"]), device, pool[0], pool[1],
                              list(streams))


def pool_hook(lib, role, pool, device=0):
    _C._torch_call_pool_hook(lib.address(_library.HOOKS[role]), device, pool[0], pool[1])


def private_pools():
    return {tuple(p["id"]): p for p in _C._torch_private_pools()}


def test_a_capture_is_served_from_a_private_pool_that_lives_until_released(lib, sim):
    cap, other = sim.create_stream(), sim.create_stream()
    x = malloc(lib, 4 * MiB, stream=other)
    assert private_pools() == {}
    begin_pool(lib, (7, 1), [cap])
    t = malloc(lib, 3 * MiB, stream=cap)          # the capture's: from its pool
    o = malloc(lib, 2 * MiB, stream=other)        # another stream's: the shared allocator
    assert sim.owns(x) and sim.owns(o) and not sim.owns(t)
    p = private_pools()[(7, 1)]
    assert p["open"] == 1 and p["live_blocks"] == 1 and p["stats"]["allocated_bytes"] == 3 * MiB
    assert sim.memory_stats()["allocated_bytes"] == 6 * MiB

    # Freed during the capture: later allocations of the capture reuse it (they replay after it).
    free(lib, t, 3 * MiB, stream=cap)
    t2 = malloc(lib, 3 * MiB, stream=cap)
    assert t2 == t
    # Used by another stream during the capture: held until the capture ends.
    record_stream(lib, t2, other)
    free(lib, t2, 3 * MiB, stream=cap)
    t3 = malloc(lib, 3 * MiB, stream=cap)
    assert t3 != t2
    assert private_pools()[(7, 1)]["held_blocks"] == 1
    pool_hook(lib, "end_allocate_to_pool", (7, 1))
    p = private_pools()[(7, 1)]
    assert p["open"] == 0 and p["held_blocks"] == 0 and p["live_blocks"] == 1
    reserved = p["stats"]["reserved_bytes"]
    assert reserved >= 6 * MiB

    # After the region nothing is routed to the pool, and empty_cache leaves the pool alone.
    y = malloc(lib, 3 * MiB, stream=cap)
    assert sim.owns(y)
    c_fn(lib, _library.HOOKS["reset"], None)()
    assert private_pools()[(7, 1)]["stats"]["reserved_bytes"] == reserved

    # Released while a graph output still lives: the pool goes with the last block.
    pool_hook(lib, "release_pool", (7, 1))
    assert private_pools()[(7, 1)]["released"] is True
    free(lib, t3, 3 * MiB, stream=cap)
    assert private_pools() == {}
    for ptr, n, s in ((x, 4, other), (o, 2, other), (y, 3, cap)):
        free(lib, ptr, n * MiB, stream=s)
    assert sim.memory_stats()["allocated_bytes"] == 0
    assert lib.last_error() == ""


def test_a_pool_lives_while_any_graph_or_region_using_it_is_unreleased(lib, sim):
    # A graph captured into the pool holds it; so does each further region opened
    # over it (torch.compile's graph trees), until each is released.
    cap = sim.create_stream()
    pool = (5, 1)
    begin_pool(lib, pool, [cap])
    keep = malloc(lib, MiB, stream=cap)
    pool_hook(lib, "end_allocate_to_pool", pool)     # the graph's capture ends; the graph lives on
    begin_pool(lib, pool, [cap])                     # a region over the same pool
    t = malloc(lib, MiB, stream=cap)
    pool_hook(lib, "end_allocate_to_pool", pool)
    pool_hook(lib, "release_pool", pool)             # the region's release
    free(lib, t, MiB, stream=cap)
    free(lib, keep, MiB, stream=cap)
    p = private_pools()[pool]
    assert p["uses"] == 1 and not p["released"] and p["live_blocks"] == 0
    assert p["stats"]["reserved_bytes"] > 0           # the graph's memory is still there for its replays
    pool_hook(lib, "release_pool", pool)             # the graph goes
    assert pool not in private_pools()


def test_graph_pools_appear_in_the_snapshot_as_pytorch_lists_them(lib, sim):
    from genesis import _pytorch_snapshot
    cap = sim.create_stream()
    begin_pool(lib, (6, 2), [cap])
    out = malloc(lib, 3 * MiB, stream=cap)
    tmp = malloc(lib, MiB, stream=cap)
    free(lib, tmp, MiB, stream=cap)
    pool_hook(lib, "end_allocate_to_pool", (6, 2))
    shared = malloc(lib, 2 * MiB)
    snap = _pytorch_snapshot.build([sim._allocator()])
    _pytorch_snapshot.add_pools(snap, _C._torch_private_pools(segments=True))
    pooled = [s for s in snap["segments"] if s["segment_pool_id"] == (6, 2)]
    assert pooled and all(s["segment_pool_id"] == (0, 0) for s in snap["segments"] if s not in pooled)
    for seg in snap["segments"]:   # the blocks tile each segment, as memory_viz requires
        assert sum(b["size"] for b in seg["blocks"]) == seg["total_size"]
    blocks = {b["address"]: b for s in pooled for b in s["blocks"]}
    assert blocks[out]["state"] == "active_allocated" and blocks[out]["requested_size"] == 3 * MiB
    assert sum(s["allocated_size"] for s in pooled) == blocks[out]["size"]
    assert shared not in blocks and len(snap["device_traces"]) >= 1
    free(lib, out, 3 * MiB, stream=cap)
    free(lib, shared, 2 * MiB)
    pool_hook(lib, "release_pool", (6, 2))
    assert private_pools() == {}


def test_pools_are_kept_apart_and_errors_are_clear(lib, sim):
    a, b = sim.create_stream(), sim.create_stream()
    begin_pool(lib, (1, 1), [a])
    begin_pool(lib, (1, 2), [b])
    pa = malloc(lib, MiB, stream=a)
    pb = malloc(lib, MiB, stream=b)
    pools = private_pools()
    assert pools[(1, 1)]["live_blocks"] == 1 and pools[(1, 2)]["live_blocks"] == 1
    # Out of memory inside a pool is PyTorch's OOM, with Genesis's explanation.
    with pytest.raises(RuntimeError, match="CUDA out of memory"):
        malloc(lib, 1 << 40, stream=a)
    # Ending a region that is not open is harmless; releasing an unknown pool too.
    pool_hook(lib, "end_allocate_to_pool", (9, 9))
    pool_hook(lib, "release_pool", (9, 9))
    for pool, ptr, s in (((1, 1), pa, a), ((1, 2), pb, b)):
        pool_hook(lib, "end_allocate_to_pool", pool)
        free(lib, ptr, MiB, stream=s)
        assert private_pools()[pool]["live_blocks"] == 0   # kept: not released yet
        pool_hook(lib, "release_pool", pool)
        assert pool not in private_pools()
    # A free of a pointer nobody gave out is still reported, not fatal.
    free(lib, 0x1234, 16)
    assert lib.last_error() != ""


# --- restoring a graph pool (torch.compile's CUDA graph trees) --------------

class FakeStorage:
    """A tensor's storage as the graph trees see it: a data pointer, alive or
    not, with or without a deleter (replay outputs have none)."""

    def __init__(self, ptr, deleter=False):
        self.ptr, self.alive, self.deleter = ptr, True, deleter


class FakeRef:
    def __init__(self, storage):
        self.storage = storage

    def expired(self):
        return not self.storage.alive


class PoolSource(_torch_api.GenesisSource):
    """Genesis's own pool functions, with storages (which only PyTorch has) faked."""

    def __init__(self):
        self.storages = {}

    def storage(self, cdata):
        st = self.storages.get(cdata)
        return None if st is None or not st.alive else (st.ptr, FakeRef(st))

    def has_deleter(self, cdata):
        return self.storages[cdata].deleter


@pytest.fixture()
def trees(lib, sim):
    """A stand-in for torch._C with Genesis's entry points installed; the
    originals record their calls."""
    import types
    calls = []
    c = types.SimpleNamespace()
    for name in _torch_api._ROUTED:
        setattr(c, name, lambda *a, name=name: calls.append((name,) + a))
    source = PoolSource()
    _torch_api.install(c, source)
    return c, source, calls


def live_blocks(pool):
    return sorted(b[0] for b in (_C._torch_private_pool_blocks(0, pool[0], pool[1]) or ()))


def test_a_graph_pool_is_restored_to_a_checkpoint_with_its_outputs_adopted(lib, sim, trees):
    c, source, calls = trees
    cap = sim.create_stream()
    pool = (4, 1)
    # Recording A: an output that lives on and one that dies after the checkpoint.
    begin_pool(lib, pool, [cap])
    out_a = malloc(lib, 2 * MiB, stream=cap)
    dies = malloc(lib, MiB, stream=cap)
    tmp = malloc(lib, 5 * MiB, stream=cap)
    free(lib, tmp, 5 * MiB, stream=cap)
    pool_hook(lib, "end_allocate_to_pool", pool)
    after_a = c._cuda_getCheckpointState(0, pool)
    assert sorted(after_a.live) == sorted([out_a, dies])
    # Recording B, a child of A; then every recording output dies (their deleters free them).
    begin_pool(lib, pool, [cap])
    out_b = malloc(lib, 3 * MiB, stream=cap)
    pool_hook(lib, "end_allocate_to_pool", pool)
    for ptr, n in ((out_a, 2), (dies, 1), (out_b, 3)):
        free(lib, ptr, n * MiB, stream=cap)
    assert live_blocks(pool) == []

    # Replays wrote A's outputs again: a replay output without a deleter lives at out_a, and
    # the tree restores the state after A to record a new child of A.
    source.storages[0x77] = FakeStorage(out_a)
    c._cuda_setCheckpointPoolState(0, after_a, [], [0x77])
    assert live_blocks(pool) == sorted([out_a, dies])
    # The trees then check that the live output's memory is owned: it is, by Genesis.
    assert c._has_Standard_Deleter(0x77) is True
    assert c._has_Standard_Deleter(0x78) is False and calls.pop() == ("_has_Standard_Deleter", 0x78)
    sizes = {b[0]: b[1] for b in c._cuda_getCheckpointState(0, pool).blocks}
    assert sizes == {b[0]: b[1] for b in after_a.blocks}
    # Outputs dead since the replay go with raw_delete, in Genesis (PyTorch's pluggable
    # allocator does not know re-created blocks).
    c._cuda_cudaCachingAllocator_raw_delete(dies)
    assert live_blocks(pool) == [out_a] and calls == []
    # The new recording cannot land on the live output's memory.
    c._cuda_beginAllocateCurrentStreamToPool(0, pool)
    begin_pool(lib, pool, [cap])
    news = [malloc(lib, 2 * MiB, stream=cap) for _ in range(3)]
    pool_hook(lib, "end_allocate_to_pool", pool)
    assert out_a not in news and all(abs(n - out_a) >= 2 * MiB for n in news)
    assert calls == [("_cuda_beginAllocateCurrentStreamToPool", 0, pool)]
    # When the adopted output dies, its block goes back at the next look at the pool.
    source.storages[0x77].alive = False
    assert c._cuda_checkPoolLiveAllocations(0, pool, set(news))
    assert live_blocks(pool) == sorted(news)
    for n in news:
        free(lib, n, 2 * MiB, stream=cap)
    for _ in range(3):   # the three recordings' graphs go
        pool_hook(lib, "release_pool", pool)
    assert private_pools() == {}


def test_restoring_a_graph_pool_refuses_what_it_cannot_do_and_changes_nothing(lib, sim, trees):
    c, source, calls = trees
    cap = sim.create_stream()
    pool = (4, 2)
    begin_pool(lib, pool, [cap])
    a = malloc(lib, 2 * MiB, stream=cap)
    b = malloc(lib, 2 * MiB, stream=cap)
    pool_hook(lib, "end_allocate_to_pool", pool)
    state = c._cuda_getCheckpointState(0, pool)
    # A block allocated now that the checkpoint lacks (its tensor still holds it).
    begin_pool(lib, pool, [cap])
    extra = malloc(lib, MiB, stream=cap)
    pool_hook(lib, "end_allocate_to_pool", pool)
    with pytest.raises(RuntimeError, match="allocated now but not in the checkpoint"):
        c._cuda_setCheckpointPoolState(0, state, [], [])
    # Unless it is a stale storage's: then it is freed first, through its own deleter
    # (PyTorch's function, which frees through the pluggable allocator).
    source.storages[0x51] = FakeStorage(extra, deleter=True)
    record = c._genesis_replaced["_free_And_Remove_DeleterFn"]

    def free_through_pytorch(cdata):
        record(cdata)
        free(lib, source.storages[cdata].ptr, MiB, stream=cap)
    c._genesis_replaced["_free_And_Remove_DeleterFn"] = free_through_pytorch
    c._cuda_setCheckpointPoolState(0, state, [0x51], [])
    c._genesis_replaced["_free_And_Remove_DeleterFn"] = record
    assert calls == [("_free_And_Remove_DeleterFn", 0x51)]
    assert live_blocks(pool) == sorted([a, b])
    # A checkpoint whose blocks overlap live memory elsewhere: nothing is made.
    free(lib, b, 2 * MiB, stream=cap)
    bad = _torch_api.PoolCheckpoint(0, pool, [(b, 2 * MiB, 2 * MiB), (a + 512, 2 * MiB, 1)])
    with pytest.raises(RuntimeError, match="allocated now but not in the checkpoint"):
        c._cuda_setCheckpointPoolState(0, bad, [], [])
    bad = _torch_api.PoolCheckpoint(0, pool, [(a, 2 * MiB, 1), (b, 2 * MiB, 2 * MiB), (b + 2 * MiB, 4 * MiB, 1),
                                              (a + 512, 512, 1)])
    with pytest.raises(RuntimeError, match="is not free"):
        c._cuda_setCheckpointPoolState(0, bad, [], [])
    assert live_blocks(pool) == [a]
    # An unknown pool, and a pool still capturing.
    with pytest.raises(RuntimeError, match="holds no such pool"):
        c._cuda_setCheckpointPoolState(0, _torch_api.PoolCheckpoint(0, (9, 9), []), [], [])
    begin_pool(lib, pool, [cap])
    with pytest.raises(RuntimeError, match="still allocating"):
        c._cuda_setCheckpointPoolState(0, state, [], [])
    pool_hook(lib, "end_allocate_to_pool", pool)
    # Pointers and storages that are not the pools' go to PyTorch's own functions.
    c._cuda_cudaCachingAllocator_raw_delete(0x1234)
    c._free_And_Remove_DeleterFn(0x99)
    assert calls[-2:] == [("_cuda_cudaCachingAllocator_raw_delete", 0x1234), ("_free_And_Remove_DeleterFn", 0x99)]
    # An adopted storage abandoned by the trees frees its block in Genesis.
    c._cuda_setCheckpointPoolState(0, state, [], [])
    source.storages[0x60] = FakeStorage(b)
    c._cuda_setCheckpointPoolState(0, state, [], [0x60])
    c._free_And_Remove_DeleterFn(0x60)
    assert live_blocks(pool) == [a] and calls[-1] == ("_free_And_Remove_DeleterFn", 0x99)
    free(lib, a, 2 * MiB, stream=cap)
    for _ in range(3):   # the three regions opened over the pool
        pool_hook(lib, "release_pool", pool)
    assert private_pools() == {}
