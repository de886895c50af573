"""genesis.testing: exercise the allocator from Python without a GPU.

``SimulatedAllocator(capacity)`` is Genesis's caching allocator over a
simulated GPU of ``capacity`` bytes (memory::SimulatedDevice): the same C++
code as on a real GPU, with addresses that have no memory behind them. It has
the whole memory API of a genesis.device (memory_stats(), memory_snapshot(),
empty_cache(), set_memory_fraction(), ...) plus raw allocate()/free(), so
tests can drive statistics, out-of-memory errors, snapshots, profiling and
leak checks deterministically. Running out raises genesis.OutOfMemoryError
("Out of memory (sim:N): ..."; on a real GPU the text is "CUDA OOM: ...").

``host_allocate(n)`` / ``host_free(ptr)`` allocate from the process-wide host
allocator (genesis.device('cpu')), ``device_allocate(device, n)`` /
``device_free(device, ptr)`` from any device's, so module-level statistics
move in tests.
Addresses returned here are for passing back only: Python never touches the
memory.
"""

from . import _C
from ._allocator_view import AllocatorView
from ._registry import register_simulated, resolve
from ._sizes import to_address, to_bytes, to_count, to_stream


class SimulatedAllocator(AllocatorView):
    """A caching allocator over a simulated GPU of ``capacity`` bytes (int
    or '80GB', at most 1 TiB). ``expandable``: None (default: on, as for
    the simulated device), True or False. ``thread_cache``: the per-thread
    hot-path cache. ``conf``: allocator options as GENESIS_ALLOC_CONF text
    ("thread_cache_small_count:8,record_events:True"), applied before the two
    arguments above. Profiling and leak checks include it while it lives."""

    __slots__ = ("_sim", "_a", "label", "__weakref__")

    def __init__(self, capacity, *, index=0, expandable=None, thread_cache=True, conf=""):
        if expandable is not None and not isinstance(expandable, bool):
            raise TypeError("expandable must be None, True or False")
        if not isinstance(thread_cache, bool):
            raise TypeError("thread_cache must be True or False")
        if not isinstance(conf, str):
            raise TypeError(f"conf must be a str like 'expandable_segments:True', got {type(conf).__name__}")
        index = to_count(index, "index", maximum=15)
        self._sim = _C.SimulatedAllocator(to_bytes(capacity, "capacity"), index, expandable, thread_cache, conf)
        self._a = self._sim.allocator
        self.label = register_simulated(self, f"sim:{index}")

    def _allocator(self):
        return self._a

    def _label(self):
        return self.label

    def __repr__(self):
        return f"SimulatedAllocator({self.label!r}, capacity={self.capacity})"

    @property
    def capacity(self):
        return self._sim.capacity

    @property
    def name(self):
        return self._a.name

    def allocate(self, nbytes, stream=0):
        """Allocates ``nbytes`` (int or '1MB') on ``stream``; returns the
        address (0 for 0 bytes). genesis.OutOfMemoryError when it cannot."""
        return self._a.allocate(to_bytes(nbytes, "nbytes"), to_stream(stream))

    def free(self, ptr):
        """Frees an address from allocate(). ValueError for an address this
        allocator did not hand out, and for a double free."""
        self._a.deallocate(to_address(ptr))

    def owns(self, ptr):
        return self._a.owns(to_address(ptr))

    def allocation_size(self, ptr):
        return self._a.allocation_size(to_address(ptr))

    def create_stream(self):
        """A new simulated stream id (1, 2, ...)."""
        return self._sim.create_stream()

    def submit_work(self, stream):
        """Models a kernel launch on ``stream`` (pending until complete_all())."""
        return self._sim.submit_work(to_stream(stream))

    def record_stream(self, ptr, stream):
        """Marks ``ptr`` as used by work on ``stream`` (record_stream semantics)."""
        self._a.record_stream(to_address(ptr), to_stream(stream))

    def complete_all(self):
        """Completes the work of every simulated stream."""
        self._sim.complete_all()

    def pending_work(self, stream):
        """Work units submitted to ``stream`` and not yet completed."""
        return self._sim.pending_work(to_stream(stream))

    def fail_next_allocations(self, n):
        """The device refuses its next ``n`` segment requests."""
        self._sim.fail_next_allocations(to_count(n, "n", maximum=(1 << 62)))


def device_allocate(device, nbytes, stream=0):
    """Allocates from the process-wide allocator of ``device`` ('cpu',
    'cuda:0', a genesis.device); returns the address. For tests: tensors and
    storages allocate in C++."""
    return resolve(device)._allocator().allocate(to_bytes(nbytes, "nbytes"), to_stream(stream))


def device_free(device, ptr):
    """Frees an address from device_allocate() on the same device."""
    resolve(device)._allocator().deallocate(to_address(ptr))


def host_allocate(nbytes):
    """Allocates from the process-wide host allocator; returns the address."""
    return _C.host_allocator().allocate(to_bytes(nbytes, "nbytes"))


def host_free(ptr):
    """Frees an address from host_allocate()."""
    _C.host_allocator().deallocate(to_address(ptr))


def raise_cpp_error(kind, message="test"):
    """Raises the C++ error of ``kind`` ('oom', 'cuda', 'invalid', 'type',
    'index', 'file', 'error') through the binding layer (tests of the mapping)."""
    _C._raise_error(kind, message)
