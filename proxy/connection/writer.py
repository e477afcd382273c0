"""What the connection writes each socket through: the transport itself, or, on uvloop's plain TCP transport where
the connection extension is built, its ``DirectWrite`` (proxy/connection/native/direct.c), which sends on the socket
directly while the transport holds nothing unsent and hands everything else to the transport's own methods.

Both have ``write``, ``writelines`` and ``write_eof``; a connection calls ``write_eof`` through the writer (never the
transport), so that nothing is sent directly after it. The pure path (``KAFKA_QUOTA_PROXY_PURE_PYTHON=1``, or no C
compiler) uses the transport as before; so do TLS transports (their socket carries TLS records, not the frames) and
every event loop but uvloop's."""

from __future__ import annotations

import asyncio
from typing import Protocol

from proxy.connection.compiled import NATIVE


class Writer(Protocol):
    def write(self, data: bytes | bytearray | memoryview, /) -> None: ...

    def writelines(self, frames: list[bytes | bytearray | memoryview], /) -> None: ...

    def write_eof(self) -> None: ...


def _plain_tcp() -> type | None:
    """uvloop's plain TCP transport class, if uvloop is installed."""
    try:
        import uvloop.loop
    except ImportError:
        return None
    found = getattr(uvloop.loop, "TCPTransport", None)  # not in uvloop's stubs
    return found if isinstance(found, type) else None


PLAIN_TCP = _plain_tcp()


def writer_of(transport: asyncio.Transport) -> Writer:
    """The writer of ``transport`` (see the module's docstring)."""
    if NATIVE is None or PLAIN_TCP is None or type(transport) is not PLAIN_TCP:
        return transport
    sock = transport.get_extra_info("socket")
    fd = -1 if sock is None else sock.fileno()
    return transport if fd < 0 else NATIVE.DirectWrite(transport, fd)
