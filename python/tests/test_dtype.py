"""genesis dtypes: names, sizes, parsing through C++ dtype_from_name."""

import copy
import pickle

import pytest

import genesis

EXPECTED = {
    "float32": (4, True), "float16": (2, True), "bfloat16": (2, True), "float64": (8, True),
    "int8": (1, False), "int16": (2, False), "int32": (4, False), "int64": (8, False),
    "uint8": (1, False), "bool": (1, False),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_dtype_attributes(name):
    dt = getattr(genesis, name)
    assert dt.name == name
    assert (dt.itemsize, dt.is_floating_point) == EXPECTED[name]
    assert repr(dt) == f"genesis.{name}"
    assert str(dt) == f"genesis.{name}"
    assert genesis.dtype(name) is dt


def test_all_dtypes_distinct_and_ordered():
    assert len(genesis.all_dtypes) == 10
    assert len(set(genesis.all_dtypes)) == 10
    assert genesis.all_dtypes[0] is genesis.bool
    assert genesis.all_dtypes[-1] is genesis.float64


@pytest.mark.parametrize("alias, target", [
    ("half", "float16"), ("float", "float32"), ("double", "float64"), ("long", "int64"),
    ("int", "int32"), ("bf16", "bfloat16"), ("fp16", "float16"), ("torch.float16", "float16"),
    ("genesis.int8", "int8"), ("byte", "uint8"),
])
def test_aliases_parse(alias, target):
    assert genesis.dtype(alias) is getattr(genesis, target)


def test_module_aliases():
    assert genesis.half is genesis.float16
    assert genesis.double is genesis.float64
    assert genesis.long is genesis.int64


def test_equality_and_hash():
    assert genesis.float16 == genesis.dtype("float16")
    assert genesis.float16 != genesis.bfloat16
    assert genesis.float16 != "float16"
    assert len({genesis.float16, genesis.dtype("half"), genesis.float32}) == 2


def test_unknown_name_is_value_error_listing_names():
    with pytest.raises(ValueError, match="unknown dtype 'complex64'.*float32"):
        genesis.dtype("complex64")


def test_non_string_is_type_error():
    with pytest.raises(TypeError):
        genesis.dtype(3)


def test_immutable_and_singleton_through_copies():
    with pytest.raises(AttributeError):
        genesis.float32.itemsize = 8
    assert pickle.loads(pickle.dumps(genesis.bfloat16)) is genesis.bfloat16
    assert copy.deepcopy(genesis.int8) is genesis.int8
    assert genesis.dtype(genesis.int8) is genesis.int8
