"""The operations endpoint: Prometheus ``/metrics``, ``/healthz`` (the process is serving) and ``/readyz`` (the
broker is reachable). A small asyncio HTTP/1.0-style server so it lives in the proxy's own event loop."""

from __future__ import annotations

import asyncio
import logging
from typing import Callable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

log = logging.getLogger(__name__)

MAX_REQUEST_HEAD = 8192
READ_TIMEOUT_S = 5.0
MAX_CONNECTIONS = 64  # scrapers and probes are few; more at once are answered 503 and closed


class OpsServer:
    def __init__(self, registry: CollectorRegistry, is_ready: Callable[[], bool]) -> None:
        self._registry = registry
        self._is_ready = is_ready
        self._server: asyncio.AbstractServer | None = None
        self._open = 0

    async def start(self, host: str, port: int) -> tuple[str, int]:
        self._server = await asyncio.start_server(self._handle, host, port, limit=MAX_REQUEST_HEAD)
        return self._server.sockets[0].getsockname()[:2]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._open += 1
        try:
            if self._open > MAX_CONNECTIONS:
                await self._reply(writer, "503 Service Unavailable", "text/plain", b"too many connections\n")
                return
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
            except (asyncio.LimitOverrunError, ValueError):
                await self._reply(writer, "431 Request Header Fields Too Large", "text/plain",
                                  b"request header too large\n")
                return
            parts = head.split(b"\r\n", 1)[0].split()
            method, path = (parts[0], parts[1].split(b"?")[0]) if len(parts) >= 2 else (b"", b"")
            await self._reply(writer, *self._route(method, path))
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

    def _route(self, method: bytes, path: bytes) -> tuple[str, str, bytes]:
        if method not in (b"GET", b"HEAD"):
            return "405 Method Not Allowed", "text/plain", b"method not allowed\n"
        if path == b"/metrics":
            return "200 OK", CONTENT_TYPE_LATEST, generate_latest(self._registry)
        if path == b"/healthz":
            return "200 OK", "text/plain", b"ok\n"
        if path == b"/readyz":
            if self._is_ready():
                return "200 OK", "text/plain", b"ready\n"
            return "503 Service Unavailable", "text/plain", b"not ready: broker unreachable\n"
        return "404 Not Found", "text/plain", b"not found\n"
