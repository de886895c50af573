"""inspect_storage and StorageTracker (what a storage is and which ones are still alive), over python/src/py_storage_inspect.cpp.

    info = genesis.inspect_storage(s)      # attributes, info['size_bytes'], print(info)
    tracker = genesis.StorageTracker()
    tracker.register(s, label='weights'); tracker.total_allocated()
    for leak in tracker.check_leaks(): print(leak.label, leak.size, leak.location, leak.device)

The tracker holds weak references and reads sizes and allocation sites from
the allocator (Note [Tracking without a second ledger] in
include/genesis/storage/inspect.h): a tracked storage that is still alive at
check_leaks() is reported, one that was freed drops out by itself. With
genesis.enable_memory_debugging(True), ``location`` is the Python line that
allocated the storage.
"""

import dataclasses

from . import _C
from ._sizes import format_bytes


@dataclasses.dataclass(frozen=True)
class StorageInfo:
    """What inspect_storage reports. ``str(info)`` is a readable summary;
    ``info[key]`` and ``to_dict()`` give a plain dict (shape, dtype, device,
    size_bytes, is_contiguous, data_ptr as hex, memory_pool for pooled storages)."""

    shape: tuple
    stride: tuple
    dtype: object
    device: object
    nbytes: int
    contiguous: bool
    data_ptr: int
    use_count: int
    pooled: bool
    pinned: bool
    pool: str                 # allocator name ('cuda:0', 'host', 'pinned'); '' if not pooled
    block_size: int           # rounded block the allocator holds
    location: str             # allocation site, if recorded
    pool_allocated: int
    pool_reserved: int
    pool_fragmentation: float
    text: str = dataclasses.field(repr=False, compare=False, default="")

    def size_bytes(self):
        return self.nbytes

    def is_contiguous(self):
        return self.contiguous

    def to_dict(self):
        d = {
            "shape": self.shape,
            "stride": self.stride,
            "dtype": self.dtype,
            "device": self.device,
            "size_bytes": self.nbytes,
            "is_contiguous": self.contiguous,
            "data_ptr": hex(self.data_ptr) if self.data_ptr else None,
            "use_count": self.use_count,
            "pinned": self.pinned,
        }
        if self.pooled:
            d["memory_pool"] = {
                "pool": self.pool, "block_size": self.block_size, "location": self.location,
                "allocated": self.pool_allocated, "reserved": self.pool_reserved,
                "fragmentation": self.pool_fragmentation,
            }
        return d

    def __getitem__(self, key):
        return self.to_dict()[key]

    def keys(self):
        return self.to_dict().keys()

    def __str__(self):
        return self.text


def inspect_storage(storage):
    """A StorageInfo for a genesis.Storage (any subclass) or StorageView."""
    return StorageInfo(**_C.inspect_storage(storage))


@dataclasses.dataclass(frozen=True)
class TrackedStorage:
    """A tracked storage still alive at check_leaks()."""

    label: str
    size: int          # bytes held: the allocator's block size, or nbytes if not pooled
    location: str      # allocation site ('' unless memory debugging was on)
    device: object
    data_ptr: int
    nbytes: int
    block_size: int
    age_seconds: float

    def __str__(self):
        where = f" at {self.location}" if self.location else ""
        return f"{self.label or '<unlabelled>'}: {format_bytes(self.size)} on {self.device}{where}"


class StorageTracker:
    """Watches storages to find the ones still alive. Thread-safe."""

    __slots__ = ("_c",)

    def __init__(self):
        self._c = _C.StorageTracker()

    def register(self, storage, label=""):
        """Starts watching ``storage`` (a storage or a view's base); a weak
        reference, so the tracker never keeps memory alive. Registering the
        same storage twice is a ValueError."""
        if not isinstance(label, str):
            raise TypeError(f"label must be a str, got {type(label).__name__}")
        self._c.register_storage(storage, label)

    def unregister(self, storage):
        """Stops watching; False if it was not registered."""
        return self._c.unregister_storage(storage)

    def total_allocated(self):
        """Bytes held by the watched storages still alive."""
        return self._c.total_allocated()

    def check_leaks(self):
        """The watched storages still alive, largest first."""
        return [TrackedStorage(label=d["label"], size=d["block_size"] or d["nbytes"], location=d["location"],
                               device=d["device"], data_ptr=d["data_ptr"], nbytes=d["nbytes"],
                               block_size=d["block_size"], age_seconds=d["age_seconds"])
                for d in self._c.check_leaks()]

    def clear(self):
        """Forgets every watched storage."""
        self._c.clear()

    def __len__(self):
        return self._c.count()

    def __repr__(self):
        return f"genesis.StorageTracker({self._c.count()} live storages)"
