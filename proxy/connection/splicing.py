"""The client connection's splicing half: when the rest of a streamed frame moves in the kernel, and what follows.

Part of the socket shell (:class:`proxy.connection.client_socket.ClientConnection` inherits it). After a read, if
the frame being streamed has at least :data:`~proxy.connection.splice.SPLICE_MIN_BYTES` still to come and the
destination's transport has nothing waiting to be written, the source transport is paused and a
:class:`~proxy.connection.splice.Splice` moves the rest. Meanwhile every write meant for the destination waits (none
is expected: requests are forwarded one frame at a time and local answers wait for the response being streamed);
a client that takes no response bytes is back-pressure, as its transport's full write buffer is. When the splice
ends the frame splitter is told how many bytes passed, the frame ends as if they had been fed, and reading the
source resumes as the flow says: an end of stream or an error met by the splice is met again by its transport, so
half-closes and lost connections take their ordinary paths. A connection that closes cancels its splices first.
"""

from __future__ import annotations

import time

from proxy.connection.splice import BOUNDARY_READ_BYTES, SOURCE, UNSUPPORTED, Splice, open_splice


class Splicing:
    """Mixed into the client connection; uses its core, flow, transports, ``_apply``, ``close`` and ``broker_lost``."""

    _client_fd = -1  # the client socket's fd when this connection may splice (-1: copy only)
    _broker_fd = -1
    _request_splice: Splice | None = None  # moving the rest of a request, client to broker
    _response_splice: Splice | None = None  # moving the rest of a response, broker to client
    _later: tuple = ()  # writes asked for while a splice owns their socket: sent after it, in order

    def _splice_fd(self, transport) -> int:
        """The fd of a plain socket transport, if this listener splices; -1 otherwise."""
        sock = transport.get_extra_info("socket") if self.ctx.splice else None
        return -1 if sock is None else sock.fileno()

    def broker_read_size(self, available: int) -> int:
        """How much of a read buffer of ``available`` bytes the next broker read may fill."""
        if self._client_fd >= 0 and available > BOUNDARY_READ_BYTES and not self.core.response_remaining:
            return BOUNDARY_READ_BYTES  # at a boundary: a large response's rest is better spliced than read
        return available

    # -- writes: held while a splice owns the socket -------------------------------------------------------------

    def _write_client(self, data) -> None:
        if self._response_splice is not None:
            self._later += ((False, bytes(data)),)
        else:
            self.transport.write(data)

    def _write_broker(self, data) -> None:
        if self._request_splice is not None:
            self._later += ((True, bytes(data)),)
        else:
            self.upstream.transport.write(data)

    # -- starting ------------------------------------------------------------------------------------------------

    def _splice_requests(self) -> None:
        splice = open_splice(self._loop, self._client_fd, self._broker_fd, self.core.request_streaming,
                             done=self._requests_spliced, blocked=_ignore, read=self._client_sent)
        if splice is not None:  # None: out of fds for the pipe; this frame is copied
            self._request_splice = splice
            self.transport.pause_reading()
            splice.start()

    def _splice_responses(self) -> None:
        splice = open_splice(self._loop, self._broker_fd, self._client_fd, self.core.response_streaming,
                             done=self._responses_spliced, blocked=self._client_blocked, read=_ignore)
        if splice is not None:
            self._response_splice = splice
            self.upstream.transport.pause_reading()
            splice.start()

    # -- while it runs -------------------------------------------------------------------------------------------

    def _client_sent(self) -> None:
        self.flow.client_read(time.monotonic_ns())  # the idle timeout starts anew, as for a read

    def _client_blocked(self, on: bool) -> None:
        """The client takes no more response bytes (or takes them again): as its transport's write buffer filling."""
        self.flow.client_backpressure(on, time.monotonic_ns())
        self._apply()

    # -- ending --------------------------------------------------------------------------------------------------

    def _requests_spliced(self, moved: int, failure) -> None:
        self._request_splice = None
        self._splice_ended("request", moved, failure, self.core.requests_passed)
        if self._closed_reason is None and self._reading_client and not self._awaiting_upstream:
            self.transport.resume_reading()  # the client's end, if the splice met it, is met again here
        self._apply()

    def _responses_spliced(self, moved: int, failure) -> None:
        self._response_splice = None
        self._splice_ended("response", moved, failure, self.core.responses_passed)
        if self._closed_reason is None:
            self.upstream.set_reading(self._reading_broker)  # the broker's end, if the splice met it, likewise
        self._apply()

    def _splice_ended(self, direction: str, moved: int, failure, passed) -> None:
        if moved:
            self.ctx.metrics.spliced_bytes.labels(self.ctx.name, direction).inc(moved)
        if self._closed_reason is not None:
            return
        side, exc = failure or (None, None)
        if side is not None and side != UNSUPPORTED:  # as its transport would have found it: that side is lost
            if (side == SOURCE) == (direction == "request"):
                self.close("client_closed")
            else:
                self.broker_lost(exc)
            return
        later, self._later = self._later, ()
        for to_broker, data in later:
            (self._write_broker if to_broker else self._write_client)(data)
        if side == UNSUPPORTED:  # these sockets cannot be spliced (nothing moved): this connection copies from now on
            self._client_fd = self._broker_fd = -1
        else:
            passed(moved)  # the frame ends (its latency, the answers waiting behind it) as if its bytes had been fed

    def _cancel_splices(self) -> None:
        """The connection closes: stop both splices now (their duplicate fds would keep the sockets open)."""
        for direction, splice in (("request", self._request_splice), ("response", self._response_splice)):
            if splice is not None:
                splice.cancel()
                if splice.moved:
                    self.ctx.metrics.spliced_bytes.labels(self.ctx.name, direction).inc(splice.moved)
        self._request_splice = self._response_splice = None


def _ignore(*_args) -> None:
    pass
