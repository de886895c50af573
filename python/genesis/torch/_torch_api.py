"""torch.cuda's memory functions answered by Genesis.

Note [torch.cuda's memory functions behind Genesis]: PyTorch asks a
pluggable allocator for none of its statistics, snapshots or history. Once
Genesis is PyTorch's allocator, torch.cuda.memory_stats(),
memory_allocated(), max_memory_allocated(), memory_reserved(),
reset_peak_memory_stats(), memory_summary(), memory_snapshot() and
torch.cuda.memory._record_memory_history() / _snapshot() /
_dump_snapshot() would all raise "CUDAPluggableAllocator does not yet
support ...", and so would every training loop, trainer callback and
dashboard that logs memory with them: switching allocators would break the
program. Those functions are thin Python over a handful of torch._C entry
points, which they look up at each call (``torch._C._cuda_memoryStats(device)``
and so on). use_genesis_allocator() replaces these entry points in torch._C
with functions that answer from Genesis's allocators, in the shapes
PyTorch's own return:

    _cuda_memoryStats(device)                 nested statistics: every
                                              "<stat>.<pool>.<field>" key
                                              that Genesis's memory_stats()
                                              carries with PyTorch's name
                                              (Note [PyTorch's statistic
                                              names]), and its counters, with
                                              the CUDA graphs' private pools
                                              added in as PyTorch adds its own
    _cuda_resetPeakMemoryStats(device)        peaks become current values
    _cuda_resetAccumulatedMemoryStats(device) totals and counters restart,
                                              peaks kept
    _cuda_memorySnapshot(mempool_id)          PyTorch's snapshot dict
                                              (genesis.cuda.memory._snapshot()
                                              and the graph pools' segments;
                                              a third element False in
                                              mempool_id leaves the traces out)
    _cuda_record_memory_history(...)          genesis.cuda.memory.
    _cuda_record_memory_history_legacy(...)   _record_memory_history()
    _cuda_isHistoryEnabled()                  whether that is recording
    _cuda_checkPoolLiveAllocations(d, id, s)  whether a CUDA graph's private
                                              pool holds exactly the blocks s
                                              (torch.compile's graph trees ask)
    _cuda_getCheckpointState(d, id)           the pool's live blocks (address,
                                              size), which the graph trees
                                              take after each recording
    _cuda_setCheckpointPoolState(...)         the pool made to hold exactly a
                                              checkpoint's blocks again (Note
                                              [Restoring a graph pool])
    _cuda_cudaCachingAllocator_raw_delete(p)  frees a graph pool's block in
    _free_And_Remove_DeleterFn(storage)       Genesis directly; other
                                              pointers and storages go to
                                              PyTorch's own functions
    _cuda_beginAllocateCurrentStreamToPool    PyTorch's, after the blocks of
                                              storages that died go back
    _has_Standard_Deleter(storage)            true for the graph outputs
                                              Genesis adopted, whose memory
                                              it frees when they die

Everything above torch._C (torch.cuda.memory_summary's table,
_dump_snapshot's pickle, max_memory_allocated's key lookup) is PyTorch's own
code, unchanged, so it behaves as users know it. The replaced entry points
serve only PyTorch's device allocator, which Genesis now is; host (pinned)
memory history is still PyTorch's and goes to the original function. The
originals are kept (``original(torch._C, name)``).

Note [Restoring a graph pool]: torch.compile's CUDA graph trees record
graphs into one private pool and, to record a second path (new shapes after
the graphs of a first), put the pool back in the state it had after the
recording the new one follows: the blocks that recording's outputs held are
allocated again at their addresses, because the graphs replayed since wrote
live tensors there, and everything else is free. PyTorch's allocator
returns those blocks as data pointers whose deleters it swaps into the
storages of the live outputs (replay outputs, which have none), so that the
block is freed when the tensor dies. Here:
  - the checkpoint lists the pool's live blocks (address, size, requested);
  - the restore frees the blocks of the stale storages it is given, then
    re-creates every missing block at its address
    (CachingAllocator::allocate_at), all or nothing; a block allocated now
    that the checkpoint lacks is an error, as PyTorch's own check makes it;
  - a storage cannot be given a deleter from Python, so the live outputs
    are adopted instead: Genesis keeps a weak reference to each, and a
    block whose storages have all died goes back to its pool at the next
    call that looks at the pool (a checkpoint, a restore, a pool check, the
    start of the next recording, memory_stats()). PyTorch frees such a
    block the moment its tensor dies; here the next recording may find it
    still held if the tensor died after that recording began, which costs
    memory, never correctness;
  - the trees free blocks of dead outputs with raw_delete, and the storages
    of a path they abandon with _free_And_Remove_DeleterFn; PyTorch's
    pluggable allocator knows neither a re-created block nor an adopted
    storage, so those two entry points free graph-pool blocks in Genesis
    directly and pass everything else on to PyTorch. After a restore the
    trees assert that every live output has the allocator's deleter
    (_has_Standard_Deleter): an adopted one is answered yes, since its
    memory is freed when it dies, which is what that check stands for.
"""

