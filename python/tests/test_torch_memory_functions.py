"""torch.cuda's memory functions answered by Genesis (genesis/torch/_torch_api.py):
the entry points that use_genesis_allocator() puts into torch._C, driven here
on a stand-in for torch._C and a simulated GPU, so that all of it runs without
PyTorch or a GPU. The same functions under PyTorch on a GPU:
test_torch_allocator.py."""

import types

import pytest

from genesis.cuda import memory as gmem
from genesis.testing import SimulatedAllocator
from genesis.torch import _torch_api

MiB = 1 << 20

# torch.cuda.memory_stats()'s keys, written down from PyTorch apart from the code under test.
from test_memory_stats_torch_keys import PYTORCH_KEYS  # noqa: E402


def flatten(nested, prefix=""):
    """What torch.cuda.memory_stats() does with the nested dict."""
    out = {}
    for k, v in nested.items():
        key = f"{prefix}.{k}" if prefix else k
        if isinstance(v, dict):
            out.update(flatten(v, key))
        else:
            out[key] = v
    return out


class SimSource:
    """Answers from a simulated GPU, as GenesisSource does from the real ones."""

    def __init__(self, sim):
        self.sim = sim
        self.devices = []

    def stats(self, device):
        self.devices.append(device)
        return self.sim.memory_stats()

    def reset_peaks(self, device):
        self.sim.reset_peak_memory_stats()

    def reset_accumulated(self, device):
        self.sim.reset_accumulated_memory_stats()

    def snapshot(self):
        return gmem._snapshot(self.sim)

    def record_history(self, **kwargs):
        gmem._record_memory_history(device=self.sim, **kwargs)

    def pool_blocks(self, device, pool):
        return {(0, 5): [(0x1000, 512, 500), (0x2000, 1024, 1000)]}.get(pool)


def refuse(what):
    def f(*args):
        raise RuntimeError(f"CUDAPluggableAllocator does not yet support {what}")
    return f


@pytest.fixture()
def torch_c():
    """A stand-in for torch._C whose entry points raise as PyTorch's do for a
    pluggable allocator; host_calls records calls of the history function."""
    c = types.SimpleNamespace(host_calls=[])
    for name in _torch_api._ROUTED:
        setattr(c, name, refuse(name))

    def host_history(*args):
        c.host_calls.append(args)
    c._cuda_record_memory_history = host_history
    return c


@pytest.fixture()
def sim():
    s = SimulatedAllocator(256 * MiB, expandable=False)
    yield s
    gmem._record_memory_history(None, device=s)


def test_statistics_come_nested_with_every_pytorch_key(torch_c, sim):
    _torch_api.install(torch_c, SimSource(sim))
    a = sim.allocate(3 * MiB)
    b = sim.allocate(1000)
    nested = torch_c._cuda_memoryStats(0)
    flat = flatten(nested)
    assert set(flat) == PYTORCH_KEYS
    g = sim.memory_stats()
    for k in PYTORCH_KEYS:
        assert flat[k] == g[k], k
        assert isinstance(flat[k], int), k
    assert flat["allocated_bytes.all.current"] == 3 * MiB + 1024
    assert flat["allocated_bytes.small_pool.current"] == 1024
    assert flat["requested_bytes.all.current"] == 3 * MiB + 1000
    assert flat["allocation.all.current"] == 2
    sim.free(a)
    sim.free(b)


def test_resets_keep_what_pytorch_keeps(torch_c, sim):
    src = SimSource(sim)
    _torch_api.install(torch_c, src)
    big = sim.allocate(30 * MiB)
    sim.free(big)
    small = sim.allocate(2 * MiB)
    s = flatten(torch_c._cuda_memoryStats(0))
    assert src.devices == [0]
    assert s["allocated_bytes.all.peak"] == 30 * MiB and s["allocation.all.allocated"] == 2

    # Accumulated: totals and counters restart, peaks stay.
    torch_c._cuda_resetAccumulatedMemoryStats(0)
    s = flatten(torch_c._cuda_memoryStats(0))
    assert s["allocated_bytes.all.peak"] == 30 * MiB
    assert s["allocation.all.allocated"] == 0 and s["allocation.all.freed"] == 0
    assert s["allocated_bytes.all.current"] == 2 * MiB
    sim.free(sim.allocate(MiB))
    s = flatten(torch_c._cuda_memoryStats(0))
    assert s["allocation.all.allocated"] == 1 and s["allocated_bytes.all.allocated"] == MiB

    # Peaks: become the current values.
    torch_c._cuda_resetPeakMemoryStats(0)
    s = flatten(torch_c._cuda_memoryStats(0))
    assert s["allocated_bytes.all.peak"] == s["allocated_bytes.all.current"] == 2 * MiB
    assert s["allocation.all.allocated"] == 1  # not an accumulated reset
    sim.free(small)


