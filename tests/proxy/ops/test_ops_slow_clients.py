"""Health probes answer whatever the scrape side of the operations endpoint is doing (issue 35): slow clients that
never finish their request head, scrapers that never read their answer, and scrapes waiting on a long build each
hold a bounded share of the endpoint, and a probe is never queued behind them. The operations server over real
loopback sockets (port 0); the waits below are bounds that turn a hang into a failure, not timings."""

from __future__ import annotations

import asyncio
import select
import socket
import threading
import urllib.error
import urllib.request

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily

from proxy.ops.http import OpsServer
from tests.harness import wait_until

BOUND_S = 10.0  # a bound on every wait: only reached on the failure
PROBES = 40


class Exposition:
    """A collector whose scrape is ``size`` bytes, optionally held until released (a build at 10^6 tenants)."""

    def __init__(self, size: int = 0, held: bool = False) -> None:
        self.size = size
        self.release = threading.Event()
        self.entered = threading.Event()
        if not held:
            self.release.set()

    def describe(self) -> list:
        return []

    def collect(self):
        self.entered.set()
        self.release.wait(BOUND_S)
        family = GaugeMetricFamily("scrape_test_value", "A value to find in the exposition." + "x" * self.size)
        family.add_metric([], 42.0)
        yield family


@pytest.fixture
def ops_server():
    """Start an operations server on its own loop thread: ``start(exposition, **bounds)`` returns its address."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    started: list[tuple[OpsServer, Exposition]] = []

    def start(exposition: Exposition, **bounds):
        registry = CollectorRegistry()
        registry.register(exposition)
        server = OpsServer(registry, lambda: None, **bounds)
        started.append((server, exposition))
        return asyncio.run_coroutine_threadsafe(server.start("127.0.0.1", 0), loop).result(BOUND_S)

    try:
        yield start
    finally:
        for server, exposition in started:
            exposition.release.set()
            asyncio.run_coroutine_threadsafe(server.close(), loop).result(BOUND_S)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(BOUND_S)
        loop.close()


def get(address, path: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(f"http://{address[0]}:{address[1]}{path}", timeout=BOUND_S) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def probe_answers(address) -> dict[tuple[str, int], int]:
    """``PROBES`` probes, alternately /healthz and /readyz: how many got each (path, status)."""
    answers: dict[tuple[str, int], int] = {}
    for i in range(PROBES):
        path = ("/healthz", "/readyz")[i % 2]
        try:
            status = get(address, path)[0]
        except OSError:  # refused, reset, or no answer within BOUND_S
            status = 0
        answers[(path, status)] = answers.get((path, status), 0) + 1
    return answers


ALL_ANSWERED = {("/healthz", 200): PROBES // 2, ("/readyz", 200): PROBES // 2}


class SlowClients:
    """``count`` connections that each send ``request`` and then nothing (``trickle``: one more byte of an endless
    header now and then), never reading; one the server closes (or answers) is opened again, as a slowloris does."""

    def __init__(self, address, count: int, request: bytes, trickle: bool) -> None:
        self.address, self.count, self.request, self.trickle = address, count, request, trickle
        self.socks: list[socket.socket] = []
        self.opened = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _open(self) -> socket.socket:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a reader that does not read: its window stays small
        s.settimeout(BOUND_S)
        s.connect(self.address)
        s.sendall(self.request)
        s.setblocking(False)
        self.opened += 1
        return s

    def __enter__(self) -> SlowClients:
        self.socks = [self._open() for _ in range(self.count)]
        self.thread.start()
        return self

    def _run(self) -> None:
        while not self.stop.wait(0.05):
            if not self.trickle:
                continue
            ready, _, _ = select.select(self.socks, [], [], 0)
            for s in ready:  # closed by the server, or answered (503 before the fix): open another
                try:
                    s.recv(65536)
                except OSError:
                    pass
                s.close()
                self.socks[self.socks.index(s)] = self._open()
            for s in self.socks:
                try:
                    s.send(b"x")
                except OSError:
                    pass

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(BOUND_S)
        for s in self.socks:
            s.close()


def test_probes_answer_while_300_connections_send_their_request_head_slowly(ops_server):
    """Before: the 65th connection on was answered 503 "too many connections" while the 64 slow ones held the
    endpoint (5 s each, then the slowloris reopens them): every probe failed."""
    address = ops_server(Exposition())
    with SlowClients(address, 300, b"GET /metrics HTTP/1.1\r\nX-Slow: ", trickle=True) as slow:
        answers = probe_answers(address)
        assert answers == ALL_ANSWERED
        assert get(address, "/metrics")[0] == 200  # and a scrape gets through as well
    assert slow.opened >= 300


def test_probes_answer_while_scrapers_never_read_their_answer(ops_server):
    """Scrapers that never read a large exposition hold at most ``max_scrapes`` answers; the oldest is closed for a
    new scrape, and probes never wait for any of them. Before: each held its connection for good (no write deadline),
    64 of them held the endpoint and every probe and scrape was answered 503."""
    size = 4 << 20  # more than loopback's socket buffers take for a reader that does not read
    address = ops_server(Exposition(size))
    with SlowClients(address, 80, b"GET /metrics HTTP/1.1\r\n\r\n", trickle=False):
        assert probe_answers(address) == ALL_ANSWERED
        status, body = get(address, "/metrics")
        assert status == 200 and b"scrape_test_value 42.0" in body and len(body) > size


def test_probes_answer_while_many_scrapes_wait_on_a_long_build(ops_server):
    """A build at 10^6 tenants takes seconds; scrapes that arrive meanwhile wait on it, probes do not. Before: 80
    scrapes waiting held the endpoint and probes were answered 503. Past ``max_scrapes`` a scrape is answered 503."""
    exposition = Exposition(held=True)
    address = ops_server(exposition)
    with SlowClients(address, 80, b"GET /metrics HTTP/1.1\r\n\r\n", trickle=False):
        assert exposition.entered.wait(BOUND_S)
        assert probe_answers(address) == ALL_ANSWERED
        assert get(address, "/metrics") == (503, b"too many scrapes at once\n")
        exposition.release.set()


def test_a_scraper_that_stops_reading_is_cut_off_at_the_write_deadline(ops_server):
    """The answer is written in chunks under one deadline: past it the connection is closed, and the proxy holds at
    most a chunk of it meanwhile, not a copy of the whole exposition."""
    size = 4 << 20
    address = ops_server(Exposition(size), write_timeout_s=0.5)
    with SlowClients(address, 1, b"GET /metrics HTTP/1.1\r\n\r\n", trickle=False) as slow:
        s = slow.socks[0]
        wait_until(lambda: not _open_on_server(address), BOUND_S, "the non-reader closed by the server")
        got = 0
        s.setblocking(True)
        try:
            while chunk := s.recv(1 << 20):
                got += len(chunk)
        except ConnectionResetError:
            pass
        assert got < size  # cut off, not answered in full


def _open_on_server(address) -> bool:
    """Whether the server still has an established connection to the test's client at ``address``: the kernel's own
    table, read from the outside (``/proc/net/tcp``, loopback addresses)."""
    port = f"{address[1]:04X}"
    with open("/proc/net/tcp") as table:
        for line in table.readlines()[1:]:
            local, _, state = line.split()[1:4]
            if local.endswith(":" + port) and state == "01":  # ESTABLISHED
                return True
    return False
