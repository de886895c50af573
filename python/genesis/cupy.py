"""genesis.cupy: Genesis as CuPy's GPU allocator.

    import cupy, genesis.cupy
    cupy.cuda.set_allocator(genesis.cupy.allocator())

CuPy then allocates from the process-wide Genesis GPU allocators: the same
pool as genesis.Tensor and, after genesis.torch.use_genesis_allocator(), as
PyTorch, so that one budget, one set of statistics and one memory debugger
cover all three. Each allocation is made on the current device for CuPy's
current stream and goes back to Genesis when CuPy drops the memory (the
block's owner object frees it); a block is reused at once on its stream and
on other streams only after the work recorded on them is done, as in CuPy's
own pool. CuPy is imported only when a function needs it.

Expandable segments are on unless the options or GENESIS_ALLOC_CONF say
otherwise or the driver cannot map pages, as behind PyTorch (genesis.torch).
Options: the keys of GENESIS_ALLOC_CONF (genesis/memory/alloc_conf.h) as
keyword arguments, or ``conf`` as text; they configure the process-wide
allocators (what is fixed at creation must come before the first GPU
allocation of the process).
"""

from . import _C, _alloc_conf
from ._errors import OutOfMemoryError as _GenesisOOM


def _import_cupy(what):
    try:
        import cupy
    except ImportError as e:
        raise ImportError(f"{what} needs CuPy, which cannot be imported here ({e})") from e
    return cupy


_oom_class = None


def _oom_type(cupy):
    """An OOM that both ``except cupy.cuda.memory.OutOfMemoryError`` and
    ``except genesis.OutOfMemoryError`` catch, with Genesis's explanation."""
    global _oom_class
    if _oom_class is None:
        class OutOfMemoryError(cupy.cuda.memory.OutOfMemoryError, _GenesisOOM):
            def __init__(self, message):  # CuPy's takes (size, total): keep Genesis's text instead
                BaseException.__init__(self, message)

            def __str__(self):
                return str(self.args[0]) if self.args else ""

        _oom_class = OutOfMemoryError
    return _oom_class


class _Block:
    """Owner of one Genesis allocation inside a cupy.cuda.UnownedMemory:
    frees it when CuPy lets go of the memory."""

    __slots__ = ("_allocator", "ptr")

    def __init__(self, allocator, ptr):
        self._allocator = allocator
        self.ptr = ptr

    def __del__(self):
        if self.ptr:
            ptr, self.ptr = self.ptr, 0
            self._allocator.deallocate(ptr)


def allocator(conf=None, **options):
    """A function for cupy.cuda.set_allocator(): size -> cupy.cuda.MemoryPointer
    from Genesis, on CuPy's current device and stream."""
    cupy = _import_cupy("genesis.cupy.allocator()")
    text = _alloc_conf.conf_text(conf, source="genesis.cupy.allocator", **options)
    if text:
        _C.configure_cuda_allocators(text, "genesis.cupy.allocator")
    memory = cupy.cuda.memory
    oom = _oom_type(cupy)
    allocators = {}

    def malloc(size):
        device = cupy.cuda.runtime.getDevice()
        a = allocators.get(device)
        if a is None:
            # Expandable segments where the device maps pages, unless the user
            # chose (Note [Front-end defaults] in src/memory/alloc_conf_defaults.cpp).
            _C.prefer_framework_allocator_defaults(device, "genesis.cupy.allocator")
            a = allocators[device] = _C.cuda_allocator(device)
        stream = cupy.cuda.get_current_stream().ptr
        try:
            ptr = a.allocate(size, stream)
        except _GenesisOOM as e:
            raise oom(f"Out of memory allocating {size} bytes for CuPy (Genesis allocator): {e}") from None
        if ptr == 0:  # 0 bytes
            return memory.MemoryPointer(memory.UnownedMemory(0, 0, None, device), 0)
        return memory.MemoryPointer(memory.UnownedMemory(ptr, size, _Block(a, ptr), device), 0)

    return malloc


def use_genesis_allocator(conf=None, **options):
    """cupy.cuda.set_allocator(allocator(conf, **options))."""
    cupy = _import_cupy("genesis.cupy.use_genesis_allocator()")
    cupy.cuda.set_allocator(allocator(conf, **options))
