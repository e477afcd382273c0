"""The operations endpoint: Prometheus ``/metrics``, ``/healthz`` (the process is serving), ``/readyz`` (the
broker is reachable) and ``/explain`` (why a client is throttled, :mod:`proxy.ops.explain`). A small asyncio
HTTP/1.0-style server so it lives in the proxy's own event loop.

A scrape never runs on the event loop: the exposition is built in one scrape thread, where the collectors read the
proxy's state without changing it (``quota.primitives.top``, ``Rate.peek``), and scrapes that arrive while one is being built
share its result, so Prometheus servers scraping at once cost one build. The loop only reads requests and writes
the bytes.

Probes answer whatever the scrape side is doing. Every wait on a client is bounded: its request head within
``HEAD_TIMEOUT_S``, its answer written in chunks of ``WRITE_CHUNK`` within ``write_timeout_s`` (the proxy holds at most
a chunk of it, not a copy of the exposition). At most ``max_connections`` are open: a new one closes the oldest that
waits on its client (head not in, or answer not read), so slow clients cannot lock probes out; at most
``max_scrapes`` answers to /metrics are under way: a new scrape closes the oldest being written to a slow reader, or
is answered 503 when they all wait on the build. A probe is answered as soon as its head is in and is never counted
among the scrapes. What a flood can still do: close a probe whose head has not arrived before ``max_connections``
newer connections did."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from proxy.ground.quiet import quiet
from proxy.ground.tasks import wait_for
from proxy.ops.entity_series import EntitySeries

log = logging.getLogger(__name__)

MAX_REQUEST_HEAD = 8192
HEAD_TIMEOUT_S = 5.0  # for the whole request head, however slowly it trickles in
WRITE_TIMEOUT_S = 30.0  # for a whole answer (Prometheus gives up on a scrape after 10 s by default)
BUILD_TIMEOUT_S = 60.0  # a scrape waiting on the exposition's build past it is answered 503 (the build goes on)
WRITE_CHUNK = 65536
MAX_CONNECTIONS = 256  # a new connection over it closes the oldest one waiting on its client
MAX_SCRAPES = 16  # /metrics answers under way (built or written) at once
EVICTION_LOG_INTERVAL_S = 60.0

# What an open connection is doing: only those waiting on their client (HEAD, ANSWER, SCRAPE) are ever closed for a
# newcomer; a scrape waiting on the build (BUILD) costs nothing but its socket, and there are at most MAX_SCRAPES.
HEAD, BUILD, SCRAPE, ANSWER = "head", "build", "scrape", "answer"


def build_exposition(registry: CollectorRegistry, series: EntitySeries | None = None) -> bytes:
    """The text exposition (see :func:`quiet`); with ``series``, the per-entity quota series come from it (built
    by this scrape or served from the last background build, see :mod:`proxy.ops.entity_series`)."""
    with quiet():
        extra = series.scrape() if series is not None else b""
        return generate_latest(registry) + extra


class OpsServer:
    def __init__(
        self,
        registry: CollectorRegistry,
        not_ready: Callable[[], str | None],
        exposition: Callable[[], bytes] | None = None,
        series: EntitySeries | None = None,
        ready_note: Callable[[], str | None] = lambda: None,
        explain: Callable[[bytes], Awaitable[tuple[str, str, bytes]]] | None = None,
        *,
        max_connections: int = MAX_CONNECTIONS,
        max_scrapes: int = MAX_SCRAPES,
        write_timeout_s: float = WRITE_TIMEOUT_S,
    ) -> None:
        """``not_ready`` says why the proxy is not ready (the body of /readyz's 503), or None when it is;
        ``ready_note`` a detail worth knowing while ready (a second line of /readyz's 200 body), or None;
        ``exposition`` builds /metrics' body in the scrape thread (default: the registry's, with ``series``, the
        per-entity quota series when the registry's quota collector leaves them to it)."""
        self._registry = registry
        self._series = series
        self._build = exposition or (lambda: build_exposition(registry, series))
        self._not_ready = not_ready
        self._ready_note = ready_note
        self._explain = explain  # /explain?...: why a client is throttled (proxy.ops.explain), given the query
        self._server: asyncio.AbstractServer | None = None
        self._max_connections = max_connections
        self._max_scrapes = max_scrapes
        self._write_timeout_s = write_timeout_s
        # every open connection's transport and what it is doing, oldest first
        self._open: dict[asyncio.WriteTransport, str] = {}
        self._handlers: set[asyncio.Task] = set()
        self._evicted = 0  # connections closed for newcomers since the last log line about it
        self._evicted_logged_at: float | None = None
        self._scraper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="metrics-scrape")
        self._scrape: asyncio.Future | None = None  # the exposition being built, shared by scrapes meanwhile

    async def start(self, host: str, port: int) -> tuple[str, int]:
        self._server = await asyncio.start_server(self._handle, host, port, limit=MAX_REQUEST_HEAD)
        return self._server.sockets[0].getsockname()[:2]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            handlers = list(self._handlers)  # a connection's handler does not end with the listening socket
            for handler in handlers:
                handler.cancel()
            await asyncio.gather(*handlers, return_exceptions=True)
            await self._server.wait_closed()
        if self._series is not None:
            self._series.close()
        self._scraper.shutdown(wait=False)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        transport = writer.transport
        if len(self._open) >= self._max_connections:
            self._evict(HEAD, SCRAPE, ANSWER)
        self._open[transport] = HEAD
        handler = asyncio.current_task()
        assert handler is not None  # asyncio.start_server runs each connection's handler as a task
        self._handlers.add(handler)
        answered = False
        try:
            try:
                head = await wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT_S)
            except (asyncio.LimitOverrunError, ValueError):
                await self._reply(
                    writer, "431 Request Header Fields Too Large", "text/plain", b"request header too large\n"
                )
                answered = True
                return
            if transport.is_closing():
                return  # closed for a newcomer as its head came in
            parts = head.split(b"\r\n", 1)[0].split()
            method, target = (parts[0], parts[1]) if len(parts) >= 2 else (b"", b"")
            path, _, query = target.partition(b"?")
            if path == b"/metrics" and method in (b"GET", b"HEAD"):
                if sum(
                    state in (BUILD, SCRAPE) for state in self._open.values()
                ) >= self._max_scrapes and not self._evict(SCRAPE):
                    self._open[transport] = ANSWER
                    await self._reply(writer, "503 Service Unavailable", "text/plain", b"too many scrapes at once\n")
                    answered = True
                    return
                self._open[transport] = BUILD
                answer = await self._route(method, path, query)
                self._open[transport] = SCRAPE
            else:
                answer = await self._route(method, path, query)
                self._open[transport] = ANSWER
            await self._reply(writer, *answer)
            answered = True
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self._open.pop(transport, None)  # already gone if closed for a newcomer
            self._handlers.discard(handler)
            if answered:
                writer.close()  # nothing left to send: the answer was written to the socket in full
            else:
                transport.abort()  # whatever is still buffered for a client that did not read it is dropped

    def _evict(self, *states: str) -> bool:
        """Close the oldest connection in one of ``states`` (its handler ends on the closed socket); False if none."""
        for transport, state in self._open.items():
            if state in states:
                del self._open[transport]
                transport.abort()
                self._note_eviction()
                return True
        return False

    def _note_eviction(self) -> None:
        self._evicted += 1
        now = asyncio.get_running_loop().time()
        if self._evicted_logged_at is None or now - self._evicted_logged_at >= EVICTION_LOG_INTERVAL_S:
            log.warning(
                "metrics endpoint: closed %d slow connection(s) to make room for new ones (more than %d "
                "connections or %d scrapes at once)",
                self._evicted,
                self._max_connections,
                self._max_scrapes,
            )
            self._evicted, self._evicted_logged_at = 0, now

    async def _reply(self, writer: asyncio.StreamWriter, status: str, content_type: str, body: bytes) -> None:
        """Write the answer in chunks, each handed to the socket before the next is copied, all within the write
        deadline (``TimeoutError`` past it)."""
        head = (
            f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n"
        ).encode()
        writer.transport.set_write_buffer_limits(high=0)  # drain() waits until the socket has taken every byte
        data = memoryview(head + body) if len(body) < WRITE_CHUNK else None
        async with asyncio.timeout(self._write_timeout_s):
            if data is not None:
                writer.write(data)
                await writer.drain()
                return
            writer.write(head)
            view = memoryview(body)
            for offset in range(0, len(view), WRITE_CHUNK):
                writer.write(view[offset : offset + WRITE_CHUNK])
                await writer.drain()

    async def _route(self, method: bytes, path: bytes, query: bytes = b"") -> tuple[str, str, bytes]:
        if method not in (b"GET", b"HEAD"):
            return "405 Method Not Allowed", "text/plain", b"method not allowed\n"
        if path == b"/metrics":
            try:
                return "200 OK", CONTENT_TYPE_LATEST, await self._exposition()
            except TimeoutError:
                return "503 Service Unavailable", "text/plain", b"the scrape is still being built\n"
            except Exception:
                log.exception("metrics: the scrape failed")
                return "500 Internal Server Error", "text/plain", b"scrape failed (see the proxy's log)\n"
        if path == b"/healthz":
            return "200 OK", "text/plain", b"ok\n"
        if path == b"/explain" and self._explain is not None:
            try:
                return await self._explain(query)
            except Exception:  # a bug, never the query's doing (a bad one is a 400): said once in the log
                log.exception("explain: the answer failed")
                return "500 Internal Server Error", "text/plain", b"explain failed (see the proxy's log)\n"
        if path == b"/readyz":
            why = self._not_ready()
            if why is None:
                note = self._ready_note()
                return "200 OK", "text/plain", b"ready\n" if note is None else f"ready\n{note}\n".encode()
            return "503 Service Unavailable", "text/plain", f"not ready: {why}\n".encode()
        return "404 Not Found", "text/plain", b"not found\n"

    async def _exposition(self) -> bytes:
        """The registry's text exposition, built in the scrape thread (one build at a time, shared)."""
        if self._scrape is None:
            scrape = self._scrape = asyncio.get_running_loop().run_in_executor(self._scraper, self._build)
            scrape.add_done_callback(self._scrape_done)
        return await wait_for(asyncio.shield(self._scrape), BUILD_TIMEOUT_S)

    def _scrape_done(self, scrape: asyncio.Future) -> None:
        self._scrape = None
        if not scrape.cancelled():
            scrape.exception()  # retrieved here, so a failure every waiter has already seen is not logged again
