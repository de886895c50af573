"""Storages: refcounted buffers of shape x dtype on a device.

    s = genesis.create_storage([[1, 2], [3, 4]], device='cuda')   # lists, NumPy arrays, bytes, ...
    s.shape, s.dtype, s.device, s.nbytes, s.data_ptr
    c = s.to('cpu'); c.numpy()                                    # zero copy on the CPU
    v = genesis.StorageView(c, 1, (2,), (2,))                     # elements 1 and 3
    genesis.copy_storage(src, dst); genesis.convert_dtype(s, genesis.float16)
    genesis.SharedStorage((1024,), genesis.float32)               # POSIX shared memory
    genesis.MappedStorage('data.bin', (10, 10), genesis.float64, mode='w+')
    genesis.BatchStorage([a, b]).batch_copy([ga, gb])

The classes are the C++ bindings themselves (python/src/py_storage*.cpp,
py_shared_storage.cpp, py_mapped_storage.cpp); this module adds what needs Python:
create_storage accepts anything NumPy can turn into an array (torch tensors,
objects with __array__), and SharedStorage pickles by name. Inspection and
tracking are in _storage_inspect.

Lifetime: a Storage object holds one strong reference; ``del s`` gives the
block back to its pool at once unless a NumPy array, a view or another handle
still uses it (Note [Python storage objects] in python/src/py_storage_object.h).
"""

from . import _C

Storage = _C.Storage
StorageView = _C.StorageView
SharedStorage = _C.SharedStorage
MappedStorage = _C.MappedStorage
BatchStorage = _C.BatchStorage
copy_storage = _C.copy_storage
convert_dtype = _C.convert_dtype
aligned_storage = _C.aligned_storage

for _cls in (Storage, StorageView, SharedStorage, MappedStorage, BatchStorage):
    _cls.__module__ = "genesis"  # reprs and help() show the public name


def create_storage(data, device="cpu", dtype=None):
    """A new storage on ``device`` holding ``data``.

    ``data``: a number or (nested) list / tuple of numbers (the nesting gives
    the shape; the dtype defaults as in torch.tensor: float32 if any float,
    else int64, else bool), a NumPy array of any layout or byte order, bytes /
    bytearray / memoryview (uint8), another storage, or anything with
    ``__array__`` (a CPU torch tensor, ...). ``dtype`` converts. ValueError
    for ragged lists or an unknown device, TypeError for non-numbers.
    """
    if (not isinstance(data, (list, tuple, Storage, int, float, bool)) and not _has_buffer(data)
            and (hasattr(data, "__array__") or hasattr(data, "__array_interface__"))):
        import numpy
        data = numpy.asarray(data)
    return _C.create_storage(data, device, dtype)


def _has_buffer(obj):
    try:
        memoryview(obj).release()
        return True
    except TypeError:
        return False
    except BufferError:  # e.g. a GPU storage view: let the binding explain
        return True


def _attach_shared(name, shape, dtype):
    """Unpickles a SharedStorage: attaches to its segment by name."""
    return SharedStorage.attach(name, shape, dtype)


__all__ = ["Storage", "StorageView", "SharedStorage", "MappedStorage", "BatchStorage", "create_storage",
           "copy_storage", "convert_dtype", "aligned_storage"]
