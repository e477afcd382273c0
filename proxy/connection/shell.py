"""What the event loop calls at every read of either socket of one client connection: the read buffers' sizes and
the bytes read, through the core's splitters and paths, then the flow's state applied in its common case.

asyncio calls ``get_buffer`` and ``buffer_updated`` for every read (uvloop: once per wake-up of each socket), so
these are the connection's most frequent calls. :class:`~proxy.connection.client_socket.ClientConnection` and its
:class:`~proxy.connection.broker_socket.UpstreamConnection` hand the loop this object's methods as their own
(:meth:`PureShell.client_buffer`, :meth:`~PureShell.client_read`, :meth:`~PureShell.broker_buffer`,
:meth:`~PureShell.broker_read`), each one call through the core's (:meth:`~proxy.connection.core.ConnectionCore.read_size`,
:meth:`~proxy.connection.core.ConnectionCore.client_bytes` and their broker-side pair); the C twin does what those
do itself, with the parts :meth:`~proxy.connection.core.ConnectionCore.reading_parts` gives it. The common case is an open connection: both
sockets attached (:meth:`PureShell.open`), not closed. A client read before it (a TLS client's before its broker
connection opened) goes to the connection, which holds it back; the broker's before the client socket is wrapped
takes the same path as the rest, with no client transport; after the close, reads do nothing (the buffers are given whole, as the core's stand-in for a closed one gives
them). :meth:`PureShell.apply` is the connection's ``_apply``: its common case (nothing
to replay, release, pause or time) here, the rest the connection's ``_apply_state``.

:class:`PureShell` is the reference of the C twin (``proxy.connection._native.Shell``,
proxy/connection/native/shell.c), which the event loop calls without a Python frame; :data:`Shell` is the one
:mod:`proxy.connection.compiled` chose. The shell holds the connection (for the other cases) until :meth:`close`
drops it, so a closed connection is freed without the cycle collector.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from proxy.codec.errors import ProtocolError
from proxy.connection.buffers import SharedReadBuffer
from proxy.connection.compiled import NATIVE
from proxy.connection.counted import Counted
from proxy.connection.flow import THROTTLED_READ_BYTES
from proxy.connection.splice import SPLICE_MIN_BYTES
from proxy.connection.write_batch import WriteBatch

if TYPE_CHECKING:
    from proxy.connection.broker_socket import UpstreamConnection
    from proxy.connection.core import ConnectionCore
    from proxy.connection.splicing import Splicer

NOT_OPEN, OPEN, CLOSED = 0, 1, 2  # the shell's state: reads take the common path only while OPEN


class ReadBuffers(Protocol):
    """Where the reads of a listener's connections go (its context's two shared buffers)."""

    @property
    def request_buffer(self) -> SharedReadBuffer: ...

    @property
    def response_buffer(self) -> SharedReadBuffer: ...


class PureShell:
    __slots__ = (
        "_conn",
        "_core",
        "_flow",
        "_request_buffer",
        "_response_buffer",
        "_writes",
        "_splices",
        "_counted",
        "_loop",
        "_clock",
        "_client_transport",
        "_broker_transport",
        "_upstream",
        "state",
        "reading_client",
        "reading_broker",
    )

    def __init__(
        self,
        conn: Any,
        core: ConnectionCore,
        buffers: ReadBuffers,
        writes: WriteBatch,
        splices: Splicer,
        counted: Counted,
        loop: asyncio.AbstractEventLoop,
        clock: Callable[[], int],
    ) -> None:
        """``conn``: the :class:`~proxy.connection.client_socket.ClientConnection` whose methods take the other
        cases (``_read_client``, ``_frame_error``, ``_broker_error``, ``_apply_state``); ``clock``:
        the connection's (ns), which the core reads too; ``buffers``: the listener's context, whose shared read buffers
        the reads fill."""
        self._conn = conn
        self._core = core
        self._flow = core.flow
        self._request_buffer = buffers.request_buffer
        self._response_buffer = buffers.response_buffer
        self._writes = writes
        self._splices = splices
        self._counted = counted
        self._loop = loop
        self._clock = clock
        self._client_transport: asyncio.Transport | None = None  # set by open(), with the broker's
        self._broker_transport: asyncio.Transport
        self._upstream: UpstreamConnection | None = None
        self.state = NOT_OPEN
        self.reading_client = True  # as the socket code last set each side's reading (the flow's state applied)
        self.reading_broker = True

    def broker_reads(self, upstream: UpstreamConnection) -> tuple[Any, Any]:
        """The broker connection's ``get_buffer`` and ``buffer_updated`` (asked by it when it is made)."""
        self._upstream = upstream
        return self.broker_buffer, self.broker_read

    def open(self, client: asyncio.Transport, upstream: UpstreamConnection) -> None:
        """Both sockets are attached and the connection open: reads take the common path from now on."""
        if self.state == NOT_OPEN:
            self._client_transport = client
            self._broker_transport = upstream.transport
            self._upstream = upstream
            self.state = OPEN

    def close(self) -> None:
        """The connection closed: reads find nothing to do (the buffers given whole), and every reference it held
        back to the connection is dropped."""
        if self.state == CLOSED:
            return
        was_open = self.state == OPEN
        self.state = CLOSED
        del self._conn, self._core, self._flow
        del self._writes, self._splices, self._counted, self._loop, self._clock
        self._upstream = None
        self._client_transport = None
        if was_open:
            del self._broker_transport

    # -- the client socket ----------------------------------------------------------------------------------------

    def client_buffer(self, sizehint: int) -> memoryview:
        """The client read's buffer: :meth:`ConnectionCore.read_size` of the shared request buffer."""
        view = self._request_buffer.view
        if self.state == CLOSED:
            return view
        # at a frame boundary, while splicing is possible, a small read: a large frame's rest is spliced, not read
        size = self._core.read_size(len(view), self._splices.boundary_read_bytes)
        return view if size == len(view) else view[:size]

    def client_read(self, nbytes: int) -> None:
        """``nbytes`` read from the client into :meth:`client_buffer`'s view: split, acted on, written on."""
        state = self.state
        if state != OPEN:
            if state == NOT_OPEN:
                self._conn._read_client(nbytes)
            return
        conn = self._conn  # (held for the read: it may close the connection)
        self._flow.client_read(self._clock())  # the idle timeout starts anew
        buffer = self._request_buffer
        data = buffer.view[:nbytes]
        writes, broker = self._writes, self._broker_transport
        batch = writes.start(True)
        try:
            streaming = self._core.client_bytes(data)
        except ProtocolError as exc:
            conn._frame_error("request", exc)
            return
        finally:
            if batch:
                writes.send()
        if broker.get_write_buffer_size():
            buffer.hand_off(nbytes)  # the broker transport may keep a reference to what it could not send yet
        elif self.state == CLOSED:
            return
        elif streaming >= SPLICE_MIN_BYTES and self._splices.possible:  # (the splicer looks again)
            self._splices.after_client_read()
        self.apply()

    # -- the broker socket ----------------------------------------------------------------------------------------

    def broker_buffer(self, sizehint: int) -> memoryview:
        """The broker read's buffer: :meth:`ConnectionCore.response_read_size` of the shared response buffer."""
        view = self._response_buffer.view
        if self.state == CLOSED:
            return view
        size = self._core.response_read_size(len(view), self._splices.boundary_read_bytes)
        return view if size == len(view) else view[:size]

    def broker_read(self, nbytes: int) -> None:
        """``nbytes`` read from the broker into :meth:`broker_buffer`'s view: split, acted on, written on."""
        if self.state == CLOSED:
            return  # the connection is closed: nothing more is reported
        upstream = self._upstream
        if upstream is not None and upstream.on_first_reply is not None:
            upstream.replied()
        buffer = self._response_buffer
        data = buffer.view[:nbytes]
        if self.state == CLOSED:
            return  # (closed by whoever was told of the first reply)
        # (before the client socket is wrapped there is no client transport: unsolicited bytes, which a response
        # matching no request makes a ProtocolError of)
        conn, writes, client = self._conn, self._writes, self._client_transport
        batch = writes.start(True)
        try:
            streaming = self._core.broker_bytes(data)
        except ProtocolError as exc:
            conn._broker_error(exc)
            return
        finally:
            if batch:
                writes.send()
        if client is not None and client.get_write_buffer_size():
            buffer.hand_off(nbytes)
        elif self.state == CLOSED:
            return
        elif streaming >= SPLICE_MIN_BYTES and self._splices.possible:
            self._splices.after_broker_read()
        self.apply()

    # -- applying the flow ----------------------------------------------------------------------------------------

    def apply(self) -> None:
        """After every event: the common case (nothing to replay, release, pause or time, the timer armed already;
        the bound of requests only counted), or the connection's ``_apply_state``."""
        if self.state == CLOSED:
            return
        flow = self._flow
        if flow.unhindered and self.reading_client and self.reading_broker:
            counted = self._counted
            if flow.at_bound == (counted.at_bound_since is None):  # Counted.follow_bound, inline
                counted.bound_changed(self._loop.time())
            return
        self._conn._apply_state()


if TYPE_CHECKING or NATIVE is None:  # typed as the pure class: the twin has its methods
    Shell = PureShell
else:
    NATIVE.configure_shell(THROTTLED_READ_BYTES, SPLICE_MIN_BYTES, Counted.bound_changed)  # done inline: change both
    Shell = NATIVE.Shell