import sys
import threading

# PyTorch's statistics, as torch/csrc/cuda/Module.cpp nests them.
_ARRAYS = ("allocation", "segment", "active", "inactive_split", "allocated_bytes", "reserved_bytes",
           "active_bytes", "inactive_split_bytes", "requested_bytes")
_POOLS = ("all", "small_pool", "large_pool")
_FIELDS = ("current", "peak", "allocated", "freed")
_COUNTERS = ("num_alloc_retries", "num_ooms", "max_split_size", "num_sync_all_streams", "num_device_alloc",
             "num_device_free")
_OVERSIZE = ("oversize_allocations", "oversize_segments")
_SUMMED_COUNTERS = tuple(c for c in _COUNTERS if c != "max_split_size")  # what a graph pool adds to

# Actions PyTorch's history knows and Genesis never records: skipping them is
# a no-op, not an error.
_PYTORCH_ONLY_ACTIONS = ("snapshot", "annotate", "user_defined")

_ROUTED = ("_cuda_memoryStats", "_cuda_resetPeakMemoryStats", "_cuda_resetAccumulatedMemoryStats",
           "_cuda_memorySnapshot", "_cuda_record_memory_history", "_cuda_record_memory_history_legacy",
           "_cuda_isHistoryEnabled", "_cuda_checkPoolLiveAllocations", "_cuda_getCheckpointState",
           "_cuda_setCheckpointPoolState", "_cuda_cudaCachingAllocator_raw_delete", "_free_And_Remove_DeleterFn",
           "_cuda_beginAllocateCurrentStreamToPool", "_has_Standard_Deleter")


class PoolCheckpoint:
    """What torch._C._cuda_getCheckpointState returns behind Genesis: the
    live blocks of a CUDA graph's private pool at that moment, as
    (address, size, requested) tuples, which _cuda_setCheckpointPoolState
    restores (Note [Restoring a graph pool])."""

    def __init__(self, device, pool, blocks):
        self.device, self.pool = device, tuple(pool)
        self.blocks = tuple(tuple(int(x) for x in b) for b in (blocks or ()))

    @property
    def live(self):
        """The addresses of the blocks."""
        return tuple(b[0] for b in self.blocks)

    def __repr__(self):
        return f"PoolCheckpoint(device={self.device}, pool={self.pool}, live_blocks={len(self.blocks)})"


def nested_stats(flat):
    """PyTorch's nested statistics (what torch._C._cuda_memoryStats returns)
    from Genesis's memory_stats() dict, whose PyTorch keys are flat
    ("allocated_bytes.all.current"). Keys Genesis lacks are reported as 0."""
    out = {}
    for a in _ARRAYS:
        out[a] = {p: {f: int(flat.get(f"{a}.{p}.{f}", 0)) for f in _FIELDS} for p in _POOLS}
    for c in _COUNTERS:
        out[c] = int(flat.get(c, 0))
    for o in _OVERSIZE:
        out[o] = {f: int(flat.get(f"{o}.{f}", 0)) for f in _FIELDS}
    return out


