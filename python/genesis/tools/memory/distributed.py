"""The memory metrics endpoint and the distributed memory monitor.

    from genesis.tools.memory import start_metrics_server, DistributedMemoryMonitor

    start_metrics_server(port=9464)          # this process's figures on /metrics

    master = DistributedMemoryMonitor(role="master", port=29500, token="s3cret")
    master.start()
    ...
    print(master.status()["summary"])        # every node, the imbalance, ...

    worker = DistributedMemoryMonitor(role="worker", master_host="head-node", port=29500,
                                      token="s3cret", interval=5)
    worker.start()                           # reports this process's allocators

Both roles run in C++ threads (include/genesis/debug/distributed_roles.h);
``genesis-mem distributed`` runs the same code from the command line. A
worker's ``source`` is ``None`` (this process's Genesis allocators),
``"nvml"``, a process id, or a ``Trace``. The token comes from ``token=`` or
the ``GENESIS_MEM_TOKEN`` environment variable; workers sign their reports
with it (HMAC-SHA256) and never send it. Without a token the master listens
on loopback only.
"""

import json
import os
import threading

from ... import _C

__all__ = ["DistributedMemoryMonitor", "start_metrics_server", "stop_metrics_server", "metrics_server_port"]


def start_metrics_server(port=9464, bind="127.0.0.1"):
    """Serves this process's memory figures (every CUDA device's allocator and
    the host allocator, sampled once a second) on ``http://bind:port/metrics``
    for Prometheus. Returns the port (``port=0`` picks a free one). Raises
    ValueError when the port is in use or a server already runs. Setting
    ``GENESIS_METRICS_PORT`` (and ``GENESIS_METRICS_BIND``) starts it when
    genesis is imported."""
    return _C.start_metrics_server(int(port), str(bind))


def stop_metrics_server():
    """Stops the endpoint of start_metrics_server (no-op when none runs)."""
    _C.stop_metrics_server()


def metrics_server_port():
    """The endpoint's port, or 0 when none runs."""
    return _C.metrics_server_port()


def _token(token):
    if token is None:
        token = os.environ.get("GENESIS_MEM_TOKEN", "")
    return str(token)


class DistributedMemoryMonitor:
    """One role of the distributed memory monitor: ``role="master"`` collects
    the reports of every worker and serves them (/metrics, /status);
    ``role="worker"`` watches ``source`` and reports to the master every
    ``interval`` seconds, retrying with capped exponential backoff while the
    master is away. Usable as a context manager."""

    def __init__(self, role, port=29500, *, master_host=None, bind="127.0.0.1", token=None, sd_file=None,
                 source=None, interval=5.0, node_name=None, devices=None, metrics_port=None,
                 metrics_bind="127.0.0.1", max_backoff=30.0, down_after_intervals=3.0,
                 max_body_bytes=1 << 20, verbose=False):
        if role not in ("master", "worker"):
            raise ValueError(f"role {role!r}: expected 'master' or 'worker'")
        self.role = role
        self._lock = threading.Lock()
        self._impl = None
        if role == "master":
            self._impl = _C.DistributedMaster(int(port), str(bind), _token(token), os.fspath(sd_file or ""),
                                              float(down_after_intervals), int(max_body_bytes))
            self._ticker_stop = threading.Event()
            if sd_file:
                # The service-discovery file follows the workers that come and go.
                threading.Thread(target=self._tick, name="genesis-sd-file", daemon=True).start()
            return
        if not master_host:
            raise ValueError("a worker needs master_host")
        kind, trace, speed, capacity, config, pid = "process", "", 1.0, 0, "genesis", 0
        if source == "nvml":
            kind = "nvml"
        elif isinstance(source, int) and not isinstance(source, bool):
            kind, pid = "pid", source
        elif source is not None and hasattr(source, "path") and hasattr(source, "speed"):
            kind, trace, speed = "trace", os.fspath(source.path), float(source.speed)
            capacity, config = int(source.capacity), str(source.config)
        elif source is not None:
            raise ValueError(f"source {source!r}: expected None, 'nvml', a process id or a Trace")
        self._impl = _C.DistributedWorker(
            kind, trace, speed, capacity, config, pid, str(master_host), int(port), _token(token), float(interval),
            float(max_backoff), str(node_name or ""), [str(d) for d in (devices or [])],
            -1 if metrics_port is None else int(metrics_port), str(metrics_bind), bool(verbose))

    # --- both roles ---
    def start(self):
        """Starts reporting (worker); a master serves from construction on."""
        if self.role == "worker":
            self._impl.start()
        return self

    def stop(self):
        """Stops the role (idempotent)."""
        with self._lock:
            if self.role == "master":
                self._ticker_stop.set()
            if self._impl is not None:
                self._impl.stop()

    def _tick(self):
        while not self._ticker_stop.wait(1.0):
            try:
                self._impl.tick()
            except Exception:  # noqa: BLE001 - a failed write is retried at the next tick
                pass

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # --- master ---
    @property
    def port(self):
        """The master's port."""
        self._require("master")
        return self._impl.port

    def status(self):
        """Every node (up or down, with its devices) and the job summary, as a dict."""
        self._require("master")
        return json.loads(self._impl.status_json())

    def metrics(self):
        """The master's Prometheus exposition (text)."""
        self._require("master")
        return self._impl.metrics_text()

    def table(self):
        """The live table the command line prints."""
        self._require("master")
        return self._impl.table()

    def write_report(self, path):
        """Writes status() as JSON to ``path`` (and refreshes the SD file)."""
        self._require("master")
        self._impl.tick()
        _C.write_report(os.fspath(path), self._impl.status_json() + "\n")

    # --- worker ---
    @property
    def reports_sent(self):
        self._require("worker")
        return self._impl.reports_sent

    @property
    def metrics_endpoint(self):
        """host:port of the worker's own /metrics ('' without metrics_port)."""
        self._require("worker")
        return self._impl.metrics_endpoint

    @property
    def running(self):
        self._require("worker")
        return self._impl.running

    def _require(self, role):
        if self.role != role:
            raise AttributeError(f"only a {role} has this (this monitor is a {self.role})")
