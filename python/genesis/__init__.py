"""Genesis: GPU memory management (Python API).

    import genesis
    d = genesis.device('cuda')                 # or 'cuda:1', 'cpu'
    d.memory_allocated(), d.memory_stats()['cache_hit_rate'], d.empty_cache()
    genesis.cuda.set_memory_fraction(0.9); genesis.cuda.set_cache_size("2GB")
    genesis.memory_stats().fragmentation_ratio()
    with genesis.profiler.profile_memory() as prof: ...
    genesis.enable_memory_debugging(True); genesis.check_memory_leaks()

Everything binds the C++ library (include/genesis/) through genesis._C; this
package only arranges it. Layout (one concern per module):

    _C                compiled bindings (python/src/)
    _errors           OutOfMemoryError, CudaError, InvalidArgumentError, TypeMismatchError,
                      DivisionByZeroError
    _threads          set_num_threads(), get_num_threads(), available_cpus()
    _dtype            dtypes (genesis.float32, genesis.dtype('half'))
    _device           genesis.device
    _allocator_view   the memory methods shared by devices and test allocators
    _stats            MemoryStats, DetailedMemoryStats, LargeAllocation
    _memory_api       genesis.memory_stats(), empty_cache(), detailed_memory_stats()
    _pinned           allocate_pinned(), is_pinned()
    cuda, cpu         genesis.cuda.*, genesis.cpu.*
    memory_manager    collect_garbage(), compact(), warmup()
    profiler, memory_profiler   profiling; _profile_session, _timeline
    memory_debug      enable_memory_debugging(), check_memory_leaks()
    testing           SimulatedAllocator: the allocator on a simulated GPU
    storage           Storage, StorageView, SharedStorage, MappedStorage, BatchStorage,
                      create_storage(), copy_storage(), convert_dtype(), aligned_storage()
    _storage_inspect  inspect_storage(), StorageTracker
    _tensor           genesis.Tensor, tensor(), zeros(), ..., from_numpy(), from_dlpack()
    _serialization    pickling of tensors and storages
"""

import os as _os

try:
    from . import _C
except ImportError as _e:  # pragma: no cover - only without a build
    raise ImportError(
        "genesis._C (the compiled extension) was not found next to genesis/__init__.py. Build it with "
        "cmake (scripts/setup.sh, or cmake -S . -B build && cmake --build build) and put build/python "
        "first on PYTHONPATH: PYTHONPATH=build/python python3 ...") from _e

# Allocation sites skip frames inside this package (python/src/py_location.h).
_C.set_package_prefix(_os.path.dirname(_os.path.abspath(__file__)) + _os.sep)

from ._errors import (CudaError, DivisionByZeroError, InvalidArgumentError, OutOfMemoryError,  # noqa: E402
                      TypeMismatchError)
from ._threads import available_cpus, get_num_threads, set_num_threads  # noqa: E402
from ._device import device  # noqa: E402
from ._stats import DetailedMemoryStats, LargeAllocation, MemoryStats, Ratio  # noqa: E402
from ._memory_api import (detailed_memory_stats, empty_cache, memory_snapshot, memory_stats,  # noqa: E402
                          memory_summary)
from ._pinned import PinnedBuffer, allocate_pinned, is_pinned  # noqa: E402
from . import cpu, cuda, memory_debug, memory_manager, memory_profiler, profiler, testing  # noqa: E402
from .memory_profiler import enable_memory_profiling  # noqa: E402
from .storage import (BatchStorage, MappedStorage, SharedStorage, Storage, StorageView,  # noqa: E402
                      aligned_storage, convert_dtype, copy_storage, create_storage)
from ._storage_inspect import StorageInfo, StorageTracker, TrackedStorage, inspect_storage  # noqa: E402
from .memory_debug import (MemoryLeak, check_memory_leaks, enable_memory_debugging,  # noqa: E402
                           get_site_depth, set_memory_debug, set_site_depth)
# dtypes last: `bool`, `float`, `int` shadow the builtins in this namespace
# (as in torch); nothing below uses the builtins.
from ._dtype import (all_dtypes, bfloat16, bool, double, dtype, float, float16, float32,  # noqa: E402,A004
                     float64, half, int, int8, int16, int32, int64, long, short, uint8)

# --- tensors: genesis.Tensor, tensor(), zeros(), ... ---
# Star import on purpose: _tensor.__all__ is the one list of tensor names.
# `max`, `min`, `sum`, `abs`, `pow` shadow the builtins here, as in torch.
from ._tensor import *  # noqa: E402,F401,F403,A001
from ._tensor import __all__ as _tensor_all  # noqa: E402
from . import _serialization  # noqa: E402

_serialization.install()  # tensors and storages pickle (Note [Pickling])

# One version for the project: project(genesis VERSION ...) in CMakeLists.txt,
# compiled into _C through the generated genesis/version.h.
__version__ = _C.__version__

__all__ = [
    # errors
    "OutOfMemoryError", "CudaError", "InvalidArgumentError", "TypeMismatchError", "DivisionByZeroError",
    # CPU threads
    "set_num_threads", "get_num_threads", "available_cpus",
    # devices and memory
    "device", "memory_stats", "detailed_memory_stats", "memory_summary", "memory_snapshot", "empty_cache",
    "MemoryStats", "DetailedMemoryStats", "LargeAllocation", "Ratio",
    "allocate_pinned", "is_pinned", "PinnedBuffer",
    "cuda", "cpu", "memory_manager", "profiler", "memory_profiler", "memory_debug", "testing",
    "enable_memory_profiling", "enable_memory_debugging", "set_memory_debug", "check_memory_leaks",
    "MemoryLeak", "set_site_depth", "get_site_depth",
    # storages
    "Storage", "StorageView", "SharedStorage", "MappedStorage", "BatchStorage", "create_storage",
    "copy_storage", "convert_dtype", "aligned_storage", "inspect_storage", "StorageInfo", "StorageTracker",
    "TrackedStorage",
    # dtypes
    "dtype", "all_dtypes", "bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16",
    "float32", "float64", "half", "float", "double", "short", "int", "long",
]
__all__ += _tensor_all  # tensors: the names _tensor.__all__ lists

# GENESIS_METRICS_PORT: serve this process's memory figures to Prometheus
# (genesis.tools.memory.start_metrics_server). A port in use must not make
# `import genesis` fail: it warns instead.
if _os.environ.get("GENESIS_METRICS_PORT"):
    try:
        _C.start_metrics_server_from_environment()
    except Exception as _e:  # noqa: BLE001 - any failure is reported, not raised
        import warnings as _warnings

        _warnings.warn(f"genesis: metrics server not started: {_e}", RuntimeWarning, stacklevel=2)

# GENESIS_MEM_SITES=1 (set by `genesis-mem ... --enable-tracking -- CMD` for
# the program it starts): allocations made from Python record their call
# stack, so the watcher's leak report names the lines that hold memory.
if _os.environ.get("GENESIS_MEM_SITES") == "1":
    _C.set_capture_locations(True)
