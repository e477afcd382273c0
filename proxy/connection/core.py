"""One proxied connection without its sockets: the flow, both frame splitters and both paths, driven by one loop.

Bytes and events go in (:meth:`ConnectionCore.client_bytes`, :meth:`ConnectionCore.broker_bytes`, back-pressure,
drain, time); bytes come out through the two write callables, and :meth:`ConnectionCore.step` says what the
socket code must apply: read the client or not, read the broker or not, when to call back, whether the
connection has drained. :mod:`proxy.connection.client_socket` is the shell that does that with real transports;
tests drive this class directly on bytes with a fake clock.

The core pulls (h11's ``next_event()``): it hands each side's bytes to that side's
:class:`~proxy.codec.frame.FrameSplitter`, and that side's path (:class:`~proxy.connection.request_path.RequestPath`,
:class:`~proxy.connection.response_path.ResponsePath`) takes the events out one by one (its ``pump``), acting on
each before the next. At a request frame boundary the request path asks the :class:`~proxy.connection.flow.Flow`
whether the frame may start; if not, the rest of the read is held back in the flow and replayed by
:meth:`ConnectionCore.step`. A header's plan or match says what the splitter does with the frame (stream, buffer,
drop); a streamed segment is written on as it comes; a buffered frame and a frame's end go to the path's methods. The
splitter never calls anything, so nothing is planned, recorded or written from inside the parser.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from proxy.apis import ConnectionScope
from proxy.codec.frame import FrameSplitter
from proxy.codec.header import (
    MAX_HEADER_BYTES,
    RequestHeader,
    ResponseHeader,
    parse_raw_sasl_request,
    parse_raw_sasl_response,
    parse_response_prefix,
)
from proxy.codec.primitives import Bytes
from proxy.codec.produce_prefix import parse_request_prefix
from proxy.connection.compiled import NATIVE
from proxy.connection.flow import Flow
from proxy.connection.own_work import Done, Spawn, Start
from proxy.connection.presence import PRESENT
from proxy.connection.request_frames import PLAN_REQUEST, Accounting, Planner
from proxy.connection.request_path import RequestPath
from proxy.connection.response_path import ResponsePath
from proxy.ops.usage_table import NO_USAGE, UsageTable
from proxy.session.session import Session

if TYPE_CHECKING:
    from proxy.ops.metrics import ApiMetrics

_NOTHING = memoryview(b"")


@dataclass(frozen=True, slots=True)
class State:
    """What the socket code applies after an event."""

    reading_client: bool
    reading_broker: bool
    deadline: int | None  # call step() again at this time (the connection's clock, ns), or None
    drained: bool  # draining and everything answered: close
    overdue: str | None = None  # past a timeout (Flow.overdue's names): close


class ConnectionCore:
    __slots__ = (
        "flow",
        "requests",
        "responses",
        "_request_splitter",
        "_response_splitter",
        "_write_client",
        "_write_broker",
        "_client_state",
    )

    def __init__(
        self,
        scope: ConnectionScope,
        session: Session,
        *,
        max_request_bytes: int,
        max_response_bytes: int,
        max_inflight: int,
        write_client: Callable[[Bytes], None],
        write_broker: Callable[[Bytes], None],
        clock: Callable[[], int],
        api_metrics: Callable[[int], ApiMetrics],
        planner: Planner = PLAN_REQUEST,
        spawn: Spawn | None = None,
        max_header_bytes: int = MAX_HEADER_BYTES,
        response_timeout_ns: int = 0,
        idle_timeout_ns: int = 0,
        client_state: Callable[[], str] = lambda: PRESENT,
        usage: UsageTable = NO_USAGE,
    ) -> None:
        self._write_client = write_client
        self._client_state = client_state  # asks the kernel whether the client is still connected (presence)
        self._write_broker = write_broker
        self.flow = Flow(max_inflight, response_timeout_ns, idle_timeout_ns)
        self.flow.timeouts.start(clock())  # the idle timeout runs from the connection's start
        recorder = usage.recorder(session)  # what the paths add to the usage log through (NO_USAGE: nothing kept)
        account = Accounting(recorder, scope, session)  # what plans, outcomes and legs accounted for, recorded
        self.responses = ResponsePath(self.flow, write_client, clock, api_metrics, recorder, session, account)
        self.requests = RequestPath(
            self.flow,
            scope,
            session,
            write_broker,
            api_metrics,
            clock,
            planner,
            recorder,
            None if spawn is None else self._spawning(spawn),
            account,
        )
        # QuotaManagers.reads_produce_prefix, read for every request as two plain loads (a property call costs the
        # pass-through path): the internal topics are fixed for the port, the producer-id quota follows the table
        internal = bool(scope.quotas.internal_topics)
        pids = scope.quotas.producer_ids
        parse_request = request_parser(session, max_request_bytes, internal, pids, max_header_bytes)
        parse_response = response_parser(session, max_response_bytes)
        if NATIVE is not None:  # their common case without a Python frame (proxy/connection/native/parsers.c)
            self._request_splitter = FrameSplitter(
                NATIVE.HeaderParser(
                    session, parse_request, parse_request_prefix, max_request_bytes, internal, pids, max_header_bytes
                ),
                gated=True,
            )
            self._response_splitter = FrameSplitter(
                NATIVE.HeaderParser(session, parse_response, parse_response_prefix, max_response_bytes)
            )
        else:
            self._request_splitter = FrameSplitter(parse_request, gated=True)
            self._response_splitter = FrameSplitter(parse_response)

    def read_size(self, available: int, boundary_bytes: int = 0) -> int:
        """How much of a read buffer of ``available`` bytes the next client read may fill; at a frame boundary no
        more than ``boundary_bytes`` if given (splicing: :attr:`proxy.connection.splicing.Splicer.boundary_read_bytes`,
        applied here with the one look at the frame being read)."""
        remaining = self._request_splitter.remaining
        size = self.flow.read_size(available, remaining)
        if boundary_bytes and size > boundary_bytes and not remaining:
            return boundary_bytes
        return size

    def response_read_size(self, available: int, boundary_bytes: int = 0) -> int:
        """How much of a read buffer of ``available`` bytes the next broker read may fill: at a response frame
        boundary no more than ``boundary_bytes`` if given (splicing, as :meth:`read_size`)."""
        if boundary_bytes and available > boundary_bytes and not self._response_splitter.remaining:
            return boundary_bytes
        return available

    def reading_parts(self) -> tuple[FrameSplitter, FrameSplitter, Any, Any, Callable[[], bool], Callable[[], None]]:
        """What :meth:`client_bytes` and :meth:`broker_bytes` use, for the socket code's shell
        (:mod:`proxy.connection.shell`), which does what they do without a call each: the request and response
        splitters, the request and response paths' loops (their ``pump``), and the request loop's two callables."""
        return (
            self._request_splitter,
            self._response_splitter,
            self.requests,
            self.responses,
            self._still_there,
            self._send_local_answers,
        )

    @property
    def at_frame_boundary(self) -> bool:
        return self._request_splitter.at_frame_boundary

    # -- the rest of a streamed frame, moved by the socket code itself (proxy.connection.splice) ------------------

    @property
    def request_streaming(self) -> int:
        """Bytes of the request frame being streamed to the broker still to come (0 if none is): the socket code
        may move them between the sockets itself, then reports them with :meth:`requests_passed`."""
        return self._request_splitter.streaming

    @property
    def response_streaming(self) -> int:
        """Bytes of the response being streamed to the client still to come (0 if none is)."""
        return self._response_splitter.streaming

    @property
    def request_remaining(self) -> int:
        """Bytes of the request frame being read still to come, however it is handled (0 at a boundary)."""
        return self._request_splitter.remaining

    @property
    def response_remaining(self) -> int:
        return self._response_splitter.remaining

    def requests_passed(self, nbytes: int) -> None:
        """``nbytes`` of the streamed request frame reached the broker without being read here."""
        self._request_splitter.passed(nbytes)
        self._pull_requests()

    def responses_passed(self, nbytes: int) -> None:
        """``nbytes`` of the streamed response reached the client without being read here."""
        self._response_splitter.passed(nbytes)
        self.broker_bytes(_NOTHING)  # the response's end, if that was its last byte

    def client_bytes(self, data: memoryview) -> int:
        """Request bytes read from the client; raises ProtocolError for bytes that cannot be requests. Returns
        :attr:`request_streaming` after them (the socket code's one look at whether a splice may start)."""
        splitter = self._request_splitter
        splitter.receive(data)
        rest = self.requests.pump(splitter, self._still_there, self._send_local_answers)  # _pull_requests, inline
        if rest is not None:
            self.flow.hold_back(rest)
        return splitter.streaming

    def broker_bytes(self, data: memoryview) -> int:
        """Response bytes read from the broker; raises ProtocolError for bytes that cannot be responses. Their
        events are pulled and acted on by the response path (:meth:`~proxy.connection.response_frames.PureResponses.pump`;
        the request side's loop is :meth:`_pull_requests`). Returns :attr:`response_streaming` after them."""
        splitter = self._response_splitter
        splitter.receive(data)
        return self.responses.pump(splitter)

    def _pull_requests(self) -> memoryview | None:
        """Act on the request splitter's events until it needs data; return the bytes left at a boundary where the
        flow paused (None if none): the request path's loop
        (:meth:`~proxy.connection.request_frames.PureRequests.pump`)."""
        return self.requests.pump(self._request_splitter, self._still_there, self._send_local_answers)

    def _still_there(self) -> bool:
        """Whether the client is still connected; if not, the flow and the request path are told it left. A client
        owed answers counts as there without asking (half-closed, it may be reading them; gone, the answers draw its
        reset); one owed none is asked, and half-closed is gone."""
        if self.flow.inflight.awaiting_response() or self._client_state() == PRESENT:
            self.flow.client_present()
            return True
        self.requests.client_gone()
        self.flow.client_left()
        return False

    def _send_local_answers(self) -> None:
        """The request path answered a request itself: the answers whose turn has come go to the client now."""
        self.requests.answered_locally = False
        self.responses.send_ready_local()

    def _spawning(self, spawn: Spawn) -> Spawn:
        """``spawn`` (the socket code's: run ``start`` as a task, then ``done(result)``), with the answers whose turn
        has come sent after ``done`` (the request decided on the result may have been answered by the proxy). It
        holds the response path only: a reference back to the core or the request path would be a cycle, and a
        closed connection must be freed without the cycle collector."""
        responses = self.responses

        def spawned(start: Start, done: Done) -> None:
            def decided(result: object) -> None:
                done(result)
                responses.send_ready_local()

            spawn(start, decided)

        return spawned

    def step(self, now: int) -> State:
        """After every event, and when the deadline comes: end an expired mute, decide the holds whose time has
        come, replay held-back requests, check the timeouts when due, report the state."""
        flow = self.flow
        if flow.unhindered:
            if flow.timeouts.due(now):
                overdue = self._check_timeouts(now)
                if overdue is not None:
                    return State(True, True, None, False, overdue)
            return State(True, True, flow.next_deadline(), False)
        flow.tick(now)
        for hold in flow.holds_due(now):
            hold.due()
        if self.requests.answered_locally:
            self._send_local_answers()
        while flow.read_ahead_due():
            held = flow.take_read_ahead()
            self._request_splitter.receive(held)
            rest = self._pull_requests()
            if flow.left:  # the client was found gone: what was held back is dropped
                break
            flow.consumed_read_ahead(len(held) if rest is None else len(held) - len(rest))
        overdue = self._check_timeouts(now) if flow.timeouts.due(now) else None
        # Drained only between responses: one being received (streamed or spliced to the client, its request
        # already out of the in-flight queue) is finished first, not cut.
        drained = flow.drained and self._response_splitter.at_frame_boundary
        return State(flow.reading_client, flow.reading_broker, flow.next_deadline(), drained, overdue)

    def _waiting_since(self) -> int | None:
        """Since when the broker owes an answer: from when the response being received was asked for, or a dropped
        one started, or the oldest request still waiting was read; None if it owes none."""
        responses = self.responses
        receiving = responses.receiving
        if receiving is not None:
            return receiving.received_ns
        return responses.dropping_since_ns or self.flow.inflight.oldest_waiting_ns()

    def _check_timeouts(self, now: int) -> str | None:
        return self.flow.check_timeouts(now, self._waiting_since())

    def overdue(self, now: int, response_timeout: int, idle_timeout: int) -> str | None:
        """The bound this connection is past (:meth:`proxy.connection.timeouts.Timeouts.overdue`) for these
        timeouts, or None."""
        flow = self.flow
        return flow.timeouts.overdue(now, self._waiting_since(), flow.reading_broker, response_timeout, idle_timeout)

    def close(self) -> None:
        """Nothing more is split; what the plans of requests not yet forwarded or answered reserved is released (a
        held producer id's token)."""
        self.requests.client_gone()
        self._request_splitter.close()
        self._response_splitter.close()


class _Enabled(Protocol):
    enabled: bool


def request_parser(
    session: Session, max_request_bytes: int, internal: bool, pids: _Enabled, max_header_bytes: int
) -> Callable[[Bytes], RequestHeader]:
    """What the request splitter calls at each frame's header: the session's raw SASL tokens, its frames bounded as
    Kafka bounds them before an authentication, then the listener's; the Produce prefix read when the proxy's
    internal topics are guarded (``internal``) or the producer-id quota is on (``pids.enabled``, as the table says
    now). Its common case is the C twin's (``proxy.connection._native.HeaderParser``), every other this."""

    def parse_request(buf: Bytes) -> RequestHeader:
        sasl = session.sasl
        if sasl is not None and sasl.raw_requests:  # after SaslHandshake v0: raw tokens
            return parse_raw_sasl_request(buf, session.request_limit)
        limit = session.request_limit
        if limit < max_request_bytes:  # a SASL listener, before the broker accepted an authentication
            return parse_request_prefix(
                buf,
                limit,
                internal or pids.enabled,
                "sasl.server.max.receive.size (before SASL authentication)",
                max_header_bytes,
            )
        return parse_request_prefix(buf, max_request_bytes, internal or pids.enabled, max_header=max_header_bytes)

    return parse_request


def response_parser(session: Session, max_response_bytes: int) -> Callable[[Bytes], ResponseHeader]:
    """What the response splitter calls at each frame's header (:func:`request_parser`'s counterpart)."""

    def parse_response(buf: Bytes) -> ResponseHeader:
        sasl = session.sasl
        if sasl is not None and sasl.raw_responses:
            return parse_raw_sasl_response(buf, max_response_bytes)
        return parse_response_prefix(buf, max_response_bytes)

    return parse_response


class _ClosedCore:
    """Stands in for the core of a closed connection: late socket events find nothing to do."""

    at_frame_boundary = True
    request_streaming = response_streaming = request_remaining = response_remaining = 0

    def read_size(self, available: int, boundary_bytes: int = 0) -> int:
        return available

    def response_read_size(self, available: int, boundary_bytes: int = 0) -> int:
        return available

    def client_bytes(self, data: memoryview) -> int:
        return 0

    def broker_bytes(self, data: memoryview) -> int:
        return 0


CLOSED_CORE = _ClosedCore()
