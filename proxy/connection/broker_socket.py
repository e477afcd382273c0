"""The broker-side connection: one per client connection, the only code that touches a broker socket.

A thin shell: it reports what happens on the socket (write buffer full or drained, connection lost) to the
:class:`BrokerEvents` it was made for, and does what it is told (write, read or not, close). Its reads are the
events' own: asyncio's ``get_buffer`` and ``buffer_updated`` are the callables :meth:`BrokerReader.broker_reads` gave
it when it was made (the connection's shell, :mod:`proxy.connection.shell`, which reports to it the broker's first
bytes). What the bytes mean is decided elsewhere (:mod:`proxy.connection.response_path`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol, cast

from proxy.connection.writer import Writer, writer_of


class BrokerEvents(Protocol):
    def broker_backpressure(self, on: bool) -> None: ...

    def broker_lost(self, exc: Exception | None) -> None: ...


class BrokerReader(BrokerEvents, Protocol):
    def broker_reads(self, upstream: UpstreamConnection) -> tuple[Callable[[int], memoryview], Callable[[int], None]]:
        """The connection's ``get_buffer`` and ``buffer_updated`` (asyncio's), for ``upstream``."""
        ...


class _Detached:
    """Where events go once the client connection is closed: nowhere."""

    def broker_backpressure(self, on: bool) -> None:
        pass

    def broker_lost(self, exc: Exception | None) -> None:
        pass


_DETACHED = _Detached()


class UpstreamConnection(asyncio.BufferedProtocol):
    __slots__ = ("_events", "transport", "writer", "closed", "on_first_reply", "get_buffer", "buffer_updated")

    # set by connection_made, which asyncio calls before ``create_connection`` hands this protocol out: nothing reads
    # it earlier
    transport: asyncio.Transport
    writer: Writer  # what the broker's bytes are written through (proxy/connection/writer.py), write_eof too

    def __init__(self, events: BrokerReader) -> None:
        self._events: BrokerEvents = events
        self.closed = False
        # told once, when the broker first sends something or the connection ends (a listener's setup slot)
        self.on_first_reply: Callable[[], None] | None = None
        # what asyncio calls for each read (given before the transport is made, which looks them up once)
        self.get_buffer, self.buffer_updated = events.broker_reads(self)  # type: ignore[assignment]  # (its slots)

    # -- asyncio callbacks ------------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # a stream connection's (typeshed: its base class)
        self.writer = writer_of(self.transport)

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.replied()
        events, self._events = self._events, _DETACHED
        events.broker_lost(exc)

    def pause_writing(self) -> None:
        self._events.broker_backpressure(True)

    def resume_writing(self) -> None:
        self._events.broker_backpressure(False)

    # -- control ----------------------------------------------------------------------------------------------

    def set_reading(self, on: bool) -> None:
        transport = self.transport
        if transport.is_closing():
            return
        if on:
            transport.resume_reading()
        else:
            transport.pause_reading()

    def detach(self) -> None:
        """Report nothing more (the client connection is closed); breaks the reference cycle with it."""
        self._events = _DETACHED
        self.replied()

    def replied(self) -> None:
        """The broker's first bytes, or the end without any: whoever waits for them is told, once."""
        told, self.on_first_reply = self.on_first_reply, None
        if told is not None:
            told()

    def close(self) -> None:
        if not self.transport.is_closing():
            self.transport.close()
