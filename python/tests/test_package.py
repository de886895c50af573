"""The package imports, exposes the seed API names, and maps C++ errors."""

import pytest

import genesis
from genesis import testing

SEED_NAMES = [
    "device", "memory_stats", "empty_cache", "detailed_memory_stats", "cuda", "cpu", "memory_manager",
    "profiler", "memory_profiler", "enable_memory_profiling", "enable_memory_debugging", "set_memory_debug",
    "check_memory_leaks", "allocate_pinned", "is_pinned", "OutOfMemoryError", "CudaError", "dtype",
    "float32", "float16", "bfloat16", "float64", "int8", "int16", "int32", "int64", "uint8", "bool",
]

CUDA_NAMES = [
    "is_available", "device_count", "memory_allocated", "memory_cached", "memory_reserved",
    "max_memory_allocated", "max_memory_cached", "empty_cache", "memory_snapshot", "memory_stats",
    "memory_summary", "set_memory_fraction", "set_cache_size", "synchronize",
    "get_device_name", "get_device_capability", "get_device_properties", "stream", "device",
]


@pytest.mark.parametrize("name", SEED_NAMES)
def test_seed_names_exist(name):
    assert hasattr(genesis, name)


@pytest.mark.parametrize("name", CUDA_NAMES)
def test_cuda_names_exist(name):
    assert callable(getattr(genesis.cuda, name))


def test_error_types_are_runtime_errors():
    assert issubclass(genesis.OutOfMemoryError, RuntimeError)
    assert issubclass(genesis.CudaError, RuntimeError)
    assert not issubclass(genesis.OutOfMemoryError, genesis.CudaError)
    assert genesis.OutOfMemoryError.__module__ == "genesis"
    assert genesis.OutOfMemoryError.__name__ == "OutOfMemoryError"


@pytest.mark.parametrize("kind, expected", [
    ("oom", genesis.OutOfMemoryError),
    ("cuda", genesis.CudaError),
    ("invalid", ValueError),
    ("type", TypeError),
    ("index", IndexError),
    ("error", RuntimeError),
])
def test_cpp_errors_map_to_python_types(kind, expected):
    with pytest.raises(expected) as info:
        testing.raise_cpp_error(kind, "CUDA OOM: message from C++")
    # The C++ message survives, with the location of the check that fired.
    assert "CUDA OOM: message from C++" in str(info.value)
    assert ".cpp:" in str(info.value)


def test_cuda_error_carries_code():
    with pytest.raises(genesis.CudaError) as info:
        testing.raise_cpp_error("cuda")
    assert info.value.code == 2


def test_todo_cuda_hooks_say_not_implemented_until_bound():
    if hasattr(genesis._C, "_cuda_get_device_name"):
        pytest.skip("the CUDA runtime bindings exist now")
    with pytest.raises(NotImplementedError, match="_cuda_get_device_name"):
        genesis.cuda.get_device_name(0)
    with pytest.raises(NotImplementedError, match="_cuda_device_guard"):
        genesis.cuda.device(0)
