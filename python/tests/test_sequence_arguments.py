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



# Made by each test, not at collection: tensors alive for the whole session
# would show in other tests' memory statistics.
@pytest.mark.parametrize("make_size", [lambda: genesis.tensor(3), lambda: np.array(3),
                                       lambda: genesis.tensor(3, dtype=genesis.uint8),
                                       lambda: np.array(3, dtype=np.int16)],
                         ids=["tensor", "ndarray", "uint8-tensor", "int16-array"])
def test_a_0d_integer_tensor_or_array_is_one_size(make_size):
    size = make_size()
    for make in (genesis.zeros, genesis.ones, genesis.empty, genesis.rand, genesis.randn):
        assert make(size).shape == (3,)
        assert make(2, size).shape == (2, 3)
    assert genesis.full(size, 7).tolist() == [7, 7, 7]
    assert genesis.randint(0, 5, size).shape == (3,)
    assert genesis.arange(3).view(size).shape == (3,)
    assert genesis.arange(6).view(2, size).shape == (2, 3)
    assert genesis.arange(3).reshape(size).shape == (3,)
    assert genesis.ones(1).expand(size).tolist() == [1.0, 1.0, 1.0]
    assert genesis.zeros(genesis.tensor([2, 3])).shape == (2, 3)  # a 1-d tensor is a sequence of sizes


@pytest.mark.parametrize("make_size", [lambda: genesis.tensor(2.0), lambda: np.array(2.0),
                                       lambda: genesis.tensor(True)],
                         ids=["float-tensor", "float-array", "bool-tensor"])
def test_a_0d_non_integer_tensor_is_not_a_size(make_size):
    size = make_size()
    dtype = size.dtype.name if hasattr(size.dtype, "name") else str(size.dtype)
    pattern = f"size must be an int or a sequence of ints, got a 0-d {dtype} "
    for call in (lambda: genesis.zeros(size), lambda: genesis.ones(size), lambda: genesis.empty(size),
                 lambda: genesis.zeros(2).view(size), lambda: genesis.ones(1).expand(size),
                 lambda: genesis.full(size, 1.0)):
        with pytest.raises(TypeError, match=pattern):
            call()


def test_a_0d_tensor_is_not_a_sequence_of_storages():
    with pytest.raises(TypeError, match="storages must be a sequence of genesis.Storage, got Tensor"):
        genesis.BatchStorage(genesis.tensor(1.0))
