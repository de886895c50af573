"""Property tests: no Python input crashes the interpreter; every bad value
becomes a ValueError / TypeError (or CudaError where a GPU is needed), and
good values do what they say (hypothesis)."""

import math

import pytest

hypothesis = pytest.importorskip("hypothesis", reason="hypothesis (python3-hypothesis) is not installed")
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import genesis  # noqa: E402
from genesis.testing import SimulatedAllocator  # noqa: E402

ARG_ERRORS = (ValueError, TypeError, genesis.CudaError)
anything = st.one_of(
    st.text(), st.binary(), st.integers(), st.floats(allow_nan=True, allow_infinity=True), st.none(),
    st.booleans(), st.lists(st.integers(), max_size=3), st.tuples(st.integers(), st.text()),
    st.integers(min_value=-(1 << 80), max_value=1 << 80),
)
device_like = st.one_of(
    anything,
    st.from_regex(r"\A(cpu|cuda)(:-?[0-9]{0,12})?\Z"),
    st.from_regex(r"\Acuda:[0-9]{1,7}\Z"),
)
size_text = st.one_of(
    st.from_regex(r"\A-?[0-9]{0,25}(\.[0-9]{0,5})?\s?(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB|gb|xb)?\Z"),
    st.text(max_size=20),
)

_SIM = SimulatedAllocator("1GiB")


@given(device_like, st.one_of(st.none(), anything))
def test_device_never_crashes(spec, index):
    try:
        d = genesis.device(spec) if index is None else genesis.device(spec, index)
    except ARG_ERRORS:
        return
    assert d.type in ("cpu", "cuda")
    assert genesis.device(str(d)) == d


@given(anything)
def test_dtype_never_crashes(name):
    try:
        dt = genesis.dtype(name)
    except ARG_ERRORS:
        return
    assert dt in genesis.all_dtypes


@given(st.one_of(size_text, anything))
def test_set_cache_size_never_crashes(size):
    try:
        _SIM.set_cache_size(size)
    except ARG_ERRORS:
        return
    expected = 0 if size is None else genesis._C.parse_bytes(size) if isinstance(size, str) else size
    if expected == (1 << 64) - 1:  # SIZE_MAX: no cap, reported as 0
        expected = 0
    assert _SIM.memory_stats().cache_limit == expected
    _SIM.set_cache_size(None)


@given(st.one_of(st.floats(allow_nan=True, allow_infinity=True), anything))
def test_set_memory_fraction_never_crashes(fraction):
    valid = (isinstance(fraction, (int, float)) and not isinstance(fraction, bool)
             and not math.isnan(fraction) and 0 < fraction <= 1)
    try:
        _SIM.set_memory_fraction(fraction)
    except ARG_ERRORS:
        assert not valid
        return
    assert valid
    limit = _SIM.memory_limit()
    # At least a byte: a cap of 0 bytes would read as "no cap".
    assert limit is None if fraction == 1 else limit == max(1, int(fraction * _SIM.capacity))
    _SIM.set_memory_fraction(1.0)


@given(st.one_of(size_text, anything), st.one_of(st.none(), device_like))
def test_cuda_module_never_crashes(value, device):
    for call in (lambda: genesis.cuda.set_cache_size(value, device),
                 lambda: genesis.cuda.set_memory_fraction(value, device),
                 lambda: genesis.cuda.memory_allocated(device),
                 lambda: genesis.cuda.memory_stats(device)):
        try:
            call()
        except ARG_ERRORS:
            pass
    if genesis.cuda.is_available():
        genesis.cuda.set_memory_fraction(1.0)
        genesis.cuda.set_cache_size(None)


@given(st.one_of(st.integers(min_value=0, max_value=1 << 31), st.integers(), size_text, anything))
def test_allocate_and_free_never_crash(nbytes):
    try:
        p = _SIM.allocate(nbytes)
    except (ARG_ERRORS + (genesis.OutOfMemoryError,)):
        return
    try:
        if p:
            assert _SIM.owns(p)
    finally:
        _SIM.free(p)
    assert _SIM.memory_allocated() == 0


@given(st.one_of(st.integers(min_value=-(1 << 70), max_value=1 << 70), anything))
def test_free_of_random_addresses_never_crashes(ptr):
    for free in (_SIM.free, genesis.testing.host_free):
        try:
            free(ptr)
        except ARG_ERRORS:
            pass
    assert _SIM.memory_allocated() == 0


@given(st.one_of(anything, st.dictionaries(st.one_of(st.integers(), size_text), st.integers(), max_size=3),
                 st.lists(st.tuples(st.integers(min_value=-5, max_value=1 << 20), st.integers(-2, 3)),
                          max_size=3)))
def test_warmup_never_crashes(sizes):
    try:
        _SIM.warmup(sizes)
    except (ARG_ERRORS + (genesis.OutOfMemoryError,)):
        pass
    assert _SIM.memory_allocated() == 0


@given(anything)
def test_module_functions_never_crash(value):
    for call in (lambda: genesis.memory_stats(value), lambda: genesis.is_pinned(value),
                 lambda: genesis.check_memory_leaks(value), lambda: genesis.memory_manager.compact(value),
                 lambda: genesis.memory_manager.collect_garbage(value),
                 lambda: genesis.enable_memory_profiling(value)):
        try:
            call()
        except ARG_ERRORS:
            pass
    genesis.enable_memory_profiling(False)


def _not_a_positive_size(value):
    """True unless allocate_pinned would accept `value` (hypothesis's text()
    can produce '1' or ' 7 ', which are valid sizes and must not be fed to a
    test of refusals)."""
    from genesis._sizes import to_bytes
    try:
        return to_bytes(value, "nbytes") == 0
    except (ValueError, TypeError, OverflowError):
        return True


@given(st.one_of(st.text(), st.binary(), st.floats(), st.none(), st.booleans(),
                 st.integers(max_value=0), st.integers(min_value=1 << 64)).filter(_not_a_positive_size))
def test_allocate_pinned_rejects_bad_sizes(value):
    # Only values that must be refused: a valid size would pin real memory.
    with pytest.raises(ARG_ERRORS):
        genesis.allocate_pinned(value)
