"""Instances of genesis._C classes made by __new__ without __init__ (Note
[Uninitialised instances] in python/src/py_new_guard.cpp). Such an object has
no C++ part: genesis._C.Allocator.__new__(genesis._C.Allocator).stats() used
to kill the process. Every class, found at run time so that new ones are
covered, must refuse every way of calling __new__ alone with a TypeError;
should one get through, each of its methods and properties is called with no
and simple arguments. All of it runs in a child process, so that a crash is a
test failure instead of a crashed test run."""

import json
import subprocess
import sys
import textwrap

import pytest

import genesis

CHILD = textwrap.dedent(r"""
    import json, sys
    import genesis
    from genesis import _C

    SKIP = {"__class__", "__new__", "__init__", "__init_subclass__", "__subclasshook__", "__del__", "__getattribute__",
            "__setattr__", "__delattr__", "__dir__", "__reduce__", "__reduce_ex__", "__sizeof__", "__format__"}
    ARGS = [(), (0,), (1,), ("x",), (None,), (0, 0), (1.5,)]

    def exercise(obj):
        # Every attribute; callables with simple argument lists. Errors are
        # fine, a crash is not (the parent sees the exit status).
        for name in dir(type(obj)):
            if name in SKIP:
                continue
            try:
                value = getattr(obj, name)
            except Exception:
                continue
            if callable(value):
                for args in ARGS:
                    try:
                        value(*args)
                    except Exception:
                        pass

    def pybind11_base(cls):
        return next(b for b in cls.__mro__ if b.__name__ == "pybind11_object")

    classes = [v for v in vars(_C).values() if isinstance(v, type) and not issubclass(v, BaseException)]
    report = {}
    for cls in sorted(classes, key=lambda c: c.__name__):
        ways = {
            "cls.__new__": lambda: cls.__new__(cls),
            "super().__new__": lambda: super(cls, cls).__new__(cls),
            "pybind11_object.__new__": lambda: pybind11_base(cls).__new__(cls),
            "object.__new__": lambda: object.__new__(cls),
        }
        results = {}
        for way, make in ways.items():
            try:
                obj = make()
            except TypeError as e:
                results[way] = "TypeError: " + str(e)
                continue
            except Exception as e:
                results[way] = "other: " + type(e).__name__ + ": " + str(e)
                continue
            results[way] = "created"
            exercise(obj)
        report[cls.__name__] = results

    class Sub(_C.Storage):
        pass
    try:
        Sub.__new__(Sub)
        report["<python subclass>"] = {"cls.__new__": "created"}
    except TypeError as e:
        report["<python subclass>"] = {"cls.__new__": "TypeError: " + str(e)}
    print(json.dumps(report))
""")


@pytest.fixture(scope="module")
def report():
    p = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, f"the child crashed or failed (status {p.returncode}):\n{p.stderr[-3000:]}"
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_every_class_is_covered(report):
    # The classes this suite knows of must be among those found at run time
    # (a renamed module or an empty scan would make the test vacuous).
    for name in ["Allocator", "Tensor", "Storage", "SharedStorage", "MappedStorage", "StorageView", "Device",
                 "MemoryEvent", "SimulatedAllocator", "StorageTracker", "CudaStream", "CudaEvent", "PinnedBuffer",
                 "MemoryDebugger", "MemorySource", "DistributedMaster", "DistributedWorker", "BatchStorage"]:
        assert name in report, sorted(report)


# Tensor's own __new__ constructs its C++ part (an undefined tensor, on which
# every operation raises): pickling and copying build tensors that way. The
# child above called every method of such an instance without crashing.
CONSTRUCTED_BY_NEW = {"Tensor"}


def test_new_without_init_is_refused_everywhere(report):
    for cls, results in report.items():
        for way, outcome in results.items():
            if cls in CONSTRUCTED_BY_NEW and way != "object.__new__":
                assert outcome == "created" or outcome.startswith("TypeError: "), (cls, way, outcome)
                continue
            if way == "object.__new__":
                assert outcome.startswith("TypeError"), (cls, way, outcome)  # Python refuses it itself
                continue
            assert outcome.startswith("TypeError: "), (cls, way, outcome)
            assert "never constructed" in outcome, (cls, way, outcome)


def test_construction_and_copies_still_work():
    import copy

    assert genesis._C.Storage(4).nbytes == 16
    t = genesis.ones(3)
    assert copy.copy(t).tolist() == [1.0, 1.0, 1.0]
    assert copy.deepcopy(t).tolist() == [1.0, 1.0, 1.0]

    class Sub(genesis._C.Storage):
        pass

    assert Sub((2,)).shape == (2,)
    with pytest.raises(TypeError, match="never constructed"):
        genesis._C.Allocator.__new__(genesis._C.Allocator)
    undefined = genesis.Tensor.__new__(genesis.Tensor)
    with pytest.raises(RuntimeError):
        undefined.sum()
