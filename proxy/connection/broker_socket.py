"""The broker-side connection: one per client connection, the only code that touches a broker socket.

A thin shell: it reports what happens on the socket (bytes arrived, write buffer full or drained, connection
lost) to the :class:`BrokerEvents` it was made for, and does what it is told (write, read or not, close). What
the bytes mean is decided elsewhere (:mod:`proxy.connection.response_path`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol, cast

from proxy.connection.buffers import SharedReadBuffer


class BrokerEvents(Protocol):
    def broker_data(self, data: memoryview) -> None: ...

    def broker_read_size(self, available: int) -> int: ...

    def broker_backpressure(self, on: bool) -> None: ...

    def broker_lost(self, exc: Exception | None) -> None: ...


class _Detached:
    """Where events go once the client connection is closed: nowhere."""

    def broker_data(self, data: memoryview) -> None:
        pass

    def broker_read_size(self, available: int) -> int:
        return available

    def broker_backpressure(self, on: bool) -> None:
        pass

    def broker_lost(self, exc: Exception | None) -> None:
        pass


_DETACHED = _Detached()


class UpstreamConnection(asyncio.BufferedProtocol):
    __slots__ = ("_events", "_buffer", "transport", "closed", "on_first_reply")

    # set by connection_made, which asyncio calls before ``create_connection`` hands this protocol out: nothing reads
    # it earlier
    transport: asyncio.Transport

    def __init__(self, events: BrokerEvents, buffer: SharedReadBuffer) -> None:
        self._events = events
        self._buffer = buffer
        self.closed = False
        # told once, when the broker first sends something or the connection ends (a listener's setup slot)
        self.on_first_reply: Callable[[], None] | None = None

    # -- asyncio callbacks ------------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # a stream connection's (typeshed: its base class)

    def get_buffer(self, sizehint: int) -> memoryview:
        view = self._buffer.view
        size = self._events.broker_read_size(len(view))
        return view if size == len(view) else view[:size]

    def buffer_updated(self, nbytes: int) -> None:
        if self.on_first_reply is not None:
            self._replied()
        self._events.broker_data(self._buffer.view[:nbytes])

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._replied()
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
        self._replied()

    def _replied(self) -> None:
        """The broker's first bytes, or the end without any: whoever waits for them is told, once."""
        told, self.on_first_reply = self.on_first_reply, None
        if told is not None:
            told()

    def close(self) -> None:
        if not self.transport.is_closing():
            self.transport.close()
