"""``genesis.device``: where memory lives, with its allocator's statistics
and controls.

    d = genesis.device('cuda')      # also 'cuda:1', 'cpu', genesis.device('cuda', 1), genesis.device(0)
    d.memory_allocated(); d.memory_stats()['cache_hit_rate']; d.empty_cache()

Parsing and validation are C++'s (genesis::cuda::parse_device): a string that is
not 'cpu', 'cuda' or 'cuda:N', or a GPU this machine does not have, raises
ValueError. The CPU device's allocator is the host allocator.
"""

import operator

from . import _C
from ._allocator_view import AllocatorView


class device(AllocatorView):
    """A device: ``type`` ('cpu' or 'cuda') and ``index`` (None for the CPU).
    Immutable, hashable, comparable; pickles as its string."""

    __slots__ = ("_c",)

    def __init__(self, spec, index=None):
        if isinstance(spec, device):
            if index is not None:
                raise TypeError("genesis.device(device) takes no index")
            c = spec._c
        elif isinstance(spec, str):
            spec.encode("utf-8")  # lone surrogates: UnicodeEncodeError (a ValueError)
            if index is not None:
                if isinstance(index, bool):
                    raise TypeError("device index must be an integer, not bool")
                spec = f"{spec}:{operator.index(index)}"
            c = _C.Device(spec)
        elif isinstance(spec, int) and not isinstance(spec, bool):
            if index is not None:
                raise TypeError("genesis.device(int) takes no index")
            c = _C.Device(f"cuda:{spec}")
        else:
            raise TypeError(f"genesis.device() takes a string such as 'cuda:0', an int (a CUDA index) "
                            f"or a genesis.device, got {type(spec).__name__}")
        object.__setattr__(self, "_c", c)

    def __setattr__(self, name, value):
        raise AttributeError("genesis.device objects are immutable")

    @property
    def type(self):
        return self._c.type

    @property
    def index(self):
        return None if self._c.type == "cpu" else self._c.index

    def __str__(self):
        return str(self._c)

    def __repr__(self):
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"

    def __eq__(self, other):
        if not isinstance(other, device):
            return NotImplemented
        return self._c == other._c

    def __hash__(self):
        return hash(self._c)

    def __reduce__(self):
        return (device, (str(self),))

    # AllocatorView
    def _allocator(self):
        return _C.allocator_for(self._c)

    def _label(self):
        return str(self)