class GenesisSource:
    """Where the routed functions get their answers: genesis.cuda's GPU
    allocators (the ones behind PyTorch). Tests pass another source whose
    methods take the same arguments."""

    def stats(self, device):
        """The device's allocator, plus the private pools of its CUDA graphs
        (Note [Private pools behind PyTorch]), whose memory PyTorch's own
        totals include too. A pool's peaks add to the allocator's: an upper
        bound of the peak of the sum."""
        from .. import _C, cuda
        s = dict(cuda.memory_stats(device))
        index = cuda.current_device() if device is None else device
        for pool in _C._torch_private_pools():
            if pool["device"] != index:
                continue
            for k, v in pool["stats"].items():
                if isinstance(v, int) and k in s and (k.count(".") == 2 or k in _SUMMED_COUNTERS):
                    s[k] += v
        return s

    def reset_peaks(self, device):
        from .. import cuda
        cuda.reset_peak_memory_stats(device)

    def reset_accumulated(self, device):
        from .. import cuda
        cuda.reset_accumulated_memory_stats(device)

    def snapshot(self):
        """genesis.cuda.memory._snapshot(), with the segments of the CUDA
        graphs' private pools added as PyTorch lists its own."""
        from .. import _C, _pytorch_snapshot
        from ..cuda import memory
        return _pytorch_snapshot.add_pools(memory._snapshot(), _C._torch_private_pools(segments=True))

    def pool_blocks(self, device, pool):
        """The live blocks of a CUDA graph's private pool as (address, size,
        requested) tuples, None if there is no such pool."""
        from .. import _C
        return _C._torch_private_pool_blocks(device, int(pool[0]), int(pool[1]))

    def pool_restore(self, device, pool, blocks):
        """Makes the pool hold exactly `blocks` (raises if it cannot)."""
        from .. import _C
        return _C._torch_private_pool_restore(device, int(pool[0]), int(pool[1]), [tuple(b) for b in blocks])

    def private_free(self, ptr):
        """Frees a graph pool's block; False if `ptr` is not one."""
        from .. import _C
        return _C._torch_private_free(int(ptr))

    def storage(self, cdata):
        """(data pointer, weak reference with .expired()) of the storage whose
        StorageImpl is at `cdata` (a weak reference PyTorch holds), None if
        it died."""
        import torch
        from torch.multiprocessing.reductions import StorageWeakRef
        s = torch.UntypedStorage._new_with_weak_ptr(cdata)
        if s is None:
            return None
        return s.data_ptr(), StorageWeakRef(s)

    def has_deleter(self, cdata):
        """Whether the storage at `cdata` frees its memory itself (through
        the allocator's deleter)."""
        import torch
        has = original(torch._C, "_has_Standard_Deleter") or torch._C._has_Standard_Deleter
        return bool(has(cdata))

    def record_history(self, **kwargs):
        from ..cuda import memory
        memory._record_memory_history(**kwargs)


def _device_index(device):
    # torch.cuda's functions pass the current device already; None comes
    # only from a direct call, where PyTorch's current device is meant.
    torch = sys.modules.get("torch")
    if device is None and torch is not None and torch.cuda.is_initialized():
        return torch.cuda.current_device()
    return device


