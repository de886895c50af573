"""genesis.cuda: GPU queries, streams and GPU memory, named as in torch.cuda.

Runtime: is_available(), device_count(), current_device(), set_device(),
synchronize(), mem_get_info(), get_device_name(), get_device_capability(),
get_device_properties(), can_device_access_peer(), ``with device(i):``,
sync_index_checks() / set_sync_index_checks() (when GPU index errors are raised).
Streams: Stream, Event, current_stream(), default_stream(), set_stream(),
``with stream(s):``.
Memory: memory_allocated(), memory_cached(), memory_reserved(),
max_memory_allocated(), max_memory_cached(), memory_stats(), memory_summary(),
memory_snapshot(), empty_cache(), set_memory_fraction(), set_cache_size(), ...
Storages: ipc_shareable_storage() (CUDA IPC; see genesis.Storage.share_ipc).
Snapshots in PyTorch's format: genesis.cuda.memory._record_memory_history(),
_snapshot(), _dump_snapshot() (for torch.cuda._memory_viz).
"""

from ._memory import (empty_cache, max_memory_allocated, max_memory_cached, max_memory_reserved,
                      memory_allocated, memory_cached, memory_reserved, memory_snapshot, memory_stats,
                      memory_summary, reset_accumulated_memory_stats, reset_memory_stats,
                      reset_peak_memory_stats, set_cache_size,
                      set_memory_fraction)
from ._runtime import (can_device_access_peer, current_device, device, device_count, get_device_capability,
                       get_device_name, get_device_properties, is_available, mem_get_info, set_device,
                       set_sync_index_checks, sync_index_checks, synchronize)
from ._storage import ipc_shareable_storage
from ._streams import Event, Stream, current_stream, default_stream, set_stream, stream
from . import memory  # noqa: E402  (genesis.cuda.memory._snapshot(), PyTorch's snapshot format)

__all__ = [
    "is_available", "device_count", "current_device", "set_device", "synchronize", "mem_get_info",
    "get_device_name", "get_device_capability", "get_device_properties", "can_device_access_peer",
    "sync_index_checks", "set_sync_index_checks", "device", "Stream", "Event", "current_stream", "default_stream", "set_stream", "stream",
    "memory_allocated", "memory_cached", "memory_reserved", "max_memory_allocated",
    "max_memory_cached", "max_memory_reserved", "memory_stats", "memory_summary",
    "memory_snapshot", "empty_cache", "reset_memory_stats", "reset_peak_memory_stats",
    "reset_accumulated_memory_stats",
    "set_memory_fraction", "set_cache_size", "ipc_shareable_storage", "memory",
]
