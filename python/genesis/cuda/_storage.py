"""GPU storages shared between processes through CUDA IPC.

    s = genesis.cuda.ipc_shareable_storage((1024,), genesis.float32)
    handle = s.share_ipc()            # a string: send it to the other process
    # other process:
    t = genesis.Storage.from_ipc(handle, (1024,), genesis.float32)

The exporter keeps ``s`` alive until every importer has dropped its storage
(Note [Lifetime of shared GPU memory] in include/genesis/storage/cuda_ipc_storage.h).
"""

from .. import _C
from ._runtime import device_index


def ipc_shareable_storage(shape, dtype, device=None):
    """A GPU storage in its own cudaMalloc allocation, exportable with
    share_ipc() whatever the allocator's configuration. CudaError without a GPU."""
    index = device_index(device, "genesis.cuda.ipc_shareable_storage()")
    return _C.ipc_shareable_storage(shape, dtype, f"cuda:{index}")
