"""Shapes and dims given as sequences that make their items as
they are asked for (range, NumPy arrays, a class with __getitem__), not only
lists and tuples whose items live in the container. Each item must stay
alive while it is read: the asan-py stage runs these under AddressSanitizer,
where reading a freed item is reported."""

import numpy as np
import pytest

import genesis


class MadeOnDemand:
    """A sequence whose every item is a new object, freed when dropped."""

    def __init__(self, values):
        self.values = list(values)

    def __len__(self):
        return len(self.values)

    def __getitem__(self, i):
        if i >= len(self.values):
            raise IndexError(i)
        return np.int64(self.values[i])  # a new object on every call


# range(1000, 1002) makes ints above the interpreter's cached small ones.
@pytest.mark.parametrize("make", [lambda v: range(v[0], v[-1] + 1), np.array, MadeOnDemand],
                         ids=["range", "numpy", "on-demand"])
def test_view_and_reshape_take_shapes_from_any_sequence(make):
    shape = [1000, 1001]
    t = genesis.arange(1000 * 1001)
    assert t.view(make(shape)).shape == (1000, 1001)
    assert t.reshape(make(shape)).shape == (1000, 1001)
    assert genesis.zeros(make(shape)).shape == (1000, 1001)


def test_permute_takes_dims_from_any_sequence():
    a = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    t = genesis.tensor(a)
    assert t.permute(np.array([2, 0, 1])).shape == (4, 2, 3)
    assert t.permute(MadeOnDemand([1, 2, 0])).shape == (3, 4, 2)

