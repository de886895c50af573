"""The package imports, exposes its public API names, and maps C++ errors."""

import errno

import pytest

import genesis
from genesis import testing

PUBLIC_NAMES = [
    "device", "memory_stats", "empty_cache", "detailed_memory_stats", "cuda", "cpu", "memory_manager",
    "profiler", "memory_profiler", "enable_memory_profiling", "enable_memory_debugging", "set_memory_debug",
    "check_memory_leaks", "allocate_pinned", "is_pinned", "OutOfMemoryError", "CudaError", "dtype",
    "float32", "float16", "bfloat16", "float64", "int8", "int16", "int32", "int64", "uint8", "bool",
    "Storage", "StorageView", "SharedStorage", "MappedStorage", "BatchStorage", "create_storage", "convert_dtype",
    "copy_storage", "aligned_storage", "inspect_storage", "StorageTracker",
]

CUDA_NAMES = [
    "is_available", "device_count", "memory_allocated", "memory_cached", "memory_reserved",
    "max_memory_allocated", "max_memory_cached", "empty_cache", "memory_snapshot", "memory_stats",
    "memory_summary", "set_memory_fraction", "set_cache_size", "synchronize",
    "get_device_name", "get_device_capability", "get_device_properties", "stream", "device",
    "Stream", "Event", "current_stream", "default_stream", "set_stream", "set_device", "can_device_access_peer",
    "ipc_shareable_storage",
]


@pytest.mark.parametrize("name", PUBLIC_NAMES)
def test_public_names_exist(name):
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
    ("oom", (genesis.OutOfMemoryError, RuntimeError)),
    ("cuda", (genesis.CudaError, RuntimeError)),
    ("invalid", (genesis.InvalidArgumentError, ValueError, RuntimeError)),
    ("type", (genesis.TypeMismatchError, TypeError, RuntimeError)),
    ("zero", (genesis.DivisionByZeroError, ZeroDivisionError, RuntimeError)),
    ("index", (IndexError,)),
    ("error", (RuntimeError,)),
])
def test_cpp_errors_map_to_python_types(kind, expected):
    with pytest.raises(expected[0]) as info:
        testing.raise_cpp_error(kind, "CUDA OOM: message from C++")
    for cls in expected:
        assert isinstance(info.value, cls)
    # The C++ message survives unchanged; the location of the check that
    # fired is an attribute, not part of what a Python user reads.
    assert str(info.value) == "CUDA OOM: message from C++"
    assert info.value.cpp_location.startswith("py_errors.cpp:")


def test_file_errors_are_the_oserror_of_their_errno():
    # OSError(errno, ...) picks the subclass, as open() does; the message
    # keeps C++'s text with strerror appended, and no location.
    with pytest.raises(FileNotFoundError) as info:
        testing.raise_cpp_error("file", "cannot open trace 'missing.bin'")
    assert info.value.errno == errno.ENOENT
    assert str(info.value) == "[Errno 2] cannot open trace 'missing.bin': No such file or directory"
    assert info.value.cpp_location.startswith("py_errors.cpp:")


def test_messages_that_are_not_utf8_still_raise_their_error():
    # A path with bytes that are not UTF-8 ends up in a message; the error
    # must still be the one raised, not a UnicodeDecodeError.
    with pytest.raises(genesis.InvalidArgumentError, match="bad \ufffd path"):
        testing.raise_cpp_error("invalid", b"bad \xff path")


def test_cuda_error_carries_code():
    with pytest.raises(genesis.CudaError) as info:
        testing.raise_cpp_error("cuda")
    assert info.value.code == 2


def test_cuda_runtime_hooks_are_bound():
    # Every CUDA runtime name of genesis._C is a real binding, not a placeholder.
    for name in ("cuda_get_device_name", "cuda_get_device_capability", "cuda_get_device_properties",
                 "CudaStream", "CudaEvent", "CudaStreamGuard", "CudaDeviceGuard"):
        assert hasattr(genesis._C, name)
