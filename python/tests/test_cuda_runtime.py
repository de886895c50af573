"""genesis.cuda runtime: device queries and properties, streams,
events, and the stream() / device() context managers. Without a GPU every
call that needs one raises genesis.CudaError; the GPU tests skip."""

import os
import subprocess
import sys
import threading

import pytest

import genesis
from conftest import HAS_CUDA, requires_cuda, requires_no_cuda

NEEDS_GPU = [
    ("get_device_name", ()), ("get_device_capability", ()), ("get_device_properties", ()),
    ("get_device_name", (0,)), ("get_device_properties", ("cuda:0",)), ("can_device_access_peer", (0, 0)),
    ("set_device", (0,)), ("current_stream", ()), ("default_stream", ()), ("Stream", ()), ("stream", ()),
    ("device", (0,)), ("synchronize", ()), ("ipc_shareable_storage", ((4,), "float32")),
]


@requires_no_cuda
@pytest.mark.parametrize("name, args", NEEDS_GPU)
def test_without_gpu_runtime_calls_raise_cuda_error(name, args):
    with pytest.raises(genesis.CudaError, match="needs a CUDA GPU") as info:
        getattr(genesis.cuda, name)(*args)
    assert info.value.code == 100


@requires_no_cuda
def test_without_gpu_events_are_lazy_and_then_cuda_errors():
    e = genesis.cuda.Event(enable_timing=True)  # costs nothing until recorded
    assert e.enable_timing and "not recorded" in repr(e)
    for call in (e.record, e.query, e.synchronize, lambda: e.elapsed_time(genesis.cuda.Event())):
        with pytest.raises(genesis.CudaError, match="needs CUDA"):
            call()


@requires_no_cuda
def test_without_gpu_no_op_guards_still_work():
    with genesis.cuda.device(None) as d:
        assert d.idx == -1
    with genesis.cuda.device(-1):
        pass
    with genesis.cuda.stream(None) as s:
        assert s is None


def test_argument_errors_come_before_gpu_checks():
    with pytest.raises(ValueError, match="expected a CUDA device"):
        genesis.cuda.get_device_name("cpu")
    with pytest.raises(ValueError):
        genesis.cuda.get_device_capability(-3)
    with pytest.raises(TypeError):
        genesis.cuda.get_device_properties(1.5)
    with pytest.raises(TypeError):
        genesis.cuda.Stream(priority="high")
    with pytest.raises(TypeError):
        genesis.cuda.Event(enable_timing=1)
    with pytest.raises(TypeError):
        genesis.cuda.set_stream(0)
    with pytest.raises(TypeError):
        genesis.cuda.stream(42)
    with pytest.raises(TypeError):
        genesis.cuda.Event().record(stream="s")
    with pytest.raises(TypeError):
        genesis.cuda.Event().elapsed_time(3)


# --- on a GPU -------------------------------------------------------------------
@requires_cuda
def test_device_queries():
    name = genesis.cuda.get_device_name()
    assert isinstance(name, str) and name
    assert genesis.cuda.get_device_name(0) == name == genesis.cuda.get_device_name("cuda:0")
    major, minor = genesis.cuda.get_device_capability()
    props = genesis.cuda.get_device_properties()
    assert (props.major, props.minor) == (major, minor) and major >= 3
    assert props.name == name and props.index == 0
    total = genesis.cuda.mem_get_info()[1]
    assert abs(props.total_memory - total) <= total // 100  # two CUDA queries of the same figure
    assert props.multi_processor_count > 0 and props.warp_size == 32
    assert props.L2_cache_size == props.l2_cache_size > 0
    assert props.uuid.startswith("GPU-") and len(props.uuid) == 40
    assert f"name='{name}'" in repr(props) and "total_memory=" in repr(props)
    assert genesis.cuda.can_device_access_peer(0, 0) is True
    genesis.cuda.synchronize()
    genesis.cuda.synchronize(0)


@requires_cuda
def test_streams_and_current_stream():
    default = genesis.cuda.default_stream()
    assert genesis.cuda.current_stream() == default and default.cuda_stream in (0, 2)
    s = genesis.cuda.Stream()
    assert s != default and s.device == genesis.device("cuda:0") and s.priority == 0
    assert s == s and hash(s) == hash(genesis.cuda.Stream._wrap(s._c))
    with genesis.cuda.stream(s) as entered:
        assert entered is s
        assert genesis.cuda.current_stream() == s
        inner = genesis.cuda.Stream(priority=-1)
        assert inner.priority == -1
        with genesis.cuda.stream(inner):
            assert genesis.cuda.current_stream() == inner
        assert genesis.cuda.current_stream() == s
    assert genesis.cuda.current_stream() == default
    s.synchronize()
    assert s.query() is True
    genesis.cuda.set_stream(s)
    try:
        assert genesis.cuda.current_stream() == s
    finally:
        genesis.cuda.set_stream(default)


