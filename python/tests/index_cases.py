"""Random NumPy index expressions for the differential tests
(test_indexing_numpy.py, test_tensor_properties.py).

A case is (array, index, numpy_index): `index` may hold genesis Tensors where
`numpy_index` holds the equivalent ndarrays; everything else is shared. The
generator walks the array's dims and picks an index form for each position,
mostly valid (so that results, not only errors, are compared) but with a
steady share of out-of-range ints, masks of the wrong shape, too many
indices, two ellipses and index arrays that do not broadcast, since those
are the cases where the error class must match NumPy's.
"""

import warnings

import numpy as np

import genesis

# (NumPy dtype, genesis dtype). bfloat16 has no NumPy equivalent.
DTYPES = [np.bool_, np.uint8, np.int8, np.int16, np.int32, np.int64, np.float16, np.float32, np.float64]
SIZES = [0, 1, 1, 2, 3, 3, 4, 5]


def random_array(rng, shape=None, dtype=None):
    if shape is None:
        ndim = rng.choice([0, 1, 1, 2, 2, 3, 3, 4, 5])
        shape = tuple(rng.choice(SIZES) for _ in range(ndim))
    dtype = dtype or rng.choice(DTYPES)
    # Small non-negative integers: exact in every dtype, so assignments that
    # cast between dtypes have one right answer.
    values = rng.randrange(1 << 30)
    a = np.random.default_rng(values).integers(0, 6, size=shape)
    return a.astype(dtype)


def _int_value(rng, n, wild):
    if n == 0 or (wild and rng.random() < 0.5):
        return rng.choice([n, -n - 1, n + 3, -n - 5, 0, -1])
    return rng.randrange(-n, n)


def _int_array(rng, n, wild, shape=None):
    if shape is None:
        shape = tuple(rng.choice([0, 1, 2, 3]) for _ in range(rng.choice([0, 1, 1, 1, 2])))
    size = int(np.prod(shape)) if shape else 1
    vals = [_int_value(rng, n, wild and rng.random() < 0.3) for _ in range(size)]
    return np.array(vals, dtype=rng.choice([np.int64, np.int32, np.int16, np.uint8] if n < 128 and
                                           all(v >= 0 for v in vals) else [np.int64, np.int32])).reshape(shape)


