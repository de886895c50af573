"""libgenesis_torch_allocator.so: finding it, loading it, attaching it to
this process's Genesis (Note [One allocator behind PyTorch] in
include/genesis/interop/torch_abi.h). Needs neither PyTorch nor a GPU, so
tests drive it on any machine (against a simulated device).
"""

import ctypes
import os
import threading

from .. import _C

LIBRARY_NAME = "libgenesis_torch_allocator.so"
# Overrides where the library is looked for (a path to the .so).
ENV_PATH = "GENESIS_TORCH_ALLOCATOR_LIB"

# The functions PyTorch is given, by role.
MALLOC, FREE = "genesis_torch_malloc", "genesis_torch_free"
POOL_MALLOC, POOL_FREE = "genesis_torch_pool_malloc", "genesis_torch_pool_free"
HOOKS = {
    "record_stream": "genesis_torch_record_stream",
    "reset": "genesis_torch_empty_cache",
    "memory_fraction": "genesis_torch_set_memory_fraction",
    "begin_allocate_to_pool": "genesis_torch_begin_allocate_to_pool",
    "end_allocate_to_pool": "genesis_torch_end_allocate_to_pool",
    "release_pool": "genesis_torch_release_pool",
    "refuse_private_pools": "genesis_torch_refuse_private_pools",
}

_lock = threading.Lock()
_loaded = None


def library_path():
    """Where the library is: $GENESIS_TORCH_ALLOCATOR_LIB, else next to
    genesis/_C*.so (the build tree and an installed package alike).
    FileNotFoundError says where it looked."""
    explicit = os.environ.get(ENV_PATH)
    if explicit:
        if not os.path.isfile(explicit):
            raise FileNotFoundError(f"{ENV_PATH}={explicit!r} is not a file")
        return os.path.abspath(explicit)
    here = os.path.join(os.path.dirname(os.path.abspath(_C.__file__)), LIBRARY_NAME)
    if os.path.isfile(here):
        return here
    raise FileNotFoundError(
        f"{LIBRARY_NAME} was not found next to genesis._C ({here}). It is built with the Python module "
        f"(CMake target genesis_torch_allocator: cmake --build <build> --target genesis_torch_allocator); "
        f"or set {ENV_PATH} to its path")


class Library:
    """The loaded library: its path, the ctypes handle and function addresses."""

    def __init__(self, path):
        self.path = path
        self.lib = ctypes.CDLL(path)
        self.lib.genesis_torch_attach.argtypes = [ctypes.c_void_p]
        self.lib.genesis_torch_attach.restype = ctypes.c_int
        self.lib.genesis_torch_last_error.argtypes = []
        self.lib.genesis_torch_last_error.restype = ctypes.c_char_p
        rc = self.lib.genesis_torch_attach(ctypes.c_void_p(_C._torch_backend_address()))
        if rc != 0:
            raise RuntimeError(f"{path}: cannot attach Genesis: {self.last_error()}")

    def address(self, name):
        """Address of an exported function (an int, for PyTorch's set_*_fn)."""
        return ctypes.cast(getattr(self.lib, name), ctypes.c_void_p).value

    def last_error(self):
        """The calling thread's last error of the library ('' when none)."""
        return self.lib.genesis_torch_last_error().decode("utf-8", "replace")


def load():
    """The library, loaded and attached once per process."""
    global _loaded
    with _lock:
        if _loaded is None:
            _loaded = Library(library_path())
        return _loaded
