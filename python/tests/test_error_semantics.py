"""Wrong results that are errors in NumPy and PyTorch, and how errors reach
Python (Note [Errors] in include/genesis/core/error.h).

- integer division by zero (// % fmod div(rounding_mode=...)) raises
  genesis.DivisionByZeroError (a ZeroDivisionError and a RuntimeError, as
  PyTorch's "RuntimeError: ZeroDivisionError") instead of returning 0;
- bitwise operators are bitwise on integers (as NumPy) and refuse floating
  tensors (genesis.TypeMismatchError: a TypeError and a RuntimeError),
  instead of returning a logical result;
- invalid arguments (shapes, ...) raise genesis.InvalidArgumentError, both a
  ValueError and a RuntimeError;
- messages carry no C++ source location unless GENESIS_DEBUG_ERRORS=1; the
  location is the exception's ``cpp_location``.
"""

import re
import subprocess
import sys

import numpy as np
import pytest

import genesis

INT_DTYPES = ["uint8", "int8", "int16", "int32", "int64"]
FLOAT_DTYPES = ["float16", "bfloat16", "float32", "float64"]
RNG = np.random.default_rng(1234)


def g(dtype):
    return getattr(genesis, dtype)


def ints(dtype, shape, low=None, high=None, nonzero=False):
    info = np.iinfo(dtype)
    lo = max(info.min, -1000) if low is None else low
    hi = min(info.max, 1000) if high is None else high
    a = RNG.integers(lo, hi, size=shape, endpoint=True).astype(dtype)
    if nonzero:
        a[a == 0] = 1
    return a


# ------------------------------------------------------ division by zero ---

DIVISIONS = {
    "//": lambda a, b: a // b,
    "%": lambda a, b: a % b,
    "floor_divide": lambda a, b: genesis.floor_divide(a, b),
    "remainder": lambda a, b: genesis.remainder(a, b),
    "fmod": lambda a, b: genesis.fmod(a, b),
    "div trunc": lambda a, b: genesis.div(a, b, rounding_mode="trunc"),
    "div floor": lambda a, b: genesis.div(a, b, rounding_mode="floor"),
    "method fmod": lambda a, b: a.fmod(b) if isinstance(a, genesis.Tensor) else genesis.fmod(a, b),
}


@pytest.mark.parametrize("dtype", INT_DTYPES)
@pytest.mark.parametrize("op", sorted(DIVISIONS))
def test_integer_division_by_zero_raises(dtype, op):
    fn = DIVISIONS[op]
    a = genesis.tensor(ints(dtype, (50,)))
    divisor = ints(dtype, (50,), nonzero=True)
    divisor[17] = 0
    for b in (0, genesis.tensor(divisor), genesis.zeros(1, dtype=g(dtype))):
        with pytest.raises(genesis.DivisionByZeroError) as info:
            fn(a, b)
        err = info.value
        assert isinstance(err, ZeroDivisionError) and isinstance(err, RuntimeError)
        assert "division by zero" in str(err)
    # A zero divisor tensor with a scalar dividend (the reflected operators).
    with pytest.raises(ZeroDivisionError):
        fn(7, genesis.tensor(divisor))


def test_zero_divisor_large_and_strided():
    # The check sees every element, also of a large (threaded) or strided divisor.
    b = genesis.ones(1 << 18, dtype=genesis.int32)
    b[(1 << 18) - 1] = 0
    with pytest.raises(ZeroDivisionError):
        genesis.ones(1 << 18, dtype=genesis.int32) // b
    m = genesis.ones(64, 64, dtype=genesis.int64)
    m[63, 0] = 0
    with pytest.raises(ZeroDivisionError):
        genesis.ones(64, 64, dtype=genesis.int64) % m.t()
    # Broadcast: the zero is used for a whole row.
    with pytest.raises(ZeroDivisionError):
        genesis.ones(4, 3, dtype=genesis.int16) // genesis.tensor([1, 0, 2], dtype=genesis.int16)


