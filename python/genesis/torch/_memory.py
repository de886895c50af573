"""Memory statistics of the PyTorch program, as torch.cuda's functions give
them for PyTorch's own allocator; after use_genesis_allocator() torch.cuda's own
functions give the same figures (genesis/torch/_torch_api.py).

``device``: None (PyTorch's current device when PyTorch has initialised CUDA,
else Genesis's), an int, 'cuda:N', a torch.device or a genesis.device. The
numbers are those of the process-wide Genesis GPU allocators, which
use_genesis_allocator() and mem_pool() allocate from; memory_stats() carries
PyTorch's key names ("allocated_bytes.all.current", "reserved_bytes.all.peak",
"num_alloc_retries", ...) next to Genesis's.
"""

import sys

from .. import cuda as _cuda


def _index(device):
    if device is None:
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_initialized():
            return torch.cuda.current_device()
        return None
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(device, torch.device):
        if device.type != "cuda":
            raise ValueError(f"expected a CUDA device, got {device}")
        return device.index
    return device


def memory_stats(device=None):
    """genesis.MemoryStats of a GPU's allocator (a dict with PyTorch's keys too)."""
    return _cuda.memory_stats(_index(device))


def memory_summary(device=None):
    return _cuda.memory_summary(_index(device))


def memory_snapshot(device=None):
    """Segments and blocks of a GPU's allocator (Genesis's layout); for
    PyTorch's snapshot format see genesis.cuda.memory._snapshot()."""
    return _cuda.memory_snapshot(_index(device))


def memory_allocated(device=None):
    return _cuda.memory_allocated(_index(device))


def memory_reserved(device=None):
    return _cuda.memory_reserved(_index(device))


def max_memory_allocated(device=None):
    return _cuda.max_memory_allocated(_index(device))


def max_memory_reserved(device=None):
    return _cuda.max_memory_reserved(_index(device))


def reset_peak_memory_stats(device=None):
    _cuda.reset_peak_memory_stats(_index(device))


def empty_cache():
    """Returns every GPU's cached memory to the driver."""
    _cuda.empty_cache()
