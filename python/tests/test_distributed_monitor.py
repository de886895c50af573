"""The distributed memory monitor and the Prometheus endpoints, end to end.

A master and several workers run as separate ``genesis-mem`` processes on
loopback, each worker replaying a trace that holds a known number of bytes,
so every figure the master reports is known in advance. Then the faults:
a worker killed and restarted, the master restarted, forged, replayed,
malformed and oversized reports, a port in use. Last, a real Prometheus
server scrapes the exporter, the master and (through the service-discovery
file) the workers, and its query API must return the same figures.
"""

import hashlib
import hmac
import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

import genesis

MiB = 1 << 20
CAPACITY = 10**9  # --capacity 1GB
HOLD_MIB = [100, 200, 400, 700]  # what worker i holds
TOKEN = "test-token-0123456789"


def genesis_mem():
    exe = pathlib.Path(genesis.__file__).resolve().parents[2] / "genesis-mem"
    if not exe.is_file():
        # The package's .py files may be links into the source tree: look
        # next to the extension module instead.
        from genesis import _C

        exe = pathlib.Path(_C.__file__).resolve().parents[2] / "genesis-mem"
    if not exe.is_file():
        pytest.skip("genesis-mem is not built next to the genesis package")
    return str(exe)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def hold_trace(path, mib, seconds=600):
    """One allocation of ``mib`` MiB at t=0, held; the trace lasts ``seconds``."""
    with open(path, "w", encoding="utf-8") as f:
        f.write("time_us,action,addr,size,stream,site\n")
        f.write(f"0,alloc,0x7f0000000000,{mib * MiB},0,\n")
        f.write(f"{seconds * 1000000},alloc,0x7f1000000000,512,0,\n")
    return path


def http(url, data=None, headers=None, method=None, timeout=5):
    """(status, body) of one request; never raises for an HTTP error status."""
    req = urllib.request.Request(url, data=data, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def signed_headers(body, token=TOKEN, nonce=None, ts=None):
    ts = str(int(time.time()) if ts is None else ts)
    nonce = nonce or os.urandom(16).hex()
    sig = hmac.new(token.encode(), f"{ts}\n{nonce}\n".encode() + body, hashlib.sha256).hexdigest()
    return {"X-Genesis-Timestamp": ts, "X-Genesis-Nonce": nonce, "X-Genesis-Signature": sig,
            "Content-Type": "application/json"}


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
            if last:
                return last
        except (OSError, ValueError, KeyError, IndexError):
            pass
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


class Cluster:
    """genesis-mem processes started by a test, all stopped at the end."""

    def __init__(self, tmp):
        self.tmp = pathlib.Path(tmp)
        self.exe = genesis_mem()
        self.procs = []

    def start(self, *args, env=None, name="p"):
        log = open(self.tmp / f"{name}.log", "w+", encoding="utf-8")
        full_env = dict(os.environ)
        full_env.pop("GENESIS_MEM_TOKEN", None)
        full_env.update(env or {})
        p = subprocess.Popen([self.exe, *map(str, args)], stdout=log, stderr=subprocess.STDOUT, env=full_env)
        p.log = log
        self.procs.append(p)
        return p

    def master(self, port, *extra, name="master"):
        p = self.start("distributed", "--role", "master", "--port", port, *extra, name=name)
        wait_for(lambda: http(f"http://127.0.0.1:{port}/status")[0] == 200, 10, "the master")
        return p

    def worker(self, i, port, *extra, token=TOKEN, trace=None, node=None):
        node = node or f"w{i}"
        trace = trace or hold_trace(self.tmp / f"hold{i}.csv", HOLD_MIB[i])
        return self.start("distributed", "--role", "worker", "--master-host", "127.0.0.1", "--port", port,
                          "--trace", trace, "--speed", "1", "--capacity", "1GB", "--interval", "0.3",
                          "--max-backoff", "1", "--node-name", node, "--metrics-port", "0", *extra,
                          env={"RANK": str(i), "LOCAL_RANK": "0", "WORLD_SIZE": "4",
                               **({"GENESIS_MEM_TOKEN": token} if token else {})},
                          name=f"{node}-{len(self.procs)}")

    def stop(self, p, sig=signal.SIGTERM):
        if p.poll() is None:
            p.send_signal(sig)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def output(self, p):
        p.log.flush()
        p.log.seek(0)
        return p.log.read()

    def close(self):
        for p in self.procs:
            self.stop(p, signal.SIGKILL)
            p.log.close()


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path)
    yield c
    c.close()