def test_a_scalar_that_wraps_to_zero_raises():
    # 256 is 0 in uint8, the compute dtype of uint8 // python int.
    with pytest.raises(ZeroDivisionError):
        genesis.tensor([5], dtype=genesis.uint8) // 256


def test_empty_tensors_and_nonzero_divisors_do_not_raise():
    assert (genesis.zeros(0, dtype=genesis.int32) // genesis.zeros(0, dtype=genesis.int32)).numel() == 0
    assert (genesis.zeros(0, dtype=genesis.int32) // 0).numel() == 0
    assert (genesis.tensor([5]) // 2).tolist() == [2]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_float_division_by_zero_follows_ieee(dtype):
    a = genesis.tensor([1.0, -1.0, 0.0], dtype=g(dtype))
    assert (a // 0).to(genesis.float32).tolist()[:2] == [float("inf"), float("-inf")]
    assert np.isnan((a % 0).to(genesis.float32).numpy()).all()
    assert np.isnan(genesis.fmod(a, 0.0).to(genesis.float32).numpy()).all()
    q = genesis.div(a, 0.0, rounding_mode="trunc").to(genesis.float32).tolist()
    assert q[:2] == [float("inf"), float("-inf")] and np.isnan(q[2])


@pytest.mark.parametrize("dtype", INT_DTYPES)
def test_integer_division_matches_numpy(dtype):
    a_np = ints(dtype, (400,))
    b_np = ints(dtype, (400,), nonzero=True)
    if np.issubdtype(np.dtype(dtype), np.signedinteger):
        keep = ~((a_np == np.iinfo(dtype).min) & (b_np == -1))  # overflow: NumPy warns
        a_np, b_np = a_np[keep], b_np[keep]
    a, b = genesis.tensor(a_np), genesis.tensor(b_np)
    np.testing.assert_array_equal((a // b).numpy(), a_np // b_np)
    np.testing.assert_array_equal((a % b).numpy(), a_np % b_np)
    np.testing.assert_array_equal(genesis.fmod(a, b).numpy(), np.fmod(a_np, b_np))
    trunc = (np.abs(a_np.astype(np.int64)) // np.abs(b_np.astype(np.int64))) * np.sign(a_np) * np.sign(b_np)
    np.testing.assert_array_equal(genesis.div(a, b, rounding_mode="trunc").numpy(), trunc.astype(dtype))
    np.testing.assert_array_equal(genesis.div(a, b, rounding_mode="floor").numpy(), a_np // b_np)
    assert (a // b).dtype == g(dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_float_fmod_and_rounding_modes_match_numpy(dtype):
    a_np = RNG.uniform(-50, 50, 300).astype(dtype)
    b_np = RNG.uniform(-7, 7, 300).astype(dtype)
    a, b = genesis.tensor(a_np), genesis.tensor(b_np)
    np.testing.assert_array_equal(genesis.fmod(a, b).numpy(), np.fmod(a_np, b_np))
    np.testing.assert_array_equal(genesis.div(a, b, rounding_mode="trunc").numpy(), np.trunc(a_np / b_np))
    np.testing.assert_array_equal(genesis.div(a, b, rounding_mode="floor").numpy(), a_np // b_np)
    np.testing.assert_array_equal(genesis.div(a, b, rounding_mode=None).numpy(), a_np / b_np)
    np.testing.assert_array_equal(a.div(b, rounding_mode="trunc").numpy(), np.trunc(a_np / b_np))


def test_div_rounding_mode_is_checked():
    with pytest.raises(ValueError, match="rounding_mode"):
        genesis.div(genesis.ones(2), 2, rounding_mode="round")


def test_integer_true_division_by_zero_is_ieee():
    # Without a rounding mode the quotient is floating: inf / nan, no error (NumPy, PyTorch).
    q = genesis.tensor([1, 0]) / 0
    assert q.dtype == genesis.float32 and q.tolist()[0] == float("inf") and np.isnan(q.tolist()[1])


# ----------------------------------------------------------- bitwise ops ---

BITWISE = {
    "&": (lambda a, b: a & b, np.bitwise_and),
    "|": (lambda a, b: a | b, np.bitwise_or),
    "^": (lambda a, b: a ^ b, np.bitwise_xor),
    "bitwise_and": (lambda a, b: genesis.bitwise_and(a, b), np.bitwise_and),
    "bitwise_or": (lambda a, b: genesis.bitwise_or(a, b), np.bitwise_or),
    "bitwise_xor": (lambda a, b: genesis.bitwise_xor(a, b), np.bitwise_xor),
}


@pytest.mark.parametrize("dtype", INT_DTYPES + ["bool"])
@pytest.mark.parametrize("op", sorted(BITWISE))
def test_bitwise_matches_numpy(dtype, op):
    ours, ref = BITWISE[op]
    if dtype == "bool":
        a_np, b_np = RNG.integers(0, 2, 64).astype(bool), RNG.integers(0, 2, 64).astype(bool)
    else:
        a_np, b_np = ints(dtype, (64,), low=np.iinfo(dtype).min, high=np.iinfo(dtype).max), ints(dtype, (64,))
    a, b = genesis.tensor(a_np), genesis.tensor(b_np)
    got = ours(a, b)
    assert got.dtype == g(dtype)
    np.testing.assert_array_equal(got.numpy(), ref(a_np, b_np))
    # With a Python scalar, on either side (weak scalar: the tensor's dtype).
    s = True if dtype == "bool" else 5
    np.testing.assert_array_equal(ours(a, s).numpy(), ref(a_np, np.array(s, dtype=dtype)))
    np.testing.assert_array_equal(ours(s, a).numpy(), ref(np.array(s, dtype=dtype), a_np))


def test_bitwise_promotes_like_numpy():
    a = genesis.tensor([1, 2, 3], dtype=genesis.int8)
    b = genesis.tensor([3, 3, 3], dtype=genesis.int64)
    assert (a & b).dtype == genesis.int64
    assert (genesis.tensor([True, False]) | genesis.tensor([4, 4])).tolist() == [5, 4]


@pytest.mark.parametrize("dtype", INT_DTYPES + ["bool"])
def test_bitwise_not_matches_numpy(dtype):
    a_np = (RNG.integers(0, 2, 64).astype(bool) if dtype == "bool"
            else ints(dtype, (64,), low=np.iinfo(dtype).min, high=np.iinfo(dtype).max))
    a = genesis.tensor(a_np)
    np.testing.assert_array_equal((~a).numpy(), np.invert(a_np))
    np.testing.assert_array_equal(genesis.bitwise_not(a).numpy(), np.invert(a_np))
    assert (~a).dtype == g(dtype)


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16", "int32", "int64"])
def test_shifts_match_numpy(dtype):
    bits = np.dtype(dtype).itemsize * 8
    info = np.iinfo(dtype)
    a_np = ints(dtype, (bits + 8,), low=info.min, high=info.max)
    counts = np.arange(bits + 8) % (bits + 4)  # in range, and past the width
    c_np = counts.astype(dtype)
    a, c = genesis.tensor(a_np), genesis.tensor(c_np)
    np.testing.assert_array_equal((a << c).numpy(), np.left_shift(a_np, c_np))
    np.testing.assert_array_equal((a >> c).numpy(), np.right_shift(a_np, c_np))
    np.testing.assert_array_equal(genesis.bitwise_left_shift(a, 3).numpy(), np.left_shift(a_np, np.array(3, dtype)))
    np.testing.assert_array_equal(genesis.bitwise_right_shift(a, 3).numpy(), np.right_shift(a_np, np.array(3, dtype)))
    if info.min < 0:  # negative counts: NumPy gives 0, or -1 for a negative value shifted right
        neg = np.full_like(a_np, -1)
        np.testing.assert_array_equal((a << genesis.tensor(neg)).numpy(), np.left_shift(a_np, neg))
        np.testing.assert_array_equal((a >> genesis.tensor(neg)).numpy(), np.right_shift(a_np, neg))


def test_inplace_bitwise_operators():
    a_np = ints("int32", (20,))
    a = genesis.tensor(a_np)
    a &= 0xF0
    a |= 3
    a ^= 5
    a <<= 2
    a >>= 1
    expect = ((((a_np & 0xF0) | 3) ^ 5) << 2) >> 1
    np.testing.assert_array_equal(a.numpy(), expect)


FLOAT_REFUSALS = {
    "&": ("bitwise_and", lambda a, b: a & b),
    "|": ("bitwise_or", lambda a, b: a | b),
    "^": ("bitwise_xor", lambda a, b: a ^ b),
    "<<": ("bitwise_left_shift", lambda a, b: a << b),
    ">>": ("bitwise_right_shift", lambda a, b: a >> b),
    "bitwise_and": ("bitwise_and", lambda a, b: genesis.bitwise_and(a, b)),
}


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("op", sorted(FLOAT_REFUSALS))
def test_bitwise_on_floating_tensors_raises(dtype, op):
    name, fn = FLOAT_REFUSALS[op]
    f = genesis.tensor([1.5, 2.0], dtype=g(dtype))
    i = genesis.tensor([1, 2])
    for a, b in ((f, f), (f, i), (i, f), (f, 1), (i, 1.5)):
        with pytest.raises(TypeError) as info:
            fn(a, b)
        assert isinstance(info.value, RuntimeError)
        msg = str(info.value)
        assert name in msg and "integer" in msg, msg
    with pytest.raises(TypeError, match=f"bitwise_not is only defined for integer and bool tensors, got {dtype}"):
        ~f


def test_float_bitwise_message_names_the_dtype():
    with pytest.raises(genesis.TypeMismatchError,
                       match=r"bitwise_and is only defined for integer and bool operands, got float32 and float32"):
        genesis.ones(2) & genesis.ones(2)
    # The operand that made the dtype floating is named, not only the result.
    with pytest.raises(genesis.TypeMismatchError,
                       match=r"got int32 and a float \(float32 together\)"):
        genesis.tensor([1, 2], dtype=genesis.int32) & 1.5


def test_shifts_refuse_bool():
    with pytest.raises(TypeError, match="bitwise_left_shift is only defined for integer operands, got bool and bool"):
        genesis.tensor([True]) << genesis.tensor([True])


def test_logical_ops_still_take_any_dtype():
    f = genesis.tensor([0.0, 1.5, 2.0])
    assert genesis.logical_and(f, f).tolist() == [False, True, True]
    assert genesis.logical_not(f).tolist() == [True, False, False]


# ------------------------------------------------------- exception types ---

def test_invalid_arguments_are_value_and_runtime_errors():
    with pytest.raises(genesis.InvalidArgumentError) as info:
        genesis.ones(2, 3) + genesis.ones(4)
    assert isinstance(info.value, ValueError) and isinstance(info.value, RuntimeError)
    with pytest.raises(RuntimeError):   # what PyTorch users catch
        genesis.ones(2, 3).reshape(4, 4)
    with pytest.raises(ValueError):     # what NumPy users catch
        genesis.ones(2, 3).reshape(4, 4)


def test_type_mismatches_are_type_and_runtime_errors():
    with pytest.raises(genesis.TypeMismatchError) as info:
        genesis.matmul(genesis.ones(2, 2), genesis.ones(2, 2, dtype=genesis.float64))
    assert isinstance(info.value, TypeError) and isinstance(info.value, RuntimeError)


def test_exception_classes_are_public():
    assert issubclass(genesis.InvalidArgumentError, ValueError)
    assert issubclass(genesis.InvalidArgumentError, RuntimeError)
    assert issubclass(genesis.TypeMismatchError, TypeError)
    assert issubclass(genesis.TypeMismatchError, RuntimeError)
    assert issubclass(genesis.DivisionByZeroError, ZeroDivisionError)
    assert issubclass(genesis.DivisionByZeroError, RuntimeError)
    for cls in (genesis.InvalidArgumentError, genesis.TypeMismatchError, genesis.DivisionByZeroError):
        assert cls.__module__ == "genesis"


LOCATION = re.compile(r"\[[\w.]+\.(cpp|cu|h|cuh):\d+\]")


def test_messages_have_no_cpp_location():
    with pytest.raises(ValueError) as info:
        genesis.ones(2, 3) + genesis.ones(4)
    msg = str(info.value)
    assert not LOCATION.search(msg), msg
    assert msg.startswith("shapes [2, 3] and [4] cannot be broadcast")
    assert re.fullmatch(r"[\w.]+\.(cpp|cu|h|cuh):\d+", info.value.cpp_location), info.value.cpp_location
    with pytest.raises(IndexError) as info:
        genesis.ones(3).sum(dim=5)
    assert not LOCATION.search(str(info.value))
    assert info.value.cpp_location


def test_index_errors_have_no_cpp_location():
    x = genesis.zeros(3, 4)
    for bad in (lambda: x[[0, 1], [0, 1, 2]], lambda: x._index_plan(([0, 1], [0, 1, 2]))):
        with pytest.raises(IndexError) as info:
            bad()
        assert str(info.value) == "shapes [2] and [3] cannot be broadcast together (dimension 0: 2 vs 3)"
        assert re.fullmatch(r"[\w.]+\.(cpp|cu|h|cuh):\d+", info.value.cpp_location), info.value.cpp_location
    with pytest.raises(IndexError) as info:
        x[[0, 1], [0, 1, 2]] = 1.0
    assert not LOCATION.search(str(info.value)) and info.value.cpp_location


def test_narrow_says_a_length_must_be_non_negative():
    with pytest.raises(ValueError, match="^narrow: length must be non-negative, got -1$"):
        genesis.zeros(4).narrow(0, 0, -1)
    assert genesis.arange(4).narrow(0, 1, 0).tolist() == []


@pytest.mark.parametrize("value", ["a", None, object(), 1 + 2j, {1}])
def test_setitem_names_the_value_and_what_it_accepts(value):
    x = genesis.zeros(3)
    with pytest.raises(TypeError) as info:
        x[0] = value
    msg = str(info.value)
    assert msg.startswith("x[index] = value: value must be a number, a genesis.Tensor, a NumPy array"), msg
    assert msg.endswith(f"got {type(value).__name__}"), msg
    assert "genesis.tensor()" not in msg and "from_numpy" not in msg
    with pytest.raises(TypeError, match="^x\\[index\\] = value: elements must be numbers"):
        x[:] = [value, 1, 2]
    assert x.tolist() == [0.0, 0.0, 0.0]


def test_setitem_takes_numpy_arrays_of_every_integer_and_float_dtype():
    x = genesis.zeros(3, dtype=genesis.float64)
    ref = np.zeros(3)
    for dt in (np.uint16, np.uint32, np.uint64, np.longdouble, ">i4", ">f8"):
        v = np.arange(1, 4).astype(dt)
        x[:] = v
        ref[:] = v
        assert np.array_equal(x.numpy(), ref), dt
    with pytest.raises(ValueError, match="does not fit in int64"):
        x[:] = np.array([2**64 - 1, 0, 0], dtype=np.uint64)
    with pytest.raises(TypeError, match="^x\\[index\\] = value: cannot assign a NumPy array of dtype complex64"):
        x[:] = np.zeros(3, dtype=np.complex64)


def test_debug_errors_keeps_the_location():
    code = ("import genesis\n"
            "try:\n"
            "    genesis.ones(2, 3) + genesis.ones(4)\n"
            "except ValueError as e:\n"
            "    print(str(e))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**__import__("os").environ, "GENESIS_DEBUG_ERRORS": "1"})
    assert out.returncode == 0, out.stderr
    assert LOCATION.search(out.stdout), out.stdout