def random_index(rng, shape, wild=0.08, genesis_tensors=True):
    """(index, numpy_index) for an array of `shape`."""
    ndim = len(shape)
    items, np_items = [], []
    d = 0
    used_ellipsis = False
    broadcast_shape = None  # one common shape for int arrays, so most cases broadcast

    def add(item, np_item=None):
        items.append(item)
        np_items.append(item if np_item is None else np_item)

    def maybe_tensor(arr):
        if genesis_tensors and rng.random() < 0.5:
            return genesis.tensor(arr), arr
        return arr, arr

    n_items = rng.choice(range(0, ndim + 3))
    for _ in range(n_items):
        is_wild = rng.random() < wild
        remaining = ndim - d
        kind = rng.choice(["int", "int", "slice", "slice", "slice", "ellipsis", "none", "intlist", "boollist",
                           "intarray", "intarray", "mask", "mask", "pybool", "npint", "zerod"])
        if remaining <= 0 and kind not in ("none", "ellipsis", "pybool") and not is_wild:
            kind = rng.choice(["none", "pybool", "ellipsis"])
        n = shape[d] if d < ndim else 1
        if kind == "int":
            add(_int_value(rng, n, is_wild))
            d += 1
        elif kind == "npint":
            add(np.int64(_int_value(rng, n, is_wild)))
            d += 1
        elif kind == "zerod":
            arr = np.array(_int_value(rng, n, is_wild))
            add(*maybe_tensor(arr))
            d += 1
        elif kind == "slice":
            def bound():
                r = rng.random()
                if r < 0.3:
                    return None
                return rng.randrange(-n - 3, n + 4)
            step = rng.choice([None, None, 1, 2, 3, -1, -1, -2, -3])
            add(slice(bound(), bound(), step))
            d += 1
        elif kind == "ellipsis":
            if used_ellipsis and not is_wild:
                add(None)
                continue
            used_ellipsis = True
            add(Ellipsis)
            # The ellipsis takes what later items do not: count those as we go
            # (the items after it index the last dims).
            d = max(d, ndim - rng.randrange(0, max(1, ndim - d + 1)))
        elif kind == "none":
            add(None)
        elif kind == "pybool":
            add(rng.random() < 0.7)
        elif kind == "intlist":
            length = rng.choice([0, 1, 2, 3])
            vals = [_int_value(rng, n, is_wild and rng.random() < 0.3) for _ in range(length)]
            if broadcast_shape is not None and not is_wild and broadcast_shape != (length,):
                vals = list(_int_array(rng, n, False, broadcast_shape).reshape(-1)) if len(broadcast_shape) == 1 \
                    else vals
            add([int(v) for v in vals])
            d += 1
        elif kind == "boollist":
            length = n if not is_wild else rng.choice([0, 1, 2, 3, 4])
            add([rng.random() < 0.5 for _ in range(length)])
            d += 1
        elif kind == "intarray":
            if broadcast_shape is None or is_wild:
                arr = _int_array(rng, n, is_wild)
                broadcast_shape = broadcast_shape or arr.shape
            else:
                arr = _int_array(rng, n, False, broadcast_shape if rng.random() < 0.7 else
                                 tuple(1 for _ in broadcast_shape))
            add(*maybe_tensor(arr))
            d += 1
        elif kind == "mask":
            k = rng.choice([1, 1, 2]) if remaining >= 2 else 1
            k = min(k, max(remaining, 0))
            mshape = tuple(shape[d:d + k]) if k else ()
            if is_wild:
                mshape = tuple(s + rng.choice([0, 1]) for s in mshape) or (rng.choice([1, 2]),)
            mask = np.random.default_rng(rng.randrange(1 << 30)).random(mshape) < 0.5
            add(*maybe_tensor(mask))
            d += max(k, 0)
    if rng.random() < 0.15 and len(items) == 1:
        return items[0], np_items[0]  # a bare item, not a tuple
    return tuple(items), tuple(np_items)


def numpy_call(fn):
    """(result, exception) of fn() under NumPy, with NumPy's announced future
    behaviour: NumPy < 2 only warns (DeprecationWarning "Out of bound index
    found ... In the future the index error will be raised") for an
    out-of-range index when the result is empty; Genesis raises IndexError
    as later NumPy does, so that warning counts as an IndexError here."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        try:
            return fn(), None
        except DeprecationWarning as w:
            if "Out of bound index" in str(w):
                return None, IndexError(str(w))
            warnings.simplefilter("ignore", DeprecationWarning)
            try:
                return fn(), None
            except Exception as e:  # noqa: BLE001
                return None, e
        except Exception as e:  # noqa: BLE001 - the class is what is compared
            return None, e


def numpy_result(a, np_index):
    """(result, exception) of a[np_index] under NumPy."""
    return numpy_call(lambda: a[np_index])


def unique_positions(shape, np_index):
    """True when the positions a[np_index] selects are distinct (assignment
    order does not matter then)."""
    pos = np.arange(int(np.prod(shape)) if shape else 1).reshape(shape)
    sel = np.asarray(pos[np_index])
    return np.unique(sel).size == sel.size


def genesis_source(rng, a):
    """A genesis tensor equal to `a`, often not contiguous (reversed along a
    dim, transposed, or every other element of a larger tensor), so that
    gathers and scatters also run over strided and negatively strided
    inputs."""
    r = rng.random()
    if a.ndim == 0 or r < 0.4:
        return genesis.tensor(a)
    k = rng.randrange(a.ndim)
    pick = tuple(slice(None) for _ in range(k))
    if r < 0.6:
        return genesis.tensor(np.flip(a, axis=k).copy())[pick + (slice(None, None, -1),)]
    if r < 0.8 and a.ndim >= 2:
        return genesis.tensor(a.T.copy()).T
    return genesis.tensor(np.repeat(a, 2, axis=k))[pick + (slice(None, None, 2),)]
