"""genesis.cuda.memory: memory history and snapshots in PyTorch's format.

    genesis.cuda.memory._record_memory_history(max_entries=100000)
    ...                                             # run the program
    genesis.cuda.memory._dump_snapshot("snapshot.pickle")
    # python -m torch.cuda._memory_viz trace_plot snapshot.pickle -o trace.html
    # or drop the file on pytorch.org/memory_viz

The same functions as torch.cuda.memory's, for Genesis's allocators: the
process-wide GPU allocators, which a PyTorch program uses after
genesis.torch.use_genesis_allocator() (which makes torch.cuda.memory's own
functions these), or any allocator given as ``device``: a
genesis.testing.SimulatedAllocator, so that all of it runs without a GPU.
The format and where each field comes from: Note [PyTorch snapshots] in
genesis/_pytorch_snapshot.py.
"""

import pickle
import sys
import threading

from .. import _C
from .._allocator_view import AllocatorView
from .._errors import require_cuda
from .. import _pytorch_snapshot
from ._runtime import device_index

__all__ = ["_record_memory_history", "_snapshot", "_dump_snapshot", "memory_stats", "memory_snapshot"]

from ._memory import memory_snapshot, memory_stats  # noqa: E402  (torch.cuda.memory has them too)

_ACTIONS = ("alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "segment_map",
            "segment_unmap", "oom", "snapshot")
# Sites as deep as this while history with context is recorded (PyTorch
# records whole stacks); the previous depth comes back when it stops.
_RECORDING_SITE_DEPTH = 16

_lock = threading.Lock()
_state = {"capture_before": None, "depth_before": None}
# Allocator key -> (max_entries, skip_actions) of the last call that started
# recording on it. Stopping keeps them: a snapshot taken after the recording
# stopped shows what was recorded, as it was asked for.
_recording = {}


def _targets(device, what):
    """The _C allocators ``device`` names: None = every GPU's."""
    if isinstance(device, AllocatorView):
        return [device._allocator()]
    if device is None:
        require_cuda(what)
        return [_C.cuda_allocator(i) for i in range(_C.cuda_device_count())]
    return [_C.cuda_allocator(device_index(device, what))]


def _record_memory_history(enabled="all", context="all", stacks="all", max_entries=sys.maxsize, device=None,
                           clear_history=False, compile_context=False, global_record_annotations=False,
                           skip_actions=None):
    """Starts or stops recording, as torch.cuda.memory._record_memory_history.

    enabled: "all" (history of every alloc/free; True means the same),
    "state" (no history: only where live blocks came from) or None/False
    (stop). context: None (no sites) or "state"/"alloc"/"all" (Python sites
    of allocations: genesis.set_site_depth frames, at least 16 while this
    records). stacks: "python" or "all" (Genesis records Python frames and
    named C++ contexts). max_entries: newest trace entries per device kept in
    a snapshot (the rings keep event_capacity per thread, GENESIS_ALLOC_CONF).
    clear_history: forget what was recorded. skip_actions: actions left out
    of snapshots (a list of names, or one name). device: None (every GPU), a CUDA device, or an allocator
    such as genesis.testing.SimulatedAllocator. compile_context and
    global_record_annotations are accepted and have no effect."""
    what = "genesis.cuda.memory._record_memory_history()"
    if isinstance(enabled, bool) or enabled is None:
        enabled = "all" if enabled else None
    if enabled not in ("all", "state", None):
        raise ValueError(f"{what}: enabled must be 'all', 'state' or None, got {enabled!r}")
    if context not in ("all", "alloc", "state", None):
        raise ValueError(f"{what}: context must be 'all', 'alloc', 'state' or None, got {context!r}")
    if stacks not in ("python", "all"):
        raise ValueError(f"{what}: stacks must be 'python' or 'all', got {stacks!r}")
    if isinstance(max_entries, bool) or not isinstance(max_entries, int) or max_entries < 1:
        raise ValueError(f"{what}: max_entries must be a positive int, got {max_entries!r}")
    # One action name is a list of one, not of its letters.
    skip = (skip_actions,) if isinstance(skip_actions, str) else tuple(skip_actions or ())
    for a in skip:
        if a not in _ACTIONS:
            raise ValueError(f"{what}: unknown action {a!r} in skip_actions; valid: {', '.join(_ACTIONS)}")
    targets = _targets(device, what)
    with _lock:
        for a in targets:
            if clear_history:
                a.clear_events()
            a.set_event_recording(enabled == "all")
        sites = enabled is not None and context is not None
        if sites and _state["capture_before"] is None:
            _state["capture_before"] = _C.capture_locations()
            _state["depth_before"] = _C.site_depth()
            _C.set_capture_locations(True)
            _C.set_site_depth(max(_C.site_depth(), _RECORDING_SITE_DEPTH))
        elif not sites and _state["capture_before"] is not None:
            _C.set_capture_locations(_state["capture_before"])
            _C.set_site_depth(_state["depth_before"])
            _state["capture_before"] = _state["depth_before"] = None
        if enabled is not None:
            for a in targets:
                _recording[a.key] = (None if max_entries == sys.maxsize else max_entries, skip)


def _snapshot(device=None, augment_with_fx_traces=False):
    """The snapshot dict of torch.cuda.memory._snapshot() for Genesis's
    allocators (device: None = every GPU; or a CUDA device or an allocator
    such as genesis.testing.SimulatedAllocator)."""
    if augment_with_fx_traces:
        raise ValueError("genesis.cuda.memory._snapshot(): augment_with_fx_traces is not supported")
    return _snapshot_of(device, "genesis.cuda.memory._snapshot()")


def _snapshot_of(device, what):
    targets = _targets(device, what)
    with _lock:
        recording = dict(_recording)
    return _pytorch_snapshot.build(targets, settings=_C.cuda_alloc_conf(), recording=recording)


def _dump_snapshot(filename="dump_snapshot.pickle", device=None):
    """Pickles _snapshot() to ``filename`` (protocol 4: the memory_viz page
    reads protocols 2 to 4)."""
    s = _snapshot_of(device, "genesis.cuda.memory._dump_snapshot()")
    with open(filename, "wb") as f:
        pickle.dump(s, f, protocol=4)
