"""Allocator options as keyword arguments or GENESIS_ALLOC_CONF text.

One parser, in C++ (genesis/memory/alloc_conf.h): keyword arguments are
written as "key:value" text and parsed there, so a keyword argument, the
environment variable and the C++ API accept the same keys and values and
reject the same mistakes with the same messages (ValueError naming the key
and listing the valid ones).

    conf_text(expandable_segments=True, cache_size="2GB")
    -> "expandable_segments:True,cache_size:2GB"
"""

import numbers

from . import _C


def keys():
    """The valid option names, in documentation order."""
    return [name for name, _form, _meaning in _C.alloc_conf_keys()]


def _value_text(key, value):
    if key == "idle_release" and not isinstance(value, (bool, str)):
        # Seconds as a number (None or 0: off), as the text's milliseconds.
        if value is None or value == 0:
            return "off"
        if isinstance(value, numbers.Real) and value > 0:
            return f"{max(1, round(float(value) * 1000))}ms"
        raise ValueError(f"idle_release: expected seconds > 0, None, or text such as '30s', got {value!r}")
    if value is None:
        if key in ("cache_size", "max_cached_bytes"):
            return "none"
        raise TypeError(f"{key}: None is only allowed for cache_size (no cap)")
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        return repr(float(value))
    if isinstance(value, str):
        if "," in value or ":" in value:
            raise ValueError(f"{key}: value {value!r} must not contain ',' or ':'")
        return value
    raise TypeError(f"{key}: expected a bool, a number or a str, got {type(value).__name__}")


def conf_text(conf=None, source="allocator options", **options):
    """``conf`` (text, may be None) followed by ``options`` as text; checked by
    the C++ parser (ValueError for an unknown key or a bad value)."""
    if conf is not None and not isinstance(conf, str):
        raise TypeError(f"conf must be a str like 'expandable_segments:True', got {type(conf).__name__}")
    parts = [conf] if conf else []
    valid = set(keys())
    for key, value in options.items():
        if key not in valid:
            raise ValueError(f"{source}: unknown option '{key}'; valid options: {', '.join(keys())}")
        parts.append(f"{key}:{_value_text(key, value)}")
    text = ",".join(parts)
    _C.parse_alloc_conf(text, source)
    return text


def parse(text, source="allocator options"):
    """The options ``text`` sets, as a dict of every option's value."""
    return _C.parse_alloc_conf(text, source)
