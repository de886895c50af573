"""genesis.torch: Genesis as PyTorch's CUDA allocator.

    import genesis.torch
    genesis.torch.use_genesis_allocator()                           # first, before any CUDA work
    ...                                                              # the PyTorch program, unchanged
    genesis.torch.memory_stats()["reserved_bytes.all.peak"]         # PyTorch's key names

or memory from Genesis beside PyTorch's own allocator:

    pool = genesis.torch.mem_pool()
    with genesis.torch.use_mem_pool(pool):
        x = torch.empty(1 << 20, device="cuda")

Behind PyTorch, Genesis uses expandable segments unless told otherwise
(expandable_segments=False, or GENESIS_ALLOC_CONF) or the driver cannot map
pages: there they reserve about 1.01 of a job's peak where classic segments
reserve what PyTorch's own allocator does, at the same step rate. Genesis's
own API keeps classic segments on CUDA, where its 20-nanosecond round trip
is what counts. If a Genesis GPU allocator exists before PyTorch's first
allocation (made through genesis.cuda), PyTorch shares it as it is.

The GPU allocators behind both are the process-wide ones of genesis.cuda, so
every Genesis tool describes the PyTorch program: genesis.cuda.memory_stats(),
genesis.cuda.memory._snapshot() (PyTorch's snapshot format, for
torch.cuda._memory_viz), genesis.profiler, the memory debugger.

Importing this module does not import PyTorch; a function that needs it
raises ImportError when it is missing. Options: the keys of
GENESIS_ALLOC_CONF (genesis/memory/alloc_conf.h), as keyword arguments.
"""

from ._allocator import (GenesisAllocator, is_active, is_genesis_oom, last_oom_message, mem_pool,
                         oom_as_torch_error, use_genesis_allocator, use_mem_pool)
from ._library import library_path
from ._memory import (empty_cache, max_memory_allocated, max_memory_reserved, memory_allocated, memory_reserved,
                      memory_snapshot, memory_stats, memory_summary, reset_peak_memory_stats)

__all__ = [
    "use_genesis_allocator", "is_active", "mem_pool", "use_mem_pool", "GenesisAllocator", "library_path",
    "oom_as_torch_error", "is_genesis_oom", "last_oom_message",
    "memory_stats", "memory_summary", "memory_snapshot", "memory_allocated", "memory_reserved",
    "max_memory_allocated", "max_memory_reserved", "reset_peak_memory_stats", "empty_cache",
]