@requires_cuda
def test_stream_context_restores_on_exceptions():
    default = genesis.cuda.current_stream()
    s = genesis.cuda.Stream()
    with pytest.raises(KeyError):
        with genesis.cuda.stream(s):
            raise KeyError("boom")
    assert genesis.cuda.current_stream() == default
    with genesis.cuda.stream() as fresh:  # as in torch.cuda: a new stream for the block
        assert fresh != default and genesis.cuda.current_stream() == fresh
    assert genesis.cuda.current_stream() == default


@requires_cuda
def test_current_stream_is_per_thread():
    s = genesis.cuda.Stream()
    seen = []
    with genesis.cuda.stream(s):
        t = threading.Thread(target=lambda: seen.append(genesis.cuda.current_stream()))
        t.start()
        t.join()
    assert seen == [genesis.cuda.default_stream()]


@requires_cuda
def test_device_context_manager():
    start = genesis.cuda.current_device()
    with genesis.cuda.device(0):
        assert genesis.cuda.current_device() == 0
    with pytest.raises(ValueError):
        with genesis.cuda.device(0):
            raise ValueError("inside")
    assert genesis.cuda.current_device() == start
    guard = genesis.cuda.device("cuda:0")
    with guard:
        with guard:  # nesting one object is fine
            assert genesis.cuda.current_device() == 0
    assert genesis.cuda.current_device() == start


@pytest.mark.skipif(not HAS_CUDA or genesis.cuda.device_count() < 2, reason="needs two CUDA GPUs")
def test_device_context_switches_and_restores():
    genesis.cuda.set_device(0)
    with genesis.cuda.device(1):
        assert genesis.cuda.current_device() == 1
        assert genesis.create_storage([1.0], device="cuda").device == genesis.device("cuda:1")
        s = genesis.cuda.Stream()
        assert s.device == genesis.device("cuda:1")
    assert genesis.cuda.current_device() == 0
    with genesis.cuda.stream(s):  # entering a stream also makes its device current
        assert genesis.cuda.current_device() == 1
    assert genesis.cuda.current_device() == 0
    assert isinstance(genesis.cuda.can_device_access_peer(0, 1), bool)


@requires_cuda
def test_events_time_and_order_work():
    start, end = genesis.cuda.Event(enable_timing=True), genesis.cuda.Event(enable_timing=True)
    assert start.query() is True  # never recorded: complete
    s = genesis.cuda.Stream()
    start.record(s)
    big = genesis.Storage((64 << 20,), genesis.uint8, "cuda")
    with genesis.cuda.stream(s):
        big.copy_(genesis.Storage.zeros((64 << 20,), genesis.uint8, "cuda"), non_blocking=True)
    end.record(s)
    end.synchronize()
    assert end.query() is True
    ms = start.elapsed_time(end)
    assert isinstance(ms, float) and ms >= 0.0
    other = genesis.cuda.Stream()
    other.wait_event(end)
    other.wait_stream(s)
    ev = s.record_event()
    ev.wait()
    ev.synchronize()
    with pytest.raises(ValueError, match="enable_timing"):
        genesis.cuda.Event().elapsed_time(end)


@requires_cuda
def test_storage_work_on_a_side_stream(cuda0):
    import numpy as np
    data = np.arange(1 << 20, dtype=np.float32)
    with genesis.cuda.stream(genesis.cuda.Stream()):
        g = genesis.create_storage(data, device="cuda")
        h = g.to("cpu")
        genesis.cuda.synchronize()
    np.testing.assert_array_equal(h.numpy(), data)


def test_sync_index_checks_setting_and_environment():
    """GPU index errors are raised at the next synchronisation by default, at
    the call with set_sync_index_checks(True) or GENESIS_SYNC_INDEX_CHECKS=1
    (read once, at the first use); the setting works without a GPU too."""
    before = genesis.cuda.sync_index_checks()
    try:
        genesis.cuda.set_sync_index_checks(True)
        assert genesis.cuda.sync_index_checks() is True
        genesis.cuda.set_sync_index_checks(False)
        assert genesis.cuda.sync_index_checks() is False
    finally:
        genesis.cuda.set_sync_index_checks(before)
    with pytest.raises(TypeError):
        genesis.cuda.set_sync_index_checks("yes")
    child = "import genesis; print(genesis.cuda.sync_index_checks())"
    base = {k: v for k, v in os.environ.items() if k != "GENESIS_SYNC_INDEX_CHECKS"}
    base["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    for value, want in (("1", "True"), ("0", "False"), (None, "False")):
        env = dict(base)
        if value is not None:
            env["GENESIS_SYNC_INDEX_CHECKS"] = value
        out = subprocess.run([sys.executable, "-c", child], env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == want, (value, out.stdout, out.stderr)
