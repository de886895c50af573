"""Genesis allocators described in PyTorch's memory snapshot format, the dict
torch.cuda.memory._snapshot() returns and torch.cuda._memory_viz (and the
pytorch.org/memory_viz page) read.

Note [PyTorch snapshots]: what the readers need, and where it comes from.

    {"segments": [segment, ...],          # every device's segments
     "device_traces": [[entry, ...], ...],  # one list per device index
     "allocator_settings": {...}, "external_annotations": []}

segment: device, address, total_size, allocated_size, active_size,
requested_size, stream, segment_type ("small"/"large"), segment_pool_id
((0, 0), or the id of the CUDA graph pool a segment belongs to behind
PyTorch: add_pools), is_expandable, frames ([]), blocks.
The blocks tile the segment exactly (memory_viz's segsum asserts that their
sizes add up to total_size, and the web page computes each block's address
by adding sizes): {address, size, requested_size, state, frames} with state
"active_allocated", "active_pending_free" (freed, waiting for work on
another stream) or "inactive". An expandable segment is a reserved address
range far larger than what is mapped, with unmapped holes where pages were
given back; as PyTorch does, each run of mapped pages is a segment of its
own, so that the segments add up to the reserved memory and not to address
space (a free block across a hole shows as inactive on both sides).

entry: action ("alloc", "free_requested", "free_completed", "segment_alloc",
"segment_free", "segment_map", "segment_unmap", "oom"), addr (for "oom":
device_free instead, the bytes the device still had), size (requested bytes
for alloc/free/oom, segment bytes otherwise), stream, time_us (microseconds
of the Unix epoch), frames. The source is Genesis's event history (Note
[Event history] in genesis/memory/events.h), which records a free when the
program requests it: "free_completed" follows its "free_requested" at the
same time (for a block still used by another stream the memory is in fact
reused later). Map and unmap of an expandable segment's pages are segment
events of Genesis inside that segment's range.

frames: [{filename, line, name}], innermost first, from the allocation
sites Genesis records (Python frames when site capture is on,
genesis.set_site_depth frames deep; a C++ ScopedAllocationContext becomes
one frame named after it). Block frames are the site of the live
allocation; entry frames the site at the call.
"""

import re
import time

from . import _C

_STATES = {"allocated": "active_allocated", "pending": "active_pending_free"}
_FRAME = re.compile(r"^(?P<file>.*):(?P<line>\d+) in (?P<name>.*)$")
_SEGMENT_ACTIONS = {"segment_alloc": "segment_map", "segment_free": "segment_unmap"}


class _Frames:
    """Site text -> frames list, each distinct site parsed once (and the same
    list shared, which pickle stores once)."""

    def __init__(self):
        self._cache = {"": []}

    def __call__(self, site):
        if not site:
            return self._cache[""]
        frames = self._cache.get(site)
        if frames is None:
            frames = []
            for line in site.split("\n"):
                line = line.strip()
                if not line:
                    continue
                m = _FRAME.match(line)
                if m:
                    frames.append({"filename": m["file"], "line": int(m["line"]), "name": m["name"]})
                elif not line.startswith("0x"):  # "0x<address>": no site was set
                    frames.append({"filename": "<c++>", "line": 0, "name": line})
            self._cache[site] = frames
        return frames