def test_history_and_snapshots_in_pytorchs_format(torch_c, sim):
    _torch_api.install(torch_c, SimSource(sim))
    assert torch_c._cuda_isHistoryEnabled() is False
    # torch.cuda.memory._record_memory_history("all", max_entries=1000)
    torch_c._cuda_record_memory_history("all", "all", "all", 1000, False, False, False, [], False, True)
    assert torch_c._cuda_isHistoryEnabled() is True
    p = sim.allocate(5 * MiB)
    sim.free(p)
    s = torch_c._cuda_memorySnapshot(None)
    assert s["segments"] and s["segments"][0]["total_size"] >= 5 * MiB
    actions = [e["action"] for e in s["device_traces"][0]]
    assert "alloc" in actions and "free_requested" in actions
    assert actions.index("alloc") < actions.index("free_requested")
    # torch.cuda.memory_snapshot() passes a pool id; a third element False leaves the traces out.
    assert torch_c._cuda_memorySnapshot((0, 0))["device_traces"][0]
    t = torch_c._cuda_memorySnapshot((0, 0, False))
    assert t["segments"] == s["segments"] and all(tr == [] for tr in t["device_traces"])
    # PyTorch's actions that Genesis never records may be skipped; unknown ones are an error.
    torch_c._cuda_record_memory_history("all", "all", "all", 1000, False, False, False, ["annotate"], False, True)
    with pytest.raises(ValueError, match="bogus"):
        torch_c._cuda_record_memory_history("all", "all", "all", 1000, False, False, False, ["bogus"], False, True)
    torch_c._cuda_record_memory_history(None, "all", "all", 1000, False, False, False, [], False, True)
    assert torch_c._cuda_isHistoryEnabled() is False
    assert torch_c.host_calls == []


def test_the_boolean_form_and_host_history(torch_c, sim):
    _torch_api.install(torch_c, SimSource(sim))
    # torch.cuda.memory._record_memory_history(True, trace_alloc_max_entries=100)
    torch_c._cuda_record_memory_history_legacy(True, True, 100, False, False, False, False, False, [], False, True)
    assert torch_c._cuda_isHistoryEnabled() is True
    p = sim.allocate(MiB)
    sim.free(p)
    assert any(e["action"] == "alloc" for e in torch_c._cuda_memorySnapshot(None)["device_traces"][0])
    torch_c._cuda_record_memory_history_legacy(False, True, 1, False, False, False, False, False, [], False, True)
    assert torch_c._cuda_isHistoryEnabled() is False
    # Pinned host memory is PyTorch's allocator's: its history goes to the original function alone.
    torch_c._cuda_record_memory_history("all", "all", "all", 10, False, False, False, [], True, False)
    assert len(torch_c.host_calls) == 1 and torch_c.host_calls[0][-2:] == (True, False)
    assert torch_c._cuda_isHistoryEnabled() is False


def test_the_originals_are_kept_once(torch_c, sim):
    first = torch_c._cuda_memoryStats
    _torch_api.install(torch_c, SimSource(sim))
    _torch_api.install(torch_c, SimSource(sim))
    assert _torch_api.original(torch_c, "_cuda_memoryStats") is first
    assert torch_c._cuda_memoryStats is not first
    with pytest.raises(RuntimeError, match="does not yet support"):
        _torch_api.original(torch_c, "_cuda_memoryStats")(0)
    assert _torch_api.original(types.SimpleNamespace(), "_cuda_memoryStats") is None


def test_a_graph_pool_holds_what_torch_compile_expects(torch_c, sim):
    _torch_api.install(torch_c, SimSource(sim))
    check = torch_c._cuda_checkPoolLiveAllocations
    assert check(0, (0, 5), {0x1000, 0x2000}) is True
    assert check(0, (0, 5), {0x1000}) is False
    assert check(0, (0, 5), {0x1000, 0x2000, 0x3000}) is False
    assert check(0, (0, 6), set()) is True and check(0, (0, 6), {0x1000}) is False
    # The graph trees checkpoint the pool after each recording: its blocks with their sizes.
    state = torch_c._cuda_getCheckpointState(0, (0, 5))
    assert state.live == (0x1000, 0x2000) and state.pool == (0, 5)
    assert state.blocks == ((0x1000, 512, 500), (0x2000, 1024, 1000))
    assert torch_c._cuda_getCheckpointState(0, (0, 6)).blocks == ()
    # A restore takes only Genesis's checkpoints, of the device named (the restore itself:
    # test_torch_backend.py, on a real private pool).
    with pytest.raises(TypeError, match="expected the checkpoint _cuda_getCheckpointState gave"):
        torch_c._cuda_setCheckpointPoolState(0, object(), [], [])
    with pytest.raises(ValueError, match="is of cuda:0, not cuda:1"):
        torch_c._cuda_setCheckpointPoolState(1, state, [], [])


def test_missing_keys_read_as_zero():
    nested = _torch_api.nested_stats({"allocated_bytes.all.current": 7})
    flat = flatten(nested)
    assert set(flat) == PYTORCH_KEYS
    assert flat["allocated_bytes.all.current"] == 7
    assert flat["reserved_bytes.large_pool.peak"] == 0 and flat["num_ooms"] == 0

