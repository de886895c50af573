"""Genesis as PyTorch's CUDA allocator: use_genesis_allocator(), mem_pool().

How PyTorch's calls map onto Genesis, and what PyTorch does not tell a
pluggable allocator, is Note [Genesis behind PyTorch] in
python/src/py_torch_backend.cpp; how errors travel is Note [Errors into PyTorch]
there.
"""

import contextlib
import threading
import warnings

from .. import _C
from .. import _alloc_conf
from . import _library
from . import _torch_api

_lock = threading.Lock()
_active = None  # the GenesisAllocator of change_current_allocator, once made
_pool_allocator = None  # the CUDAPluggableAllocator behind every mem_pool()


def import_torch(what):
    """torch, or ImportError saying that ``what`` needs it."""
    try:
        import torch
    except ImportError as e:
        raise ImportError(f"{what} needs PyTorch, which cannot be imported here ({e}); "
                          f"install torch, or use Genesis's own API (genesis.cuda, genesis.Tensor)") from e
    return torch


def _require_gpu(torch, what):
    if not torch.cuda.is_available():
        raise RuntimeError(f"{what}: PyTorch sees no CUDA device (torch.cuda.is_available() is False: no GPU, "
                           f"no driver, or a CPU-only build of PyTorch)")
    if not _C.cuda_is_available():
        why = "no usable CUDA GPU or driver" if _C.cuda_compiled() else "Genesis was built without CUDA"
        raise RuntimeError(f"{what}: Genesis cannot use the GPU ({why}); rebuild Genesis with "
                           f"-DGENESIS_ENABLE_CUDA=ON on a machine with the CUDA toolkit")


class GenesisAllocator:
    """What use_genesis_allocator() installed: the library, the PyTorch
    allocator object (``allocator``, a torch.cuda.memory.CUDAPluggableAllocator)
    and the configuration text it was made with."""

    def __init__(self, path, allocator, conf, record_stream):
        self.path = path
        self.allocator = allocator
        self.conf = conf
        self.record_stream_forwarded = record_stream

    def __repr__(self):
        return (f"GenesisAllocator(path={self.path!r}, conf={_C.cuda_alloc_conf()!r}, "
                f"record_stream_forwarded={self.record_stream_forwarded})")


def _set_hook(inner, setter, lib, role):
    fn = getattr(inner, setter, None)
    if fn is None:
        return False
    fn(lib.address(_library.HOOKS[role]))
    return True


_LATE = ("genesis.torch.use_genesis_allocator() must run before PyTorch initialises CUDA, and this process has "
         "initialised it already (a CUDA tensor, torch.cuda.current_device() or similar ran first). PyTorch "
         "cannot swap its allocator once it is initialised. Call use_genesis_allocator() at the top of the "
         "program, before any CUDA work; or keep PyTorch's allocator and take selected tensors from Genesis "
         "with genesis.torch.mem_pool()")


def use_genesis_allocator(conf=None, **options):
    """Makes Genesis PyTorch's CUDA allocator for the rest of the process.

    ``options`` are allocator options (expandable_segments=False,
    memory_fraction=0.9, cache_size='4GB', thread_cache=False, ...; the keys
    of GENESIS_ALLOC_CONF), ``conf`` the same as text; both are added to
    GENESIS_ALLOC_CONF; expandable segments are on unless one of them says
    otherwise. Must run before PyTorch initialises CUDA (a clear
    RuntimeError otherwise). A second call changes what can change while the
    allocators live (memory_fraction, cache_size) and returns the same
    object. Afterwards genesis.torch.memory_stats(), memory_snapshot(),
    genesis.cuda.memory._snapshot() and the memory debugger describe the
    PyTorch program, and so do torch.cuda's own memory functions
    (memory_stats(), max_memory_allocated(), reset_peak_memory_stats(),
    memory_summary(), memory._record_memory_history(), _snapshot(),
    _dump_snapshot(), ...), which PyTorch cannot ask a pluggable allocator
    and which Genesis answers instead (Note [torch.cuda's memory functions
    behind Genesis] in genesis/torch/_torch_api.py). An out-of-memory error
    is a RuntimeError starting with "CUDA out of memory." and carrying
    Genesis's explanation; oom_as_torch_error() makes it a
    torch.OutOfMemoryError."""
    global _active
    torch = import_torch("genesis.torch.use_genesis_allocator()")
    text = _alloc_conf.conf_text(conf, source="use_genesis_allocator", **options)
    with _lock:
        if _active is not None:
            if text:
                _C.configure_cuda_allocators(text, "use_genesis_allocator")
            return _active
        _require_gpu(torch, "genesis.torch.use_genesis_allocator()")
        if torch.cuda.is_initialized():
            raise RuntimeError(_LATE)
        # Before the first allocation: the allocators are made with it.
        _C.configure_cuda_allocators(text, "use_genesis_allocator")
        lib = _library.load()
        alloc = torch.cuda.memory.CUDAPluggableAllocator(lib.path, _library.MALLOC, _library.FREE)
        inner = alloc.allocator()
        forwarded = _set_hook(inner, "set_record_stream_fn", lib, "record_stream")
        _set_hook(inner, "set_reset_fn", lib, "reset")
        _set_hook(inner, "set_memory_fraction_fn", lib, "memory_fraction")
        # CUDA graph captures get private pools
        # (Note [Private pools behind PyTorch] in python/src/py_torch_backend.cpp)
        # if PyTorch can say when a region ends and when its pool goes.
        pool_hooks = ("set_end_allocate_to_pool_fn", "set_release_pool", "set_begin_allocate_to_pool")
        if all(hasattr(inner, h) for h in pool_hooks):
            _set_hook(inner, "set_end_allocate_to_pool_fn", lib, "end_allocate_to_pool")
            _set_hook(inner, "set_release_pool", lib, "release_pool")
            _set_hook(inner, "set_begin_allocate_to_pool", lib, "begin_allocate_to_pool")
        else:
            _set_hook(inner, "set_begin_allocate_to_pool", lib, "refuse_private_pools")
        if not forwarded:
            warnings.warn("this PyTorch cannot forward tensor.record_stream() to a pluggable allocator: "
                          "synchronise streams yourself before freeing a tensor another stream still uses",
                          RuntimeWarning, stacklevel=2)
        try:
            torch.cuda.memory.change_current_allocator(alloc)
        except RuntimeError as e:
            if "initialized" in str(e) or "initialised" in str(e):
                raise RuntimeError(_LATE) from e
            raise
        _torch_api.install(torch._C)
        _active = GenesisAllocator(lib.path, alloc, text, forwarded)
        return _active


