"""genesis.cuda: GPU queries and GPU memory (SPEC M3, M4, T6).

Runtime: is_available(), device_count(), current_device(), synchronize(),
mem_get_info(); get_device_name / get_device_capability / get_device_properties
/ stream() / device() are TODO hooks (cuda/_runtime.py).
Memory: memory_allocated(), memory_cached(), memory_reserved(),
max_memory_allocated(), max_memory_cached(), memory_stats(), memory_summary(),
memory_snapshot(), empty_cache(), set_memory_fraction(), set_cache_size(), ...
"""

from ._memory import (empty_cache, max_memory_allocated, max_memory_cached, max_memory_reserved,
                      memory_allocated, memory_cached, memory_reserved, memory_snapshot, memory_stats,
                      memory_summary, reset_memory_stats, reset_peak_memory_stats, set_cache_size,
                      set_memory_fraction)
from ._runtime import (current_device, device, device_count, get_device_capability, get_device_name,
                       get_device_properties, is_available, mem_get_info, stream, synchronize)

__all__ = [
    "is_available", "device_count", "current_device", "synchronize", "mem_get_info",
    "get_device_name", "get_device_capability", "get_device_properties", "stream", "device",
    "memory_allocated", "memory_cached", "memory_reserved", "max_memory_allocated",
    "max_memory_cached", "max_memory_reserved", "memory_stats", "memory_summary",
    "memory_snapshot", "empty_cache", "reset_memory_stats", "reset_peak_memory_stats",
    "set_memory_fraction", "set_cache_size",
]
