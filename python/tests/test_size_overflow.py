"""Sizes beyond int64 raise ValueError instead of wrapping into small, valid
looking sizes (Note [Size overflow] in include/genesis/core/checked_math.h)."""

import numpy as np
import pytest

import genesis

MAX = 2**63 - 1


def test_creation_with_too_many_elements():
    with pytest.raises(ValueError, match=r"shape \[4294967296, 4294967296, 4294967296\] has more than 2\^63-1 elements"):
        genesis.zeros(2**32, 2**32, 2**32)
    for make in (genesis.empty, genesis.ones, genesis.rand, genesis.randn):
        with pytest.raises(ValueError, match="more than 2\\^63-1 elements"):
            make(2**32, 2**32, 2)
    with pytest.raises(ValueError, match="more than 2\\^63-1 elements"):
        genesis.full((2**40, 2**40), 1.0)
    with pytest.raises(ValueError, match="byte size overflows"):
        genesis.empty(2**62, dtype=genesis.float64)
    # The error names the shape asked for and its element count, not the flat
    # storage behind the tensor or a C++ function.
    for make in (genesis.zeros, genesis.empty, genesis.ones):
        with pytest.raises(ValueError) as info:
            make(2**31, 2**31)
        assert str(info.value) == ("shape [2147483648, 2147483648] (4611686018427387904 elements of 4 bytes) is too "
                                   "large: its byte size overflows 2^63-1")
    # Zero elements, but the other sizes multiply past 2^63-1.
    with pytest.raises(ValueError, match="nonzero sizes multiply"):
        genesis.empty(0, 2**62, 4)
    assert genesis.empty(0, 2**30, 4).numel() == 0


def test_expand_beyond_int64():
    with pytest.raises(ValueError, match=r"\[4611686018427387904, 2\] has more than 2\^63-1 elements"):
        genesis.ones(2).expand(2**62, 2)
    with pytest.raises(ValueError, match="byte size overflows"):
        genesis.ones(2).expand(2**61, 2)
    big = genesis.ones(2, dtype=genesis.uint8).expand(2**40, 2)
    assert big.numel() == 2**41 and big.shape == (2**40, 2)
    assert float(genesis.ones(1).expand(5).sum()) == 5.0


def test_narrow_past_int64():
    x = genesis.arange(10)
    with pytest.raises(ValueError, match="exceeds dimension size"):
        x.narrow(0, 5, MAX - 3)
    with pytest.raises(ValueError, match="exceeds dimension size"):
        x.narrow(0, 1, MAX)
    assert x.narrow(0, 7, 3).tolist() == [7, 8, 9]


@pytest.mark.parametrize("index", [
    slice(None, None, 2**62), slice(None, None, -2**62), slice(MAX, None), slice(-MAX, MAX), slice(1, None, MAX),
    slice(-2**63, None, 3), slice(None, None, 2**70), slice(2**70, None), slice(-2**70, 2**70, -1),
])
def test_slices_with_huge_bounds_match_numpy(index):
    a = np.arange(20).reshape(10, 2)
    t = genesis.tensor(a)
    assert t[index].tolist() == a[index].tolist()
    assert t[:, index].tolist() == a[:, index].tolist()


def test_split_chunk_and_cat():
    x = genesis.arange(5)
    assert [p.tolist() for p in x.split(MAX)] == [[0, 1, 2, 3, 4]]
    assert len(x.chunk(MAX)) == 5
    long_dim = genesis.ones(1, dtype=genesis.uint8).expand(2**62 + 5)
    parts = long_dim.split(2**62)
    assert [p.numel() for p in parts] == [2**62, 5]
    with pytest.raises(ValueError, match="sum to more than 2\\^63-1"):
        long_dim.split([MAX, MAX])
    a = genesis.ones(1, 1, dtype=genesis.uint8).expand(2**62, 1)
    with pytest.raises(ValueError, match="add up to more than 2\\^63-1"):
        genesis.cat([a, a])
    with pytest.raises(ValueError, match="more than 2\\^63-1 elements"):
        genesis.stack([a, a], 1)


def test_arange_lengths():
    with pytest.raises(ValueError, match="more than 2\\^63-1 elements"):
        genesis.arange(-2**63, MAX)
    with pytest.raises(ValueError, match="more than 2\\^63-1 elements"):
        genesis.arange(-1e300, 1e300)
    # b - a does not fit in int64, the count does; values computed exactly.
    assert genesis.arange(-2**63, MAX, 2**62).tolist() == [-2**63, -2**62, 0, 2**62]
    np.testing.assert_array_equal(genesis.arange(-2**62, 2**62, 2**61).numpy(),
                                  np.arange(-2**62, 2**62, 2**61, dtype=np.int64))


def test_view_and_reshape():
    x = genesis.arange(12)
    with pytest.raises(ValueError, match="is invalid for input of size 12"):
        x.view(2**32, 2**32, -1)
    with pytest.raises(ValueError, match="is invalid for input of size 12"):
        x.reshape(2**32, 2**32, 2**32)
    with pytest.raises(ValueError, match="nonzero sizes multiply"):
        genesis.zeros(0).view(0, 2**62, 4)


def test_matmul_batch_and_index_plans():
    a = genesis.ones(1, 1, 1, 1).expand(2**32, 1, 1, 1)
    b = genesis.ones(1, 1, 1, 1).expand(1, 2**32, 1, 1)
    with pytest.raises(ValueError, match="more than 2\\^63-1 elements"):
        genesis.matmul(a, b)
    y = genesis.ones(1, 1, 1, dtype=genesis.uint8).expand(2**32, 2**29, 2)
    # Index expressions report as NumPy's IndexError (python/src/py_tensor_index.cpp).
    with pytest.raises(IndexError, match=r"\[4294967296, 536870912, 16\] has more than 2\^63-1 elements"):
        y[:, :, genesis.zeros(16, dtype=genesis.int64)]
