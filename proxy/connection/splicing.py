"""One client connection's splices: when the rest of a streamed frame moves in the kernel, and what follows.

A :class:`Splicer` is part of the socket shell (:class:`proxy.connection.client_socket.ClientConnection` holds one)
and owns everything about splicing its two sockets: their file descriptors, the splice running in each direction,
and the writes held while one runs. It is handed what it needs and nothing more: the connection as
:class:`SpliceEvents` (what a splice tells it) and the counter of bytes spliced when made; then, as each comes to
exist, the connection's core as :class:`StreamingCore` (how much of the frame being streamed is still to come, and
where to report the bytes a splice moved; the core writes through the splicer, so it comes second) and the two
transports.

After a read, if the frame being streamed has at least :data:`~proxy.connection.splice.SPLICE_MIN_BYTES` still to
come and the destination's transport has nothing waiting to be written, the source transport is paused and a
:class:`~proxy.connection.splice.Splice` moves the rest. Meanwhile every write meant for the destination waits (none
is expected: requests are forwarded one frame at a time and local answers wait for the response being streamed);
a client that takes no response bytes is back-pressure, as its transport's full write buffer is. When the splice
ends the core is told how many bytes passed, the frame ends as if they had been fed, and the connection resumes
reading the source as its flow says: an end of stream or an error met by the splice is met again by its transport,
so half-closes and lost connections take their ordinary paths. A connection that closes closes its splicer first.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from proxy.codec.primitives import Bytes
from proxy.connection.splice import (
    BOUNDARY_READ_BYTES,
    SOURCE,
    SPLICE_MIN_BYTES,
    UNSUPPORTED,
    Failure,
    Splice,
    open_splice,
)
from proxy.connection.writer import Writer, writer_of

if TYPE_CHECKING:
    from prometheus_client import Counter

    from proxy.connection.broker_socket import UpstreamConnection

REQUEST, RESPONSE = "request", "response"  # the directions, as the spliced-bytes metric labels them


class StreamingCore(Protocol):
    """What a splicer reads of the connection's core, and tells it."""

    @property
    def request_streaming(self) -> int: ...  # bytes of the request being streamed still to come (0: none is)

    @property
    def response_streaming(self) -> int: ...

    def requests_passed(self, nbytes: int) -> None: ...  # the streamed request's bytes reached the broker unread

    def responses_passed(self, nbytes: int) -> None: ...


class Routed(Protocol):
    """The writes a splicer routes (:meth:`proxy.connection.write_batch.PureWriteBatch.route`)."""

    def route(self, client: bool, write: Callable[[Bytes], None], send: Callable[[list[Bytes]], None]) -> None: ...


class SpliceEvents(Protocol):
    """What a splicer tells its connection (back-pressure in asyncio's protocol words)."""

    def spliced_client_read(self) -> None:
        """Bytes came from the client (the idle timeout starts anew, as for a read)."""

    def pause_writing(self) -> None:
        """The client takes no more response bytes, as when its transport's write buffer is full."""

    def resume_writing(self) -> None:
        """The client takes response bytes again."""

    def splice_ended(self, direction: str) -> None:
        """A splice ended and the frame with it: read its source again if the flow says so."""

    def splice_lost(self, client: bool, exc: OSError) -> None:
        """A splice found the client's socket (``client``) or the broker's gone, as its transport would have."""


class _Socket(Protocol):
    """What the splicer reads of a transport's socket (asyncio's ``TransportSocket``, uvloop's pseudo-socket)."""

    def fileno(self) -> int: ...


class _NoCore:
    """The core before it is attached and once the splicer is closed: no frame being streamed."""

    request_streaming = response_streaming = 0

    def requests_passed(self, nbytes: int) -> None:
        pass

    def responses_passed(self, nbytes: int) -> None:
        pass


class _NoEvents:
    """Where a closed splicer's events would go: nowhere (it holds no reference back to the connection)."""

    def spliced_client_read(self) -> None:
        pass

    def pause_writing(self) -> None:
        pass

    def resume_writing(self) -> None:
        pass

    def splice_ended(self, direction: str) -> None:
        pass

    def splice_lost(self, client: bool, exc: OSError) -> None:
        pass


_NO_CORE = _NoCore()
_NO_EVENTS = _NoEvents()