def status(port):
    code, body = http(f"http://127.0.0.1:{port}/status")
    assert code == 200, body
    return json.loads(body)


def nodes_up(port):
    return {n["node"]: n["up"] for n in status(port)["nodes"]}


def allocated(port):
    """{node: allocated bytes of device 0} of the nodes that are up."""
    return {n["node"]: n["devices"][0]["allocated"] for n in status(port)["nodes"] if n["up"] and n["devices"]}


EXPECTED = {f"w{i}": HOLD_MIB[i] * MiB for i in range(4)}


def metric_value(text, name, **labels):
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_master_and_four_workers_faults_and_restarts(cluster, tmp_path):
    port = free_port()
    report = tmp_path / "report.json"
    sd_file = tmp_path / "sd.json"
    master_args = ("--token", TOKEN, "--output", report, "--sd-file", sd_file, "--table-every", "0.5")
    master = cluster.master(port, *master_args)
    workers = [cluster.worker(i, port) for i in range(4)]
    # The first sample may come before the trace's first allocation.
    wait_for(lambda: allocated(port) == EXPECTED, 15, "four nodes up with their figures")

    # Every node with the figures its trace holds, and the job summary.
    st = status(port)
    for n in st["nodes"]:
        i = int(n["node"][1:])
        assert n["rank"] == str(i) and n["world_size"] == "4"
        (d,) = n["devices"]
        assert d["id"] == "0"
        assert d["allocated"] == HOLD_MIB[i] * MiB
        assert d["used"] == d["reserved"] >= d["allocated"]
        assert d["total"] == CAPACITY
        assert n["metrics_endpoint"].startswith("127.0.0.1:")
    used = {n["node"]: n["devices"][0]["used"] for n in st["nodes"]}
    summary = st["summary"]
    assert summary["nodes_up"] == 4 and summary["devices"] == 4
    expected_spread = 100.0 * (used["w3"] - used["w0"]) / CAPACITY
    assert summary["imbalance_percent"] == pytest.approx(expected_spread, abs=1e-6)
    assert summary["most_loaded"]["node"] == "w3 rank 3"
    assert summary["least_loaded"]["node"] == "w0 rank 0"
    assert summary["used"] == sum(used.values())

    code, text = http(f"http://127.0.0.1:{port}/metrics")
    assert code == 200
    for i in range(4):
        assert metric_value(text, "genesis_memory_allocated_bytes", node=f"w{i}", rank=i) == HOLD_MIB[i] * MiB
        assert metric_value(text, "genesis_node_up", node=f"w{i}") == 1
    assert metric_value(text, "genesis_memory_imbalance_ratio") == pytest.approx(expected_spread / 100, abs=1e-9)
    assert http(f"http://127.0.0.1:{port}/metrics", data=b"x", method="POST")[0] == 405

    # The service-discovery file lists every worker's own endpoint, and the
    # endpoint serves that worker's figures.
    sd = wait_for(lambda: len(json.loads(sd_file.read_text())) == 4 and json.loads(sd_file.read_text()), 5, "SD file")
    by_node = {g["labels"]["node"]: g["targets"][0] for g in sd}
    code, own = http(f"http://{by_node['w2']}/metrics")
    assert code == 200
    assert metric_value(own, "genesis_memory_allocated_bytes", node="w2") == HOLD_MIB[2] * MiB

    # A worker that dies shows as down (3 intervals), never removed; back
    # up once restarted.
    cluster.stop(workers[1], signal.SIGKILL)
    wait_for(lambda: nodes_up(port) == {"w0": True, "w1": False, "w2": True, "w3": True}, 5, "w1 down")
    _, text = http(f"http://127.0.0.1:{port}/metrics")
    assert metric_value(text, "genesis_node_up", node="w1") == 0
    assert metric_value(text, "genesis_memory_allocated_bytes", node="w1") is None  # stale figures not served
    workers[1] = cluster.worker(1, port)
    wait_for(lambda: allocated(port) == EXPECTED, 10, "w1 up again")

    # A worker with the wrong token is turned away and says why.
    intruder = cluster.worker(0, port, node="intruder", token="wrong-token-000000000")
    wait_for(lambda: "401" in cluster.output(intruder), 5, "the intruder's 401")
    assert "intruder" not in nodes_up(port)
    cluster.stop(intruder)

    # The master restarted: it writes its report on the way out, and the
    # workers (backing off at most 1 s) restore everything with their next
    # reports.
    cluster.stop(master, signal.SIGINT)
    assert master.returncode == 0, cluster.output(master)
    saved = json.loads(report.read_text())
    assert sorted(n["node"] for n in saved["nodes"]) == ["w0", "w1", "w2", "w3"]
    time.sleep(1.0)  # the workers notice and back off
    master = cluster.master(port, *master_args, name="master2")
    wait_for(lambda: allocated(port) == EXPECTED, 10, "state back after restart")
    st = status(port)
    assert st["summary"]["imbalance_percent"] == pytest.approx(expected_spread, abs=1e-6)
    assert any("reporting to the master again" in cluster.output(w) for w in workers)

    # A second master on the same port: a clear error, exit status 2.
    second = cluster.start("distributed", "--role", "master", "--port", port, "--token", TOKEN, name="second")
    assert second.wait(timeout=10) == 2
    assert f"port {port} on 127.0.0.1 is in use: choose another with --port" in cluster.output(second)


