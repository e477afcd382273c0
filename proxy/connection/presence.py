"""Whether a client is still connected, asked of the kernel without reading: a socket that has received the client's
FIN is ``CLOSE_WAIT`` and one reset is ``CLOSE`` (Linux ``TCP_INFO``'s ``tcpi_state``), even while the requests the
client sent before are still waiting to be read. Asked only after many requests unheard from the client
(:attr:`proxy.connection.flow.Flow.unheard`): one system call, about 3 us. Where ``TCP_INFO`` is not available
the client counts as connected, and its close is seen when reading meets it.

A FIN may be a half-close (the client still reads its answers: the proxy passes it on to the broker) or a full
close: the core counts a half-closed client as present only while it is owed answers. An answer written to a client
that has closed altogether draws its reset, which the next look sees."""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import asyncio

PRESENT, HALF_CLOSED, GONE = "present", "half_closed", "gone"
TCP_ESTABLISHED, TCP_CLOSE_WAIT = 1, 8  # tcpi_state (include/net/tcp_states.h)
_TCP_INFO = getattr(socket, "TCP_INFO", None)


def client_state(transport: asyncio.BaseTransport | None) -> str:
    """PRESENT, HALF_CLOSED (its FIN received) or GONE (reset, or its socket closed)."""
    if transport is None or transport.is_closing():
        return GONE
    sock = transport.get_extra_info("socket")
    if sock is None or _TCP_INFO is None:
        return PRESENT
    try:
        state = sock.getsockopt(socket.IPPROTO_TCP, _TCP_INFO, 1)[0]
    except (OSError, ValueError):  # closed under us (uvloop reports a negative descriptor)
        return GONE
    return PRESENT if state == TCP_ESTABLISHED else HALF_CLOSED if state == TCP_CLOSE_WAIT else GONE


def gone_unheard(sock: socket.socket) -> bool:
    """A socket just accepted whose client has gone having sent nothing: its FIN with nothing before it to read, or
    its reset (one non-blocking peek, no byte taken). Such a client is owed nothing, and costs no broker connection:
    a churning client's connections, closed at once, pile up in the accept queue and are gone by their turn. A
    client that sent a request and then half-closed is served (it may be reading its answer), as Kafka serves it."""
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except (BlockingIOError, InterruptedError):
        return False  # connected, nothing sent yet
    except OSError:
        return True  # reset
