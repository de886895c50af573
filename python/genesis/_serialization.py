"""Pickling tensors and storages (multiprocessing, checkpoints, copy).

Note [Pickling]: what a pickle holds, and what unpickling gives back.

- A ``genesis.Tensor`` pickles by value: its dtype, shape, device and its
  elements in row-major order. A view (a transpose, a slice with steps, an
  expanded tensor) pickles its own elements only, never the rest of the
  storage it looks into, so a small view of a large tensor stays small; the
  unpickled tensor is contiguous and owns its memory. Two views of one
  storage therefore unpickle as two independent tensors (sharing is not
  kept). Genesis tensors carry no other state (no autograd).
- A CUDA tensor is copied to the host to be pickled and goes back to the
  same device index when unpickled. Where that device does not exist (no
  GPU, or fewer GPUs), unpickling raises genesis.CudaError naming the device;
  pickle ``t.cpu()`` to move tensors to machines without it.
- With protocol 5 the elements travel as a ``pickle.PickleBuffer``, so
  ``pickle.dumps(t, protocol=5, buffer_callback=...)`` can send them out of
  band without another copy.
- A ``genesis.Storage`` (and a MappedStorage, whose file is not part of the
  pickle) pickles by value the same way and unpickles as a ``Storage`` on
  its device; a ``StorageView`` unpickles as a contiguous view of a new
  storage holding its elements. A ``SharedStorage`` keeps pickling by name
  (``storage.py``): the unpickled object maps the same shared memory, which
  is how processes share it without copies.

Unpickling checks what it is given: a length that does not match the shape
and dtype (a truncated or corrupted pickle) raises ValueError. As with any
pickle, only unpickle data you trust.
"""

import pickle

from . import _C
from ._errors import CudaError

# cudaErrorNoDevice / cudaErrorInvalidDevice, as CudaError.code.
_NO_DEVICE = 100
_INVALID_DEVICE = 101


def _device_for(device, what):
    """The device to unpickle onto: ``device`` itself, after checking that it
    exists here (CudaError naming it otherwise)."""
    if device == "cpu":
        return device
    index = int(device.partition(":")[2] or 0)
    if not _C.cuda_is_available():
        why = ("no CUDA GPU is available on this machine" if _C.cuda_compiled()
               else "Genesis was built without CUDA")
        err = CudaError(f"cannot unpickle a {what} of {device}: {why}; pickle it from the CPU "
                        f"(t.cpu()) to load it on machines without that GPU")
        err.code = _NO_DEVICE
        raise err
    count = _C.cuda_device_count()
    if index >= count:
        err = CudaError(f"cannot unpickle a {what} of {device}: this machine has {count} CUDA "
                        f"device{'s' if count != 1 else ''} (cuda:0 .. cuda:{count - 1}); pickle it from "
                        f"the CPU (t.cpu()) or from a device that exists here")
        err.code = _INVALID_DEVICE
        raise err
    return device


def _payload(data, protocol):
    return pickle.PickleBuffer(data) if protocol >= 5 else data


def _rebuild_tensor(data, dtype, shape, device):
    device = _device_for(device, "tensor")
    t = _C._tensor_from_bytes(data, dtype, shape)
    return t if device == "cpu" else t.to(device)


def _tensor_reduce_ex(self, protocol):
    return (_rebuild_tensor,
            (_payload(_C._tensor_bytes(self), protocol), self.dtype.name, tuple(self.shape), str(self.device)))


def _rebuild_storage(data, dtype, shape, device):
    device = _device_for(device, "storage")
    s = _C._storage_from_bytes(data, dtype, shape)
    return s if device == "cpu" else s.to(device)


def _storage_reduce(self):
    return (_rebuild_storage, (_C._storage_bytes(self), self.dtype.name, tuple(self.shape), str(self.device)))


def _rebuild_storage_view(data, dtype, shape, device):
    base = _rebuild_storage(data, dtype, shape, device)
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return _C.StorageView(base, 0, tuple(shape), tuple(reversed(strides)))


def _storage_view_reduce(self):
    return (_rebuild_storage_view,
            (_C._storage_bytes(self), self.dtype.name, tuple(self.shape), str(self.device)))


def install():
    """Makes tensors and storages picklable (called once by genesis/__init__)."""
    _C.Tensor.__reduce_ex__ = _tensor_reduce_ex
    # __reduce__, not __reduce_ex__: SharedStorage's own __reduce__ (by name)
    # must keep taking precedence on the subclass.
    _C.Storage.__reduce__ = _storage_reduce
    _C.StorageView.__reduce__ = _storage_view_reduce