class Splicer:
    """The splices of one connection, client to broker (``request``) and broker to client (``response``)."""

    __slots__ = (
        "_loop",
        "_core",
        "_events",
        "_spliced_bytes",
        "_listener",
        "_enabled",
        "_client",
        "_client_writer",
        "_broker",
        "_client_fd",
        "_broker_fd",
        "possible",
        "boundary_read_bytes",
        "request",
        "response",
        "_later",
        "_writes",
    )

    # set by attach_client and attach_broker, before anything is read from either socket (so before any write)
    _client: asyncio.Transport
    _client_writer: Writer  # what the client's bytes are written through (proxy/connection/writer.py)
    _broker: UpstreamConnection

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        events: SpliceEvents,
        *,
        enabled: bool,
        spliced_bytes: Counter,
        listener: str,
    ) -> None:
        """``enabled``: this listener splices (``connections.splice``, the platform, no TLS); ``spliced_bytes``: the
        counter labelled (listener, direction)."""
        self._loop = loop
        self._core: StreamingCore = _NO_CORE
        self._events: SpliceEvents = events
        self._spliced_bytes = spliced_bytes
        self._listener = listener
        self._enabled = enabled
        self._client_fd = self._broker_fd = -1
        self.possible = False  # both sockets' fds are known and splice(2) may move between them
        # while possible, a read of either socket at a frame boundary takes at most this much (0: no bound), so that
        # a large frame's rest is spliced, not read (the socket code's shell applies it with its one look at the frame
        # being read: proxy.connection.shell; ConnectionCore.read_size and response_read_size likewise)
        self.boundary_read_bytes = 0
        self.request: Splice | None = None  # moving the rest of a request, client to broker
        self.response: Splice | None = None  # moving the rest of a response, broker to client
        # writes asked for while a splice owns their socket (to the broker?, the bytes): sent after it, in order
        self._later: tuple[tuple[bool, bytes], ...] = ()
        self._writes: Routed | None = None  # the connection's write batch, routed by attach_writes

    # -- the sockets -----------------------------------------------------------------------------------------------

    def attach_core(self, core: StreamingCore) -> None:
        self._core = core

    def attach_writes(self, writes: Routed) -> None:
        """The connection's writes (:class:`proxy.connection.write_batch.PureWriteBatch`), made with this splicer's
        ``write_*`` and ``send_*``: from now on each side of it is routed straight to its transport while no splice
        owns that socket, and back through this splicer while one does (a Python call fewer per write)."""
        self._writes = writes

    def _route(self, client: bool) -> None:
        """Route a side of the writes (see :meth:`attach_writes`) as its socket is now: spliced or not."""
        writes = self._writes
        if writes is None:
            return
        if client:
            if self.response is None:
                writes.route(True, self._client_writer.write, self._client_writer.writelines)
            else:
                writes.route(True, self.write_client, self.send_client)
        elif self.request is None:
            writes.route(False, self._broker.writer.write, self._broker.writer.writelines)
        else:
            writes.route(False, self.write_broker, self.send_broker)

    def attach_client(self, transport: asyncio.Transport) -> None:
        self._client = transport
        self._client_writer = writer_of(transport)
        self._client_fd = self._fd(transport)
        self._set_possible(self._client_fd >= 0 <= self._broker_fd)
        self._route(True)

    def attach_broker(self, upstream: UpstreamConnection) -> None:
        """``upstream``: the :class:`~proxy.connection.broker_socket.UpstreamConnection`, connected."""
        self._broker = upstream
        self._broker_fd = self._fd(upstream.transport)
        self._set_possible(self._client_fd >= 0 <= self._broker_fd)
        self._route(False)

    def _set_possible(self, possible: bool) -> None:
        self.possible = possible
        self.boundary_read_bytes = BOUNDARY_READ_BYTES if possible else 0

    def _fd(self, transport: asyncio.BaseTransport) -> int:
        """The fd of a plain socket transport, if this listener splices; -1 otherwise."""
        sock: _Socket | None = transport.get_extra_info("socket") if self._enabled else None
        return -1 if sock is None else sock.fileno()

    @property
    def moving(self) -> bool:
        """A splice runs in either direction."""
        return self.request is not None or self.response is not None

    # -- writes: held while a splice owns the socket -----------------------------------------------------------

    def write_client(self, data: Bytes) -> None:
        if self.response is not None:
            self._later += ((False, bytes(data)),)
        else:
            self._client_writer.write(data)

    def write_broker(self, data: Bytes) -> None:
        if self.request is not None:
            self._later += ((True, bytes(data)),)
        else:
            self._broker.writer.write(data)

    def send_client(self, frames: list[Bytes]) -> None:
        """The writes queued for the client while a read was split (:mod:`proxy.connection.write_batch`): one
        ``writelines`` (a single frame is written by the batch itself); frame by frame while a splice to the client
        runs (each then waits)."""
        if self.response is not None:
            for data in frames:
                self.write_client(data)
        else:
            self._client_writer.writelines(frames)

    def send_broker(self, frames: list[Bytes]) -> None:
        """Likewise for the writes queued for the broker."""
        if self.request is not None:
            for data in frames:
                self.write_broker(data)
        else:
            self._broker.writer.writelines(frames)

    # -- starting ------------------------------------------------------------------------------------------------

    def after_client_read(self) -> None:
        """The client's bytes were fed and the broker's transport has nothing waiting: splice the rest of a request
        being streamed if enough of it is still to come."""
        if self.possible and self._core.request_streaming >= SPLICE_MIN_BYTES:
            splice = open_splice(
                self._loop,
                self._client_fd,
                self._broker_fd,
                self._core.request_streaming,
                done=self._requests_spliced,
                blocked=_ignore,
                read=self._client_sent,
            )
            if splice is not None:  # None: out of fds for the pipe; this frame is copied
                self.request = splice
                self._route(False)
                self._client.pause_reading()
                splice.start()

    def after_broker_read(self) -> None:
        """Likewise for a response being streamed, once the client's transport has nothing waiting."""
        if self.possible and self._core.response_streaming >= SPLICE_MIN_BYTES:
            splice = open_splice(
                self._loop,
                self._broker_fd,
                self._client_fd,
                self._core.response_streaming,
                done=self._responses_spliced,
                blocked=self._client_blocked,
                read=_ignore,
            )
            if splice is not None:
                self.response = splice
                self._route(True)
                self._broker.transport.pause_reading()
                splice.start()

    # -- while it runs -------------------------------------------------------------------------------------------

    def _client_sent(self) -> None:
        self._events.spliced_client_read()

    def _client_blocked(self, on: bool) -> None:
        if on:
            self._events.pause_writing()
        else:
            self._events.resume_writing()

    # -- ending --------------------------------------------------------------------------------------------------

    def _requests_spliced(self, moved: int, failure: Failure | None) -> None:
        self.request = None
        self._route(False)  # (what waited goes first: _ended sends it before anything else can write)
        self._ended(REQUEST, moved, failure)

    def _responses_spliced(self, moved: int, failure: Failure | None) -> None:
        self.response = None
        self._route(True)
        self._ended(RESPONSE, moved, failure)

    def _ended(self, direction: str, moved: int, failure: Failure | None) -> None:
        if moved:
            self._spliced_bytes.labels(self._listener, direction).inc(moved)
        if failure is not None and failure[0] != UNSUPPORTED:  # as its transport would have found it: a side is lost
            self._events.splice_lost((failure[0] == SOURCE) == (direction == REQUEST), failure[1])
            return
        later, self._later = self._later, ()
        for to_broker, data in later:
            (self.write_broker if to_broker else self.write_client)(data)
        if failure is not None:  # UNSUPPORTED: these sockets cannot be spliced (nothing moved): copied from now on
            self._client_fd = self._broker_fd = -1
            self._set_possible(False)
        elif direction == REQUEST:
            self._core.requests_passed(moved)  # the frame ends (its latency, the answers behind it) as if fed
        else:
            self._core.responses_passed(moved)
        self._events.splice_ended(direction)

    def close(self) -> None:
        """The connection closes: stop both splices now (their duplicate fds would keep the sockets open), splice no
        more, and drop every reference back to the connection."""
        for direction, splice in ((REQUEST, self.request), (RESPONSE, self.response)):
            if splice is not None:
                splice.cancel()
                if splice.moved:
                    self._spliced_bytes.labels(self._listener, direction).inc(splice.moved)
        self.request = self.response = None
        self._set_possible(False)
        self._client_fd = self._broker_fd = -1
        self._later = ()
        # the references back to the connection dropped (its transports stay, closing)
        self._core, self._events, self._writes = _NO_CORE, _NO_EVENTS, None


def _ignore(*_args: object) -> None:
    pass
