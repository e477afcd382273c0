"""A listener: the proxy's own accept loop for one named listener.

Accepting is our own loop (``sock_accept``) rather than ``loop.create_server`` so that accepting can later be
delayed (connection creation rate, KIP-612) and a connection can be held before it gets an upstream.
"""

from __future__ import annotations

import asyncio
import logging
import socket

from proxy.client import ClientConnection, ListenerContext
from proxy.tasks import cancel_and_wait

log = logging.getLogger(__name__)

ACCEPT_ERROR_BACKOFF_S = 0.1  # after EMFILE and the like, so a full fd table does not spin the loop


class Listener:
    def __init__(self, ctx: ListenerContext, host: str, port: int) -> None:
        self.ctx = ctx
        self._host = host
        self._port = port
        self._sock: socket.socket | None = None
        self._task: asyncio.Task | None = None
        self.address: tuple[str, int] | None = None

    async def start(self) -> tuple[str, int]:
        return self.start_now()

    def start_now(self) -> tuple[str, int]:
        """Bind and start accepting; must be called from the running event loop."""
        family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
        sock = socket.create_server((self._host, self._port), family=family, backlog=1024, reuse_port=False)
        sock.setblocking(False)
        self._sock = sock
        self.address = sock.getsockname()[:2]
        self._task = asyncio.get_running_loop().create_task(self._accept_loop())
        return self.address

    async def _accept_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, _ = await loop.sock_accept(self._sock)
            except asyncio.CancelledError:
                raise
            except OSError as exc:
                log.warning("listener %s: accept failed: %s", self.ctx.name, exc)
                await asyncio.sleep(ACCEPT_ERROR_BACKOFF_S)
                continue
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            loop.create_task(self._serve(conn))

    async def _serve(self, conn: socket.socket) -> None:
        """Give an accepted socket its broker connection, then start reading from it."""
        loop = asyncio.get_running_loop()
        client = ClientConnection(self.ctx)
        try:
            client.accepted(conn.getpeername())
        except OSError:
            client.accepted(None)
        if not await client.connect_upstream():
            conn.close()
            return
        try:
            await loop.connect_accepted_socket(lambda: client, conn)
        except OSError as exc:
            log.info("listener %s: connection lost while being set up: %s", self.ctx.name, exc)
            client.close("client_closed")
            conn.close()

    async def close(self) -> None:
        """Stop accepting; connections already open are left to the caller to drain."""
        await cancel_and_wait(self._task)
        if self._sock is not None:
            self._sock.close()
