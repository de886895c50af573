"""CUDA streams and events of genesis.cuda, as in torch.cuda.

    s = genesis.cuda.Stream()                 # a new stream on the current GPU
    with genesis.cuda.stream(s):              # current stream (and its device) inside the block
        ...
    e = genesis.cuda.Event(enable_timing=True); e.record(); e.synchronize()
    genesis.cuda.current_stream(), genesis.cuda.default_stream()

Each thread has its own current stream per device; the default stream is the
legacy stream 0 (Note [Default stream] in include/genesis/cuda/stream.h).
Without a GPU, creating a stream, recording an event and the stream queries
raise genesis.CudaError. Everything is bound from C++ (python/src/py_cuda_stream.cpp).
"""

from .. import _C
from .._device import device as _device
from ._runtime import device_index


class Stream:
    """A CUDA stream. ``Stream(device=None, priority=0)`` creates one on a GPU
    (None: the current one); lower priority numbers run first. Streams compare
    equal when they are the same CUDA stream."""

    __slots__ = ("_c",)

    def __init__(self, device=None, priority=0):
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise TypeError(f"genesis.cuda.Stream: priority must be an int, got {type(priority).__name__}")
        index = device_index(device, "genesis.cuda.Stream()")
        self._c = _C.CudaStream.create(index, priority)

    @classmethod
    def _wrap(cls, c):
        obj = object.__new__(cls)
        obj._c = c
        return obj

    @property
    def device(self):
        return _device("cuda", self._c.device)

    @property
    def priority(self):
        return self._c.priority

    @property
    def cuda_stream(self):
        """The cudaStream_t value (0 for the legacy default stream)."""
        return self._c.id

    def synchronize(self):
        """Waits until all work queued on the stream has finished."""
        self._c.synchronize()

    def query(self):
        """True when all work queued so far has finished (never blocks)."""
        return self._c.query()

    def wait_event(self, event):
        """Makes later work on this stream wait for ``event``."""
        if not isinstance(event, Event):
            raise TypeError(f"wait_event() takes a genesis.cuda.Event, got {type(event).__name__}")
        self._c.wait(event._c)

    def wait_stream(self, stream):
        """Makes later work on this stream wait for the work queued on ``stream`` so far."""
        if not isinstance(stream, Stream):
            raise TypeError(f"wait_stream() takes a genesis.cuda.Stream, got {type(stream).__name__}")
        self.wait_event(stream.record_event())

    def record_event(self, event=None):
        """Records ``event`` (a new one if None) on this stream and returns it."""
        event = Event() if event is None else event
        event.record(self)
        return event

    def __eq__(self, other):
        if not isinstance(other, Stream):
            return NotImplemented
        return self._c == other._c

    def __hash__(self):
        return hash(self._c)

    def __repr__(self):
        return (f"genesis.cuda.Stream(device=cuda:{self._c.device}, cuda_stream=0x{self._c.id:x}, "
                f"priority={self._c.priority})")


class Event:
    """A CUDA event. Created on the GPU by the first record(); until then it is
    complete (query() is True) and costs nothing. ``enable_timing=True`` is
    needed for elapsed_time()."""

    __slots__ = ("_c",)

    def __init__(self, enable_timing=False):
        if not isinstance(enable_timing, bool):
            raise TypeError(f"enable_timing must be True or False, got {type(enable_timing).__name__}")
        self._c = _C.CudaEvent(enable_timing)

    def record(self, stream=None):
        """Records the event on ``stream`` (default: the current stream)."""
        if stream is None:
            self._c.record_current()
        elif isinstance(stream, Stream):
            self._c.record(stream._c)
        else:
            raise TypeError(f"record() takes a genesis.cuda.Stream or None, got {type(stream).__name__}")

    def wait(self, stream=None):
        """Makes later work on ``stream`` (default: the current stream) wait for this event."""
        (current_stream() if stream is None else stream).wait_event(self)

    def synchronize(self):
        """Waits until the work captured by the last record() has finished."""
        self._c.synchronize()

    def query(self):
        """True when the captured work has finished (True if never recorded)."""
        return self._c.query()

    def elapsed_time(self, end_event):
        """Milliseconds from this event to ``end_event`` (both recorded with
        enable_timing=True and complete)."""
        if not isinstance(end_event, Event):
            raise TypeError(f"elapsed_time() takes a genesis.cuda.Event, got {type(end_event).__name__}")
        return self._c.elapsed_ms(end_event._c)

    @property
    def enable_timing(self):
        return self._c.timing_enabled

    def __repr__(self):
        state = f"cuda:{self._c.device}" if self._c.is_created else "not recorded"
        return f"genesis.cuda.Event({state}, enable_timing={self._c.timing_enabled})"


def current_stream(device=None):
    """The calling thread's current stream on ``device`` (None: the current GPU)."""
    return Stream._wrap(_C.CudaStream.current(device_index(device, "genesis.cuda.current_stream()")))


def default_stream(device=None):
    """The default stream of ``device`` (None: the current GPU)."""
    return Stream._wrap(_C.CudaStream.default(device_index(device, "genesis.cuda.default_stream()")))


def set_stream(stream):
    """Makes ``stream`` the calling thread's current stream on its device
    (the current device is unchanged; ``with genesis.cuda.stream(s)`` sets both)."""
    if not isinstance(stream, Stream):
        raise TypeError(f"set_stream() takes a genesis.cuda.Stream, got {type(stream).__name__}")
    _C.cuda_set_current_stream(stream._c)


_NEW_STREAM = object()


class stream:
    """``with genesis.cuda.stream(s):`` makes ``s`` the current stream and its
    GPU the current device inside the block; both are restored on exit,
    exceptions included. ``as`` gives the stream.

    ``genesis.cuda.stream()`` with no argument runs the block on a new stream
    of the current GPU (as torch.cuda.stream() with a new stream would); ``stream(None)`` is
    a no-op, as in torch. Without a GPU, creating or entering raises
    genesis.CudaError."""

    def __init__(self, stream=_NEW_STREAM):
        if stream is _NEW_STREAM:
            stream = Stream()
        elif stream is not None and not isinstance(stream, Stream):
            raise TypeError(f"genesis.cuda.stream() takes a genesis.cuda.Stream or None, "
                            f"got {type(stream).__name__}")
        self.stream = stream
        self._guards = []  # one C++ guard per active `with`

    def __enter__(self):
        if self.stream is None:
            self._guards.append(None)
            return None
        guard = _C.CudaStreamGuard(self.stream._c)
        guard.__enter__()
        self._guards.append(guard)
        return self.stream

    def __exit__(self, *exc):
        guard = self._guards.pop()
        if guard is not None:
            guard.__exit__(*exc)
        return False
