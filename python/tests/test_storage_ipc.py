"""CUDA IPC of GPU storages: share_ipc() in one process,
Storage.from_ipc() in another. Without a GPU: the errors say why."""

import os
import subprocess
import sys

import pytest

import genesis
from conftest import requires_cuda, requires_no_cuda

CHILD_ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))

# Well formed (genesis-ipc-v1:<device>:<uuid>:<exporter>:<offset>:<nbytes>:<cudaIpcMemHandle_t>),
# but naming memory no process exported.
FAKE_HANDLE = "genesis-ipc-v1:0:" + "ab" * 16 + ":" + "01" * 8 + ":0:16:" + "00" * 64


def test_cpu_storages_cannot_be_shared_through_cuda_ipc(host):
    with pytest.raises(ValueError):
        genesis.create_storage([1.0, 2.0]).share_ipc()


@pytest.mark.parametrize("bad", ["", "hello", "genesis-ipc-v2:0", FAKE_HANDLE.replace(":16:", ":x:"),
                                 FAKE_HANDLE[:-2], FAKE_HANDLE + ":extra"])
def test_malformed_handles_are_value_errors(bad):
    with pytest.raises(ValueError):
        genesis.Storage.from_ipc(bad, (4,), genesis.float32)


@requires_no_cuda
def test_without_gpu_ipc_is_a_cuda_error():
    with pytest.raises(genesis.CudaError):
        genesis.Storage.from_ipc(FAKE_HANDLE, (4,), genesis.float32)
    with pytest.raises(genesis.CudaError):
        genesis.cuda.ipc_shareable_storage((4,), genesis.float32)


CHILD = r"""
import sys, numpy as np, genesis
handle = sys.stdin.readline().strip()
t = genesis.Storage.from_ipc(handle, (256,), genesis.float32)
assert t.device.type == "cuda"
print(float(np.asarray(t.cpu()).sum()), flush=True)
t.copy_(genesis.create_storage(np.full(256, 2.0, dtype=np.float32)))
genesis.cuda.synchronize()
del t
"""


@requires_cuda
@pytest.mark.parametrize("make", ["ipc_shareable", "pooled"])
def test_two_processes_share_a_gpu_storage(make):
    import numpy as np
    values = np.arange(256, dtype=np.float32)
    if make == "ipc_shareable":
        s = genesis.cuda.ipc_shareable_storage((256,), genesis.float32)
        assert not s.is_pooled()
        s.copy_(genesis.create_storage(values))
    else:
        s = genesis.create_storage(values, device="cuda")
    try:
        handle = s.share_ipc()
    except ValueError as e:  # a pooled block in an expandable segment cannot be exported
        assert make == "pooled" and "ipc_shareable_storage" in str(e)
        pytest.skip(f"pooled storage not exportable in this allocator configuration: {e}")
    assert handle.startswith("genesis-ipc-v1:")
    with pytest.raises(ValueError):
        genesis.Storage.from_ipc(handle, (256,), genesis.float32)  # our own handle: use the storage itself
    with pytest.raises(ValueError):
        genesis.Storage.from_ipc(handle, (257,), genesis.float32)
    out = subprocess.run([sys.executable, "-c", CHILD], input=handle + "\n", env=CHILD_ENV, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert float(out.stdout) == float(values.sum())  # the child read our memory
    assert s.tolist() == [2.0] * 256  # and we see what it wrote