def device_index(allocator):
    """The device number of a genesis._C.Allocator ("cuda:N", "sim:N" -> N)."""
    name = allocator.name
    tail = name.rsplit(":", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def _pieces(seg):
    """The [start, stop) ranges of a segment that hold memory (Note [PyTorch
    snapshots]): a classic segment whole, an expandable one as its runs of
    mapped pages."""
    if not seg["expandable"]:
        return [(seg["address"], seg["address"] + seg["total_size"])]
    return [(int(addr), int(addr) + int(n)) for addr, n in seg.get("mapped_ranges", ())]


def _segment(device, seg, piece, site_of, frames):
    start, stop = piece
    blocks = []
    allocated = active = requested = 0
    addr = start
    for b in sorted(seg["blocks"], key=lambda b: b["address"]):
        lo, hi = max(b["address"], start), min(b["address"] + b["size"], stop)
        if hi <= lo:
            continue
        if lo > addr:  # never expected: keep the tiling exact anyway
            blocks.append({"address": addr, "size": lo - addr, "requested_size": 0,
                           "state": "inactive", "frames": frames("")})
        size = hi - lo
        state = _STATES.get(b["state"], "inactive")
        req = min(b["requested_size"], size) if state != "inactive" else 0
        if state == "active_allocated":
            allocated += size
            requested += req
        if state != "inactive":
            active += size
        blocks.append({"address": lo, "size": size, "requested_size": req, "state": state,
                       "frames": frames(site_of.get(b["address"], "")) if state != "inactive" else frames("")})
        addr = hi
    if addr < stop:
        blocks.append({"address": addr, "size": stop - addr, "requested_size": 0, "state": "inactive",
                       "frames": frames("")})
    return {
        "device": device, "address": start, "total_size": stop - start, "allocated_size": allocated,
        "active_size": active, "requested_size": requested, "stream": int(seg["stream"]),
        "segment_type": "small" if seg["pool"] == "small" else "large", "segment_pool_id": (0, 0),
        "is_expandable": bool(seg["expandable"]), "frames": frames(""), "blocks": blocks,
    }


def _trace(device, events, expandable_ranges, frames, to_epoch_us, skip):
    out = []

    def in_expandable(addr):
        return any(lo <= addr < hi for lo, hi in expandable_ranges)

    for e in events:
        action = e.action
        t = to_epoch_us(e.time_ns)
        stream = int(e.stream)
        if action == "alloc":
            entries = [{"action": "alloc", "addr": e.address, "size": e.size, "stream": stream, "time_us": t,
                        "frames": frames(e.site)}]
        elif action == "free_requested":
            f = frames(e.site)
            entries = [{"action": a, "addr": e.address, "size": e.size, "stream": stream, "time_us": t, "frames": f}
                       for a in ("free_requested", "free_completed")]
        elif action in _SEGMENT_ACTIONS:
            name = _SEGMENT_ACTIONS[action] if in_expandable(e.address) else action
            entries = [{"action": name, "addr": e.address, "size": e.size, "stream": stream, "time_us": t,
                        "frames": frames("")}]
        elif action == "oom":
            entries = [{"action": "oom", "device_free": e.address, "size": e.size, "stream": stream, "time_us": t,
                        "frames": frames(e.site)}]
        else:
            continue
        out.extend(x for x in entries if x["action"] not in skip)
    return out


def build(allocators, max_entries=None, skip_actions=(), settings=None, recording=None):
    """The snapshot of ``allocators`` (genesis._C.Allocator objects). Each is
    one device (device_index()); ``max_entries`` keeps the newest entries of
    each device's trace; ``skip_actions`` leaves actions out. ``recording``,
    if given, maps an allocator's ``key`` to its own (max_entries,
    skip_actions), which then replace the two arguments for it."""
    frames = _Frames()
    # Steady-clock nanoseconds (event stamps) -> Unix microseconds.
    offset_us = time.time() * 1e6 - _C.now_ns() / 1e3

    def to_epoch_us(ns):
        return int(ns / 1e3 + offset_us)

    recording = recording or {}
    segments = []
    traces = {}
    expandable = False
    for a in allocators:
        dev = device_index(a)
        raw_segments = a.snapshot()
        site_of = {x["address"]: x["location"] for x in a.large_allocations(0)}
        ranges = []
        for seg in raw_segments:
            segments.extend(_segment(dev, seg, piece, site_of, frames) for piece in _pieces(seg))
            if seg["expandable"]:
                expandable = True
                ranges.append((seg["address"], seg["address"] + seg["size"]))
        keep, skip = recording.get(a.key, (max_entries, skip_actions))
        entries = _trace(dev, a.events(), ranges, frames, to_epoch_us, set(skip))
        if keep is not None and len(entries) > keep:
            entries = entries[len(entries) - keep:]
        traces.setdefault(dev, []).extend(entries)
    n = max(traces, default=-1) + 1
    for seg in segments:
        n = max(n, seg["device"] + 1)
    device_traces = [sorted(traces.get(i, []), key=lambda x: x["time_us"]) for i in range(n)]
    allocator_settings = {
        "PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1, "garbage_collection_threshold": 0.0,
        "expandable_segments": expandable, "roundup_power2_divisions": {},
        "allocator": "genesis", "GENESIS_ALLOC_CONF": settings if settings is not None else "",
    }
    return {"segments": segments, "device_traces": device_traces, "allocator_settings": allocator_settings,
            "external_annotations": []}


def add_pools(snapshot, views):
    """Adds the segments of CUDA graph private pools (Genesis behind PyTorch:
    genesis._C._torch_private_pools(segments=True)) to ``snapshot``, each with its
    pool's id as segment_pool_id, as PyTorch lists its graph pools' memory
    beside the rest."""
    frames = _Frames()
    for v in views:
        site_of = {x["address"]: x["location"] for x in v["allocations"]}
        for seg in v["segments"]:
            for piece in _pieces(seg):
                d = _segment(int(v["device"]), seg, piece, site_of, frames)
                d["segment_pool_id"] = tuple(int(x) for x in v["id"])
                snapshot["segments"].append(d)
        while len(snapshot["device_traces"]) <= int(v["device"]):
            snapshot["device_traces"].append([])
    return snapshot