def test_master_rejects_forged_replayed_malformed_and_oversized(cluster):
    port = free_port()
    cluster.master(port, "--token", TOKEN, "--duration", "0")
    url = f"http://127.0.0.1:{port}/report"
    good = json.dumps({"version": 1, "node": "n1", "interval_s": 60,
                       "devices": [{"id": "0", "total": 1000, "used": 250, "allocated": 200}]}).encode()

    assert http(url, good, {"Content-Type": "application/json"}, "POST")[0] == 401  # unsigned
    assert http(url, good, signed_headers(good, token="not-the-token"), "POST")[0] == 401
    assert http(url, good, signed_headers(good, ts=int(time.time()) - 3600), "POST")[0] == 401  # stale
    headers = signed_headers(good)
    assert http(url, good, headers, "POST")[0] == 200
    code, body = http(url, good, headers, "POST")  # the same report again
    assert code == 401 and "replay" in body
    tampered = good.replace(b"250", b"999")
    assert http(url, tampered, headers | {"X-Genesis-Nonce": os.urandom(16).hex()}, "POST")[0] == 401
    for bad in (b"{not json", b"[]", b'{"version": 1, "node": 7, "devices": []}',
                b'{"version": 1, "node": "x", "devices": [{"id": "0", "used": "many"}]}',
                b'{"version": 1, "node": "x", "devices": [{"id": "0", "used": -1}]}'):
        code, body = http(url, bad, signed_headers(bad), "POST")
        assert code == 400, (bad, body)
    huge = b'{"version": 1, "node": "x", "devices": [], "pad": "' + b"x" * (2 * MiB) + b'"}'
    code, _ = http(url, huge, signed_headers(huge), "POST")
    assert code == 413

    # A silent client holding a connection open blocks no one.
    with socket.create_connection(("127.0.0.1", port)) as silent:
        silent.sendall(b"POST /report HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
        t0 = time.monotonic()
        assert http(url, good, signed_headers(good), "POST")[0] == 200
        assert time.monotonic() - t0 < 2

    st = status(port)
    assert [n["node"] for n in st["nodes"]] == ["n1"]
    assert st["nodes"][0]["devices"][0]["used"] == 250
    assert st["rejected"]["unauthorized"] >= 3 and st["rejected"]["replayed"] == 1
    assert st["rejected"]["malformed"] == 5 and st["rejected"]["too_large"] == 1


def test_master_needs_a_token_off_loopback(cluster):
    p = cluster.start("distributed", "--role", "master", "--port", free_port(), "--bind", "0.0.0.0", name="open")
    assert p.wait(timeout=10) == 2
    assert "without a token" in cluster.output(p)


def test_python_monitor_and_in_process_endpoint(tmp_path):
    from genesis.tools.memory import DistributedMemoryMonitor, Trace, start_metrics_server, stop_metrics_server

    sd_file = tmp_path / "sd.json"
    with DistributedMemoryMonitor("master", port=0, token=TOKEN, sd_file=sd_file) as master:
        port = master.port
        trace = Trace(hold_trace(tmp_path / "t.csv", 300), speed=1, capacity=CAPACITY)
        with DistributedMemoryMonitor("worker", port=port, master_host="127.0.0.1", token=TOKEN, source=trace,
                                      interval=0.2, node_name="py") as worker:
            wait_for(lambda: master.status()["nodes"][0]["devices"][0]["allocated"] == 300 * MiB, 5, "reports")
            st = master.status()
            assert st["nodes"][0]["node"] == "py"
            assert st["nodes"][0]["devices"][0]["allocated"] == 300 * MiB
            assert metric_value(master.metrics(), "genesis_node_up", node="py") == 1
            assert worker.metrics_endpoint == ""  # no metrics_port: nothing to list
            # The worker's count is live, not only known once it stops.
            assert wait_for(lambda: worker.reports_sent >= 2, 5, "a live count of reports")
            assert wait_for(lambda: sd_file.read_text() == "[]\n", 3, "SD file")
        master.write_report(tmp_path / "r.json")
        assert json.loads((tmp_path / "r.json").read_text())["nodes"][0]["node"] == "py"
    with pytest.raises(ValueError):
        DistributedMemoryMonitor("boss")

    own = start_metrics_server(port=0)
    try:
        code, text = http(f"http://127.0.0.1:{own}/metrics")
        assert code == 200 and "genesis_memory_total_bytes{" in text and 'device="host"' in text
        with pytest.raises(Exception, match="already runs"):
            start_metrics_server(port=0)
    finally:
        stop_metrics_server()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        with pytest.raises(Exception, match="is in use"):
            start_metrics_server(port=taken.getsockname()[1])


PROMETHEUS = shutil.which("prometheus")


@pytest.mark.skipif(PROMETHEUS is None, reason="the prometheus binary is not installed (apt-get install prometheus)")
def test_prometheus_scrapes_exporter_master_and_workers(cluster, tmp_path):
    exporter_port, master_port, prom_port = free_port(), free_port(), free_port()
    exporter = cluster.start("exporter", "--port", exporter_port, "--node-name", "exp", "--interval", "0.5",
                             "--trace", hold_trace(tmp_path / "exp.csv", 123, seconds=1), "--speed", "max",
                             "--capacity", "1GB", name="exporter")
    sd_file = tmp_path / "sd.json"
    cluster.master(master_port, "--sd-file", sd_file, "--table-every", "0.3")
    for i in (0, 3):
        cluster.worker(i, master_port, token=None)
    wait_for(lambda: len(json.loads(sd_file.read_text())) == 2, 10, "SD file with both workers")
    wait_for(lambda: http(f"http://127.0.0.1:{exporter_port}/metrics")[0] == 200, 10, "the exporter")

    config = tmp_path / "prometheus.yml"
    config.write_text(f"""
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [{pathlib.Path(__file__).resolve().parents[2] / "deploy/prometheus/genesis_rules.yml"}]
scrape_configs:
  - job_name: exporter
    static_configs: [{{targets: ["127.0.0.1:{exporter_port}"]}}]
  - job_name: master
    honor_labels: true
    static_configs: [{{targets: ["127.0.0.1:{master_port}"]}}]
  - job_name: workers
    honor_labels: true
    file_sd_configs: [{{files: ["{sd_file}"], refresh_interval: 1s}}]
""")
    log = open(tmp_path / "prometheus.log", "w+", encoding="utf-8")
    prom = subprocess.Popen([PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{prom_port}"], stdout=log, stderr=subprocess.STDOUT)
    prom.log = log
    cluster.procs.append(prom)

    def query(q):
        code, body = http(f"http://127.0.0.1:{prom_port}/api/v1/query?" + urllib.parse.urlencode({"query": q}))
        if code != 200:
            return None
        result = json.loads(body)["data"]["result"]
        return {tuple(sorted((k, v) for k, v in r["metric"].items() if k in ("node", "job", "instance")))
                : float(r["value"][1]) for r in result}

    exp = wait_for(lambda: query('genesis_memory_allocated_bytes{node="exp"}'), 30, "exporter series")
    assert list(exp.values()) == [123 * MiB + 512]  # the trace ended: both allocations live
    via_master = wait_for(lambda: query('genesis_memory_allocated_bytes{job="master"}'), 20, "master series")
    assert sorted(via_master.values()) == [HOLD_MIB[0] * MiB, HOLD_MIB[3] * MiB]
    direct = wait_for(lambda: (r := query('genesis_memory_allocated_bytes{job="workers"}')) and len(r) == 2 and r,
                      20, "workers scraped through the SD file")
    assert sorted(direct.values()) == [HOLD_MIB[0] * MiB, HOLD_MIB[3] * MiB]
    up = query('genesis_node_up{job="master"}')
    assert sorted(up.values()) == [1.0, 1.0]
    assert list(query('genesis_memory_predicted_oom_seconds{node="exp"}').values()) == [float("inf")]
    wait_for(lambda: query("genesis:memory_utilization:spread"), 20, "the recording rule")
    assert exporter.poll() is None


def test_metrics_port_environment_starts_the_endpoint_on_import():
    import sys

    port = free_port()
    code = ("import genesis, urllib.request; "
            f"print(urllib.request.urlopen('http://127.0.0.1:{port}/metrics', timeout=5).read().decode())")
    env = dict(os.environ, GENESIS_METRICS_PORT=str(port), PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=30)
    assert out.returncode == 0, out.stderr
    assert 'genesis_memory_total_bytes{node="' in out.stdout and 'device="host"' in out.stdout
    # A port that is not one warns instead of breaking the import.
    env["GENESIS_METRICS_PORT"] = "not-a-port"
    out = subprocess.run([sys.executable, "-W", "always", "-c", "import genesis"], capture_output=True, text=True,
                         env=env, timeout=30)
    assert out.returncode == 0 and "metrics server not started" in out.stderr, out.stderr


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool is not installed (apt-get install prometheus)")
def test_shipped_prometheus_rules_are_valid():
    rules = pathlib.Path(__file__).resolve().parents[2] / "deploy" / "prometheus" / "genesis_rules.yml"
    out = subprocess.run(["promtool", "check", "rules", str(rules)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout
    for name in ("GenesisMemoryOOMRiskHigh", "GenesisMemoryOOMRiskCritical", "GenesisMemoryLeak",
                 "GenesisMemoryImbalance", "GenesisNodeDown"):
        assert name in rules.read_text()


def test_worker_metrics_endpoint_on_ipv6_is_a_valid_target(tmp_path):
    # Prometheus targets and URLs put an IPv6 address in brackets: "::1:9464"
    # is no target.
    from genesis.tools.memory import DistributedMemoryMonitor, Trace

    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback")
    trace = Trace(hold_trace(tmp_path / "t.csv", 10), speed=1, capacity=CAPACITY)
    with DistributedMemoryMonitor("master", port=0, token=TOKEN) as master:
        with DistributedMemoryMonitor("worker", port=master.port, master_host="127.0.0.1", token=TOKEN, source=trace,
                                      interval=0.2, node_name="v6", metrics_port=0, metrics_bind="::1") as worker:
            endpoint = worker.metrics_endpoint
            assert endpoint.startswith("[::1]:"), endpoint
            code, text = http(f"http://{endpoint}/metrics")
            assert code == 200 and "genesis_memory_total_bytes" in text
            wait_for(lambda: master.status()["nodes"], 5, "a report")
            assert master.status()["nodes"][0]["metrics_endpoint"] == endpoint
