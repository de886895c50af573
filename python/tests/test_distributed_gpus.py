"""The distributed monitor on a machine with two GPUs, read through NVML.

Two workers, one per GPU of the same machine (as ``torchrun`` would start
them, with ``RANK``/``LOCAL_RANK``/``WORLD_SIZE`` in their environment),
report to one master while another process holds a different, known amount
of memory on each GPU. The master must show both nodes with the memory the
driver reports for their GPU, the imbalance between them, and a node as down
once its worker dies. A third worker that watches every device reports both
GPUs under one node.

Needs two GPUs visible to NVML and PyTorch (to hold the memory); skipped
otherwise, saying which is missing.
"""

import json
import os
import shutil
import signal
import subprocess
import sys

import pytest

from test_distributed_monitor import Cluster, free_port, http, metric_value, status, wait_for

GiB = 1 << 30
TOKEN = "two-gpu-token-0123456789"
HOLD_GIB = {0: 3, 1: 7}  # what the holder keeps on each GPU


def smi_query(field):
    """{index: value in MiB} of one nvidia-smi memory field."""
    out = subprocess.run(["nvidia-smi", f"--query-gpu=index,{field}", "--format=csv,noheader,nounits"],
                         check=True, capture_output=True, text=True, timeout=30).stdout
    return {int(i): int(v) for i, v in (line.split(",") for line in out.strip().splitlines())}


def gpus_used_mib():
    """{index: used MiB} as nvidia-smi reports it."""
    return smi_query("memory.used")


def require_two_gpus():
    if shutil.which("nvidia-smi") is None:
        pytest.skip("no NVIDIA driver on this machine (nvidia-smi missing): the two-GPU monitor test needs two GPUs")
    try:
        n = len(gpus_used_mib())
    except (subprocess.SubprocessError, OSError, ValueError) as e:
        pytest.skip(f"nvidia-smi could not list the GPUs ({e}): the two-GPU monitor test needs two GPUs")
    if n < 2:
        pytest.skip(f"this machine has {n} GPU(s): the two-GPU monitor test needs two")
    probe = subprocess.run([sys.executable, "-c", "import torch; assert torch.cuda.device_count() >= 2"],
                           capture_output=True, timeout=120)
    if probe.returncode != 0:
        pytest.skip("PyTorch with two CUDA devices is needed to hold memory on both GPUs")


HOLDER = """
import sys, torch
held = [torch.empty({g0} << 30, dtype=torch.uint8, device="cuda:0"),
        torch.empty({g1} << 30, dtype=torch.uint8, device="cuda:1")]
torch.cuda.synchronize(0); torch.cuda.synchronize(1)
print("ready", flush=True)
sys.stdin.read()  # hold until the test closes our stdin
"""


@pytest.fixture
def holder():
    require_two_gpus()
    # NVML numbers GPUs in PCI bus order; make CUDA number them the same way.
    env = dict(os.environ, CUDA_DEVICE_ORDER="PCI_BUS_ID")
    p = subprocess.Popen([sys.executable, "-c", HOLDER.format(g0=HOLD_GIB[0], g1=HOLD_GIB[1])], env=env,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready", "the holder process could not allocate on both GPUs"
        yield p
    finally:
        p.stdin.close()
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def nvml_worker(cluster, port, node, rank, *extra):
    return cluster.start("distributed", "--role", "worker", "--master-host", "127.0.0.1", "--port", port,
                         "--interval", "0.3", "--max-backoff", "1", "--node-name", node, "--metrics-port", "0",
                         *extra, env={"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2",
                                      "GENESIS_MEM_TOKEN": TOKEN}, name=node)


def node_devices(port):
    return {n["node"]: {d["id"]: d for d in n["devices"]} for n in status(port)["nodes"] if n["up"]}


def test_one_worker_per_gpu_through_nvml(tmp_path, holder):
    cluster = Cluster(tmp_path)
    try:
        port = free_port()
        report = tmp_path / "report.json"
        cluster.master(port, "--token", TOKEN, "--output", report, "--table-every", "0.5")
        nvml_worker(cluster, port, "gpu-a", 0, "--devices", "0")
        worker_b = nvml_worker(cluster, port, "gpu-b", 1, "--devices", "1")
        wait_for(lambda: set(node_devices(port)) == {"gpu-a", "gpu-b"}, 30, "both GPU workers up")
        # Give every worker a report taken after the holder's memory settled.
        wait_for(lambda: all(n["reports"] >= 3 for n in status(port)["nodes"]), 15, "three reports each")

        smi = gpus_used_mib()
        smi_total, smi_reserved = smi_query("memory.total"), smi_query("memory.reserved")
        st = status(port)
        by_node = {n["node"]: n for n in st["nodes"]}
        for node, gpu in (("gpu-a", 0), ("gpu-b", 1)):
            n = by_node[node]
            assert n["rank"] == str(gpu) and n["local_rank"] == str(gpu) and n["world_size"] == "2"
            (dev,) = n["devices"]
            assert dev["id"] == str(gpu)
            # The capacity programs can have: the driver's own reserve is left out.
            usable = smi_total[gpu] - smi_reserved[gpu]
            assert abs(dev["total"] / (1 << 20) - usable) <= 1, (node, dev, smi_total, smi_reserved)
            # The driver's figure for that GPU, as nvidia-smi reads it (MiB), within 64 MiB.
            assert abs(dev["used"] / (1 << 20) - smi[gpu]) <= 64, (node, dev, smi)
            assert dev["used"] >= HOLD_GIB[gpu] * GiB
        used_a = by_node["gpu-a"]["devices"][0]["used"]
        used_b = by_node["gpu-b"]["devices"][0]["used"]
        # The holder's 4 GiB difference, give or take the contexts' own memory.
        assert abs((used_b - used_a) - (HOLD_GIB[1] - HOLD_GIB[0]) * GiB) < 512 << 20
        summary = st["summary"]
        assert summary["nodes_up"] == 2 and summary["devices"] == 2
        assert summary["most_loaded"]["node"].startswith("gpu-b")
        assert summary["least_loaded"]["node"].startswith("gpu-a")
        assert summary["imbalance_percent"] > 0

        code, text = http(f"http://127.0.0.1:{port}/metrics")
        assert code == 200
        for node, gpu in (("gpu-a", 0), ("gpu-b", 1)):
            assert metric_value(text, "genesis_node_up", node=node) == 1
            used = metric_value(text, "genesis_memory_used_bytes", node=node, device=gpu)
            assert used is not None and used >= HOLD_GIB[gpu] * GiB

        # One GPU's worker dies: its node shows as down, the other stays up.
        cluster.stop(worker_b, signal.SIGKILL)
        wait_for(lambda: {n["node"]: n["up"] for n in status(port)["nodes"]} == {"gpu-a": True, "gpu-b": False},
                 10, "gpu-b down")
        _, text = http(f"http://127.0.0.1:{port}/metrics")
        assert metric_value(text, "genesis_node_up", node="gpu-b") == 0

        # A worker that watches every GPU reports both under one node.
        nvml_worker(cluster, port, "both", 0)
        wait_for(lambda: set(node_devices(port).get("both", {})) >= {"0", "1"}, 30, "one node with both GPUs")
        devs = node_devices(port)["both"]
        assert devs["1"]["used"] - devs["0"]["used"] > 3 * GiB
    finally:
        cluster.close()
    print(json.dumps({"nvidia_smi_used_mib": smi, "master_used": {"gpu-a": used_a, "gpu-b": used_b}}))
