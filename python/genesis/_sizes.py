"""Argument checks for byte sizes, addresses and streams, and byte formatting.

Sizes are ints or strings written by people ("2GB", "512MiB"); strings are
parsed by the C++ parse_bytes, so Python and C++ accept the same spellings.
Checking here, before pybind11 converts, turns every bad value into a
ValueError or TypeError that names the argument.
"""

import operator

from . import _C

_U64_MAX = (1 << 64) - 1


def _as_int(value, what):
    if isinstance(value, bool):
        raise TypeError(f"{what} must be an integer, not bool")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be an integer, got {type(value).__name__}") from None


def to_bytes(value, what="size"):
    """An int >= 0 (bytes) or a size string such as '2GB' -> int."""
    if isinstance(value, str):
        value.encode("utf-8")  # lone surrogates: UnicodeEncodeError, a ValueError
        return _C.parse_bytes(value)
    if isinstance(value, (bytes, bytearray)):
        raise TypeError(f"{what} must be an int or a str such as '2GB', not {type(value).__name__}")
    try:
        n = _as_int(value, what)
    except TypeError:
        raise TypeError(f"{what} must be an int (bytes) or a str such as '2GB', "
                        f"got {type(value).__name__}") from None
    if n < 0:
        raise ValueError(f"{what} must not be negative, got {n}")
    if n > _U64_MAX:
        raise ValueError(f"{what} is too large: {n} bytes")
    return n


def to_address(value, what="ptr"):
    """A pointer value as an int in [0, 2**64)."""
    n = _as_int(value, what)
    if n < 0 or n > _U64_MAX:
        raise ValueError(f"{what} must be an address in [0, 2**64), got {n}")
    return n


def to_stream(value):
    """A stream id (0 = the default stream)."""
    return to_address(value, "stream")


def to_count(value, what="count", maximum=(1 << 31) - 1):
    n = _as_int(value, what)
    if n < 0 or n > maximum:
        raise ValueError(f"{what} must be in [0, {maximum}], got {n}")
    return n


def format_bytes(n):
    """1536 -> '1.50 KiB' (the same units as the C++ reports)."""
    n = int(n)
    sign = "-" if n < 0 else ""
    n = abs(n)
    if n < 1024:
        return f"{sign}{n} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        value /= 1024.0
        if value < 1024.0 or unit == "PiB":
            return f"{sign}{value:.2f} {unit}"
    return f"{sign}{n} B"  # not reached