def make_functions(source, originals):
    """The replacement entry points, answering from ``source``; ``originals``
    are the functions they replace (host history goes to one of them)."""
    history = {"enabled": False}

    def memory_stats(device=None):
        return nested_stats(source.stats(_device_index(device)))

    def reset_peak(device=None):
        source.reset_peaks(_device_index(device))

    def reset_accumulated(device=None):
        source.reset_accumulated(_device_index(device))

    def snapshot(mempool_id=None):
        s = source.snapshot()
        if mempool_id is not None and len(mempool_id) > 2 and not mempool_id[2]:
            s["device_traces"] = [[] for _ in s["device_traces"]]
        return s

    def record_history(enabled, context="all", stacks="all", max_entries=sys.maxsize, clear_history=False,
                       compile_context=False, global_record_annotations=False, skip_actions=(),
                       record_pinned_host_memory=False, record_cuda=True):
        if isinstance(skip_actions, str):  # one action name, not a list of its letters
            skip_actions = [skip_actions]
        if record_pinned_host_memory:
            # PyTorch's host allocator is still PyTorch's: its history is too.
            host = originals.get("_cuda_record_memory_history")
            if host is None:
                raise RuntimeError("record_pinned_host_memory: this PyTorch has no host memory history")
            host(enabled, context, stacks, max_entries, clear_history, compile_context, global_record_annotations,
                 list(skip_actions or ()), True, False)
        if not record_cuda:
            return
        skip = [a for a in (skip_actions or ()) if a not in _PYTORCH_ONLY_ACTIONS]
        source.record_history(enabled=enabled, context=context, stacks=stacks, max_entries=max_entries,
                              clear_history=clear_history, compile_context=compile_context,
                              global_record_annotations=global_record_annotations, skip_actions=skip)
        history["enabled"] = enabled is not None

    def record_history_legacy(enabled, record_context=True, trace_alloc_max_entries=1,
                              trace_alloc_record_context=False, record_context_cpp=False, clear_history=False,
                              compile_context=False, global_record_annotations=False, skip_actions=(),
                              record_pinned_host_memory=False, record_cuda=True):
        # The boolean form: a history only when more than one entry is kept;
        # sites when either kind of context is asked for.
        mode = None if not enabled else ("all" if trace_alloc_max_entries > 1 else "state")
        context = "all" if (record_context or trace_alloc_record_context) else None
        record_history(mode, context, "all" if record_context_cpp else "python", max(1, trace_alloc_max_entries),
                       clear_history, compile_context, global_record_annotations, skip_actions,
                       record_pinned_host_memory, record_cuda)

    def history_enabled():
        return history["enabled"]

    # Note [Restoring a graph pool]: data pointer -> [(StorageImpl address,
    # weak reference)] of the live graph outputs that own a restored block.
    adopted = {}
    adopted_lock = threading.Lock()

    def reap():
        # Blocks whose adopting storages all died go back to their pools.
        with adopted_lock:
            dead = []
            for ptr, refs in adopted.items():
                refs[:] = [r for r in refs if not r[1].expired()]
                if not refs:
                    dead.append(ptr)
            for ptr in dead:
                del adopted[ptr]
        for ptr in dead:
            source.private_free(ptr)

    def disown(ptr=None, cdata=None):
        # Drops an adoption by block or by storage; returns the block's
        # pointer when no storage owns it any more, None when none matched.
        with adopted_lock:
            if ptr is None:
                ptr = next((p for p, refs in adopted.items() if any(c == cdata for c, _ in refs)), None)
                if ptr is None:
                    return None
                refs = [r for r in adopted[ptr] if r[0] != cdata]
            elif ptr in adopted:
                refs = []
            else:
                return None
            if refs:
                adopted[ptr] = refs
                return None
            del adopted[ptr]
            return ptr

    def stats_and_reap(device=None):
        reap()
        return memory_stats(device)

    def check_pool_live(device, mempool_id, expected):
        # torch.compile's CUDA graph trees check that a graph pool holds
        # exactly the storages they expect to be alive.
        reap()
        blocks = source.pool_blocks(device, tuple(mempool_id))
        expected = set(expected)
        return len(expected) == 0 if blocks is None else {b[0] for b in blocks} == expected

    def checkpoint_state(device, mempool_id):
        # Taken at the end of every recording of torch.compile's graph trees.
        reap()
        return PoolCheckpoint(device, mempool_id, source.pool_blocks(device, tuple(mempool_id)))

    def restore_checkpoint(device, state, stale_storages, storages_to_add_deleters=()):
        if not isinstance(state, PoolCheckpoint):
            raise TypeError(f"_cuda_setCheckpointPoolState: expected the checkpoint _cuda_getCheckpointState gave "
                            f"behind Genesis, got {type(state).__name__}")
        if device is not None and int(device) != int(state.device):
            raise ValueError(f"_cuda_setCheckpointPoolState: the checkpoint is of cuda:{state.device}, not "
                             f"cuda:{device}")
        reap()
        keep = {b[0] for b in state.blocks}
        now = {b[0] for b in (source.pool_blocks(state.device, state.pool) or ())}
        # Stale storages lose their memory (and their deleters) first.
        for cdata in dict.fromkeys(int(c) for c in stale_storages):
            got = source.storage(cdata)
            if got is None or got[0] not in now:
                continue
            ptr = disown(cdata=cdata)
            if ptr is not None:
                source.private_free(ptr)
            elif source.has_deleter(cdata):
                free_and_remove(cdata)
        source.pool_restore(state.device, state.pool, state.blocks)
        for cdata in dict.fromkeys(int(c) for c in storages_to_add_deleters):
            got = source.storage(cdata)
            if got is None or got[0] not in keep or source.has_deleter(cdata):
                continue  # dead, not the pool's, or its own deleter frees the block
            with adopted_lock:
                refs = adopted.setdefault(got[0], [])
                if all(c != cdata for c, _ in refs):
                    refs.append((cdata, got[1]))

    def raw_delete(ptr):
        disown(ptr=int(ptr))
        if not source.private_free(int(ptr)):
            originals["_cuda_cudaCachingAllocator_raw_delete"](ptr)

    def free_and_remove(cdata):
        ptr = disown(cdata=int(cdata))
        if ptr is not None:
            source.private_free(ptr)
            return
        orig = originals.get("_free_And_Remove_DeleterFn")
        if orig is None:
            raise RuntimeError("_free_And_Remove_DeleterFn: this PyTorch has none to call")
        orig(cdata)

    def has_standard_deleter(cdata):
        with adopted_lock:
            if any(c == int(cdata) for refs in adopted.values() for c, _ in refs):
                return True
        orig = originals.get("_has_Standard_Deleter")
        return bool(orig(cdata)) if orig is not None else False

    def begin_allocate_to_pool(device, mempool_id):
        # A recording starts: blocks of outputs that died since are free for it.
        reap()
        return originals["_cuda_beginAllocateCurrentStreamToPool"](device, mempool_id)

    return {
        "_cuda_memoryStats": stats_and_reap,
        "_cuda_resetPeakMemoryStats": reset_peak,
        "_cuda_resetAccumulatedMemoryStats": reset_accumulated,
        "_cuda_memorySnapshot": snapshot,
        "_cuda_record_memory_history": record_history,
        "_cuda_record_memory_history_legacy": record_history_legacy,
        "_cuda_isHistoryEnabled": history_enabled,
        "_cuda_checkPoolLiveAllocations": check_pool_live,
        "_cuda_getCheckpointState": checkpoint_state,
        "_cuda_setCheckpointPoolState": restore_checkpoint,
        "_cuda_cudaCachingAllocator_raw_delete": raw_delete,
        "_free_And_Remove_DeleterFn": free_and_remove,
        "_cuda_beginAllocateCurrentStreamToPool": begin_allocate_to_pool,
        "_has_Standard_Deleter": has_standard_deleter,
    }


def install(torch_c, source=None):
    """Replaces the entry points of ``torch_c`` (torch._C) that torch.cuda's
    memory functions call, answering from ``source`` (default: genesis.cuda's
    GPU allocators). The originals are kept on ``torch_c``; installing again
    replaces the replacements and keeps the first originals."""
    originals = getattr(torch_c, "_genesis_replaced", None)
    if originals is None:
        originals = {name: getattr(torch_c, name, None) for name in _ROUTED}
        setattr(torch_c, "_genesis_replaced", originals)
    for name, fn in make_functions(source or GenesisSource(), originals).items():
        setattr(torch_c, name, fn)


def original(torch_c, name):
    """The function of ``torch_c`` that install() replaced (None if it had none
    or install() did not run)."""
    return (getattr(torch_c, "_genesis_replaced", None) or {}).get(name)
