"""The operations endpoint: Prometheus ``/metrics``, ``/healthz`` (the process is serving) and ``/readyz`` (the
broker is reachable). A small asyncio HTTP/1.0-style server so it lives in the proxy's own event loop.

A scrape never runs on the event loop: the exposition is built in one scrape thread, where the collectors read the
proxy's state without changing it (``quota.top``, ``Rate.peek``), and scrapes that arrive while one is being built
share its result, so Prometheus servers scraping at once cost one build. The loop only reads requests and writes
the bytes."""

from __future__ import annotations

import asyncio
import gc
import logging
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Callable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from proxy.ops.entity_series import EntitySeries
from proxy.tasks import wait_for

log = logging.getLogger(__name__)

MAX_REQUEST_HEAD = 8192
READ_TIMEOUT_S = 5.0
MAX_CONNECTIONS = 64  # scrapers and probes are few; more at once are answered 503 and closed


SCRAPE_SWITCH_INTERVAL_S = 0.001


_quiet_lock = threading.Lock()
_quiet_depth = 0
_quiet_saved: tuple[bool, float] = (True, 0.005)


@contextmanager
def quiet() -> Iterator[None]:
    """Around work that walks the quota tables off the loop (a scrape, a background build of the per-entity series),
    so that the event loop waits little for the GIL meanwhile:

    * the interpreter's switch interval is 1 ms (not 5): the loop, when it wants the GIL back from the scrape
      thread, waits at most that long between two bytecodes; a request crossing the proxy takes the GIL several
      times (worst bystander wait at 10^6 tenants 39-56 ms with 5 ms, 25 ms with 1 ms);
    * the cyclic garbage collector is paused: the quota collectors hold a snapshot of up to millions of sensors,
      and a collection of the young generation while it is young walks every entry with the GIL held (about 25 ms
      per million).

    Both are process-wide: the first of overlapping users (the scrape thread and the series builder) sets them,
    the last restores them."""
    global _quiet_depth, _quiet_saved
    with _quiet_lock:
        if _quiet_depth == 0:
            _quiet_saved = (gc.isenabled(), sys.getswitchinterval())
            gc.disable()
            sys.setswitchinterval(min(_quiet_saved[1], SCRAPE_SWITCH_INTERVAL_S))
        _quiet_depth += 1
    try:
        yield
    finally:
        with _quiet_lock:
            _quiet_depth -= 1
            if _quiet_depth == 0:
                enabled, interval = _quiet_saved
                sys.setswitchinterval(interval)
                if enabled:
                    gc.enable()


def build_exposition(registry: CollectorRegistry, series: EntitySeries | None = None) -> bytes:
    """The text exposition (see :func:`quiet`); with ``series``, the per-entity quota series come from it (built
    by this scrape or served from the last background build, see :mod:`proxy.ops.entity_series`)."""
    with quiet():
        extra = series.scrape() if series is not None else b""
        return generate_latest(registry) + extra


class OpsServer:
    def __init__(self, registry: CollectorRegistry, not_ready: Callable[[], str | None],
                 exposition: Callable[[], bytes] | None = None, series: EntitySeries | None = None,
                 ready_note: Callable[[], str | None] = lambda: None) -> None:
        """``not_ready`` says why the proxy is not ready (the body of /readyz's 503), or None when it is;
        ``ready_note`` a detail worth knowing while ready (a second line of /readyz's 200 body), or None;
        ``exposition`` builds /metrics' body in the scrape thread (default: the registry's, with ``series``, the
        per-entity quota series when the registry's quota collector leaves them to it)."""
        self._registry = registry
        self._series = series
        self._build = exposition or (lambda: build_exposition(registry, series))
        self._not_ready = not_ready
        self._ready_note = ready_note
        self._server: asyncio.AbstractServer | None = None
        self._open = 0
        self._scraper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="metrics-scrape")
        self._scrape: asyncio.Future | None = None  # the exposition being built, shared by scrapes meanwhile

    async def start(self, host: str, port: int) -> tuple[str, int]:
        self._server = await asyncio.start_server(self._handle, host, port, limit=MAX_REQUEST_HEAD)
        return self._server.sockets[0].getsockname()[:2]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        if self._series is not None:
            self._series.close()
        self._scraper.shutdown(wait=False)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._open += 1
        try:
            if self._open > MAX_CONNECTIONS:
                await self._reply(writer, "503 Service Unavailable", "text/plain", b"too many connections\n")
                return
            try:
                head = await wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
            except (asyncio.LimitOverrunError, ValueError):
                await self._reply(writer, "431 Request Header Fields Too Large", "text/plain",
                                  b"request header too large\n")
                return
            parts = head.split(b"\r\n", 1)[0].split()
            method, path = (parts[0], parts[1].split(b"?")[0]) if len(parts) >= 2 else (b"", b"")
            await self._reply(writer, *await self._route(method, path))
        except (asyncio.TimeoutError, asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self._open -= 1
            writer.close()

    @staticmethod
    async def _reply(writer: asyncio.StreamWriter, status: str, content_type: str, body: bytes) -> None:
        writer.write(
            f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n".encode() + body
        )
        await writer.drain()

    async def _route(self, method: bytes, path: bytes) -> tuple[str, str, bytes]:
        if method not in (b"GET", b"HEAD"):
            return "405 Method Not Allowed", "text/plain", b"method not allowed\n"
        if path == b"/metrics":
            try:
                return "200 OK", CONTENT_TYPE_LATEST, await self._exposition()
            except Exception:
                log.exception("metrics: the scrape failed")
                return "500 Internal Server Error", "text/plain", b"scrape failed (see the proxy's log)\n"
        if path == b"/healthz":
            return "200 OK", "text/plain", b"ok\n"
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
        return await asyncio.shield(self._scrape)

    def _scrape_done(self, scrape: asyncio.Future) -> None:
        self._scrape = None
        if not scrape.cancelled():
            scrape.exception()  # retrieved here, so a failure every waiter has already seen is not logged again