def is_active():
    """True when use_genesis_allocator() made Genesis PyTorch's allocator."""
    return _active is not None


def _pool_allocator_object(torch):
    global _pool_allocator
    if _pool_allocator is None:
        lib = _library.load()
        _pool_allocator = torch.cuda.memory.CUDAPluggableAllocator(lib.path, _library.POOL_MALLOC,
                                                                   _library.POOL_FREE)
    return _pool_allocator


def mem_pool(conf=None, *, use_on_oom=False, no_split=False, **options):
    """A torch.cuda.MemPool whose segments come from Genesis, for use with
    use_mem_pool() (this module's, which adds Genesis's explanation to an
    out-of-memory error, or torch.cuda.use_mem_pool). PyTorch's own caching
    allocator manages the blocks inside the pool; Genesis provides the
    memory, counts it, and shows it in its statistics and snapshots.
    ``options``/``conf``: allocator options as for use_genesis_allocator()
    (only what can still change once the GPU allocators exist)."""
    torch = import_torch("genesis.torch.mem_pool()")
    text = _alloc_conf.conf_text(conf, source="mem_pool", **options)
    with _lock:
        if _active is not None:
            raise RuntimeError("genesis.torch.mem_pool(): Genesis is already PyTorch's allocator "
                               "(use_genesis_allocator()), and memory pools need PyTorch's own allocator; "
                               "every tensor comes from Genesis already")
        _require_gpu(torch, "genesis.torch.mem_pool()")
        if text:
            _C.configure_cuda_allocators(text, "mem_pool")
        alloc = _pool_allocator_object(torch)
    # Older PyTorch versions have no no_split: pass only what was asked for.
    extra = {"use_on_oom": True} if use_on_oom else {}
    if no_split:
        extra["no_split"] = True
    return torch.cuda.MemPool(alloc.allocator(), **extra)


@contextlib.contextmanager
def use_mem_pool(pool, device=None):
    """torch.cuda.use_mem_pool(pool, device), whose torch.OutOfMemoryError also
    carries Genesis's explanation when Genesis could not provide a segment."""
    torch = import_torch("genesis.torch.use_mem_pool()")
    _C._torch_take_last_oom()
    try:
        with torch.cuda.use_mem_pool(pool, device):
            yield pool
    except torch.OutOfMemoryError as e:
        why = _C._torch_take_last_oom()
        if why and e.args and isinstance(e.args[0], str) and why not in e.args[0]:
            e.args = (f"{e.args[0]}\nGenesis: {why}",) + e.args[1:]
        raise


def is_genesis_oom(exc):
    """True for the out-of-memory RuntimeError of the Genesis allocator."""
    return (isinstance(exc, RuntimeError) and bool(exc.args) and isinstance(exc.args[0], str)
            and exc.args[0].startswith(_C._torch_oom_prefix) and "(Genesis allocator)" in exc.args[0])


class oom_as_torch_error(contextlib.ContextDecorator):
    """Context manager and decorator: the Genesis allocator's out-of-memory
    RuntimeError leaves it as torch.OutOfMemoryError (same message, traceback
    kept), for code that catches that type (PyTorch cannot raise it for a
    pluggable allocator: Note [Errors into PyTorch])."""

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc is None or not is_genesis_oom(exc):
            return False
        torch = import_torch("genesis.torch.oom_as_torch_error()")
        if isinstance(exc, torch.OutOfMemoryError):
            return False
        raise torch.OutOfMemoryError(exc.args[0]).with_traceback(tb) from None


def last_oom_message():
    """The calling thread's last Genesis out-of-memory explanation from the
    PyTorch adaptor ('' if none since the last call)."""
    return _C._torch_take_last_oom()
