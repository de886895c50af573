"""Which allocators exist, for the functions that act on "all memory":
profiling (genesis.profiler, genesis.memory_profiler), leak checks
(genesis.check_memory_leaks) and maintenance (genesis.memory_manager).

Tracked: the host allocator, each CUDA device's allocator and the pinned one
when a GPU is usable, and every live genesis.testing.SimulatedAllocator (so
that CI exercises profiling and leak checks without a GPU). A
SimulatedAllocator created during a profiling session is not part of it.
"""

import threading
import weakref

from . import _C
from ._allocator_view import AllocatorView
from ._device import device

_lock = threading.Lock()
_simulated = weakref.WeakValueDictionary()  # label -> SimulatedAllocator


def register_simulated(obj, wanted):
    """Registers a SimulatedAllocator under a free label based on ``wanted``."""
    with _lock:
        label, n = wanted, 1
        while label in _simulated:
            n += 1
            label = f"{wanted}#{n}"
        _simulated[label] = obj
        return label


class AllocatorHandle(AllocatorView):
    """The memory API of one tracked allocator, under its report label."""

    __slots__ = ("label", "allocator")

    def __init__(self, label, allocator):
        self.label = label
        self.allocator = allocator

    def _allocator(self):
        return self.allocator

    def _label(self):
        return self.label

    def __repr__(self):
        return f"AllocatorHandle({self.label!r})"


def default_device():
    """The current CUDA device when a GPU is usable, else the CPU."""
    if _C.cuda_is_available():
        return device(f"cuda:{_C.cuda_current_device()}")
    return device("cpu")


def resolve(dev):
    """None -> default_device(); an AllocatorView (a device, a
    SimulatedAllocator) as it is; anything genesis.device accepts -> a device."""
    if dev is None:
        return default_device()
    if isinstance(dev, AllocatorView):
        return dev
    return device(dev)


def process_allocators():
    """AllocatorHandles of the process-wide allocators."""
    out = [AllocatorHandle("cpu", _C.host_allocator())]
    if _C.cuda_is_available():
        out += [AllocatorHandle(f"cuda:{i}", _C.cuda_allocator(i)) for i in range(_C.cuda_device_count())]
        out.append(AllocatorHandle("pinned", _C.pinned_allocator()))
    return out


def tracked_allocators():
    """process_allocators() plus the live simulated allocators."""
    with _lock:
        sims = [AllocatorHandle(label, obj._allocator()) for label, obj in list(_simulated.items())]
    return process_allocators() + sims
