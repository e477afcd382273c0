"""The request path of one connection: client requests in, the broker's requests out. No I/O.

The connection core (:mod:`proxy.connection.core`) hands the client's bytes to a frame splitter and this path pulls
its events (:meth:`PureRequests.pump`): it asks the :class:`~proxy.connection.flow.Flow` before each request frame's
first byte, so a quota pause takes effect only at a frame boundary, and acts with its plain methods:
:meth:`PureRequests.header` at each header, where the API's handler plans (:mod:`proxy.apis`): stream the request to
the broker as it arrives (writing its segments), answer it locally, or buffer it and decide on the whole body
(``frame``); then :meth:`PureRequests.ended`. What every request goes through is a C twin's where the extension is
built (proxy/connection/native/requests.c, :mod:`proxy.connection.compiled`); :class:`RequestPath` adds what a
buffered request's decision, a lookup, a hold and a throttle need, in Python for both. Every request that will be answered is queued in flight at its header with its response
leg (:class:`~proxy.apis.response_leg.ResponseLeg`, the plan's; a forwarded outcome's adds to it), so a
local answer decided later keeps its place in the response order. This path writes only to the broker: a request
it answers itself is queued with its answer and flagged (:attr:`RequestPath.answered_locally`), and the core sends
the answers whose turn has come.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from proxy.apis import PASS, AnswerLocally, Await, ConnectionScope, HoldFor, LookUp, Outcome, Plan
from proxy.apis.plan import Decide
from proxy.apis.response_leg import NO_LEG, ResponseLeg
from proxy.apis.usage import NO_USAGE, Usage
from proxy.codec.errors import ProtocolError
from proxy.codec.frame import (
    BOUNDARY,
    BUFFER,
    FRAME,
    HEADER,
    LAST_SEGMENT,
    NEED_DATA,
    SEGMENT,
    STREAM,
    Action,
    FrameSplitter,
)
from proxy.codec.header import RequestHeader
from proxy.codec.primitives import Bytes
from proxy.connection.compiled import NATIVE
from proxy.connection.flow import Flow
from proxy.connection.inflight import InFlight
from proxy.connection.own_work import Spawn
from proxy.ops.usage_table import NO_USAGE_RECORDER, UsageRecorder
from proxy.session.session import Session
from quota.primitives.decision import Throttle

if TYPE_CHECKING:
    from proxy.ops.metrics import ApiMetrics
    from proxy.session.sasl import SaslExchange

_INT32 = struct.Struct(">i")

Planner = Callable[[ConnectionScope, Session, RequestHeader], Plan]  # the per-API handler table (plan_request)
Abandon = Callable[[], None]  # releases what a plan reserved for a request never forwarded nor answered


class Accounting:
    """What a plan, an outcome or a response leg accounted for, recorded once: the usage log's row of the request's
    entity, and the shadow throttles' count (and log) for each decision computed but not applied. Both paths of a
    connection record through one; it holds neither, so a closed connection is freed without the cycle collector."""

    __slots__ = ("_usage", "_scope", "_session")

    def __init__(self, usage: UsageRecorder, scope: ConnectionScope, session: Session) -> None:
        self._usage, self._scope, self._session = usage, scope, session

    def __call__(self, header: RequestHeader, usage: Usage) -> None:
        self._usage.planned(header, usage)
        shadows, user = self._scope.quotas.shadows, self._session.user
        for note in usage.shadows:
            shadows.note(note.quota, note.decision, user, note.client_id)


class PureRequests:
    """What every request goes through, called by the core: its header planned (stream, buffer or drop it), its end,
    and the client side's events pulled from the splitter (:meth:`pump`). The reference of the C twin
    (``proxy.connection._native.Requests``); :class:`RequestPath` adds the rest over either."""

    __slots__ = (
        "_flow",
        "_scope",
        "_session",
        "_forward",
        "_api_metrics",
        "_clock",
        "_plan",
        "_entry",
        "_planner",
        "_usage",
        "_spawn",
        "_abandons",
        "_dropped",
        "_gone",
        "_joined",
        "answered_locally",
        "account",
    )

    def __init__(
        self,
        flow: Flow,
        scope: ConnectionScope,
        session: Session,
        forward: Callable[[Bytes], None],
        api_metrics: Callable[[int], ApiMetrics],
        clock: Callable[[], int],
        planner: Planner,
        usage: UsageRecorder,
        spawn: Spawn | None,
        account: Accounting,
    ) -> None:
        # records what plans and outcomes (and, given to the response path, response legs) accounted for
        self.account = account
        self._spawn = spawn  # (start, done): runs start() off the request path, then done(result) (Await outcomes)
        self._usage = (
            usage  # what the usage log is told (proxy.ops.usage_log.UsageRecorder; does nothing without a log)
        )
        self._planner = planner  # (scope, session, header) -> Plan: the per-API handler table
        self._flow = flow
        self._scope = scope
        self._session = session
        self._forward = forward  # writes to the broker socket
        # a request was answered by the proxy (queued in flight with its answer): the core sends what is ready (the
        # request path writes only to the broker)
        self.answered_locally = False
        self._api_metrics = api_metrics
        self._clock = clock  # the connection's one clock (monotonic ns)
        self._plan: Plan = PASS  # the plan of the request being buffered
        self._entry: InFlight | None = None  # its in-flight entry
        # what to call if the client goes first, for each request read (or being read) and not yet forwarded or
        # answered whose plan reserved something (Plan.abandon); and those released, to drop when decided
        self._abandons: set[Abandon] = set()
        self._dropped: set[Abandon] = set()
        self._gone = False  # the client closed: a request replayed from the read-ahead is not held any more
        # the last two legs joined (a plan's, its outcome's) and their join: a consumer's every Fetch joins the same
        self._joined: tuple[ResponseLeg, ResponseLeg, ResponseLeg] = (NO_LEG, NO_LEG, NO_LEG)

    def pump(
        self, splitter: FrameSplitter, still_there: Callable[[], bool], send_local_answers: Callable[[], None]
    ) -> memoryview | None:
        """Act on the events of the client's bytes ``splitter`` holds, in the order a request brings them (its header
        after the boundary: first), until it needs data (None) or the flow paused at a boundary: then the bytes left
        (None if ``still_there`` found the client gone). ``send_local_answers`` after a request answered by the
        proxy."""
        flow = self._flow
        while True:
            event = splitter.next_event()
            if event is HEADER:
                splitter.act(self.header(splitter.header))
                if self.answered_locally:
                    send_local_answers()
            elif event is BOUNDARY:
                # Many requests unheard from the client, or reading stops here with one more read: is it still
                # there? A gone client's requests not forwarded yet never are.
                if flow.unheard >= flow.max_inflight and not still_there():  # presence due (Flow.unheard)
                    splitter.take_rest()
                    return None
                if not flow.start_frame():
                    rest = splitter.take_rest()
                    return None if flow.unheard and not still_there() else rest
            elif event is NEED_DATA:
                return None
            elif event is LAST_SEGMENT:
                self._forward(splitter.value)
                self.ended()
            elif event is FRAME:
                self.frame(splitter.header, splitter.value)
                if self.answered_locally:
                    send_local_answers()
                self.ended()
            elif event is SEGMENT:
                self._forward(splitter.value)
            else:  # END
                self.ended()

    def header(self, header: RequestHeader) -> Action:
        """A request's header: its plan says whether the frame streams, is buffered or dropped."""
        self._api_metrics(header.api_key).request(header.size + 4)  # its frame_length (a property: a call)
        if header.raw:  # a raw SASL token: read whole (it is small), then forwarded as it is
            return BUFFER
        usage = self._usage
        if usage is not NO_USAGE_RECORDER:  # a call that does nothing, without a usage log
            usage.request(header)
        inflight = self._flow.inflight
        plan = self._planner(self._scope, self._session, header)
        if plan is PASS:
            inflight.add(header, self._clock())
            return STREAM
        if plan.usage is not NO_USAGE:
            self.account(header, plan.usage)
        if plan.local_response is not None:
            if header.expects_response:
                inflight.add_local(header, self._clock(), plan.local_response)
                self.answered_locally = True
            return plan.action
        self._entry = inflight.add(header, self._clock(), plan.leg)
        if plan.abandon is not None:
            self._abandons.add(plan.abandon)
        if plan.throttle is not None:
            self._throttle(header, self._entry, plan.throttle)
        self._plan = plan
        return plan.action

    def ended(self) -> None:
        """The request frame's last byte is read (and forwarded, when streamed)."""
        flow = self._flow
        flow.frame_ended()
        if flow.inflight.probe_wanted:
            self._forward(flow.inflight.probe(self._clock()))

    if TYPE_CHECKING:  # _Decisions' (over this class or its twin)

        def frame(self, header: RequestHeader, frame: bytearray) -> None: ...

        def _throttle(self, header: RequestHeader, entry: InFlight | None, throttle: Throttle) -> None: ...


if TYPE_CHECKING:  # what _Decisions is used over (typed as the pure class: the twin has its methods and attributes)
    _Over = PureRequests
else:
    _Over = object


class _Decisions(_Over):
    """The client-to-broker direction's rest, over :class:`PureRequests` or its twin: a buffered request decided on
    its body (forwarded, answered, looked up, awaited, held), a throttle, a client gone."""

    __slots__ = ()

    def frame(self, header: RequestHeader, frame: bytearray) -> None:
        """A buffered request is complete: its plan decides the outcome."""
        if header.raw:
            # a raw token is split only while the session's SASL exchange expects one (core.parse_request)
            cast("SaslExchange", self._session.sasl).raw_request(bytes(frame[4:]))
            self._forward(frame)
            return
        plan, self._plan = self._plan, PASS
        entry, self._entry = self._entry, None
        decide = plan.decide
        if decide is None:
            self._settled(plan.abandon)
            self._forward(frame)
            return
        try:  # _decided, inline
            outcome = decide(memoryview(frame)[header.header_length :])
        except ValueError as exc:
            raise _undecidable(header, exc) from None
        self._act(header, frame, entry, outcome, plan.abandon)

    def _decided(self, header: RequestHeader, decide: Decide, body: memoryview) -> Outcome:
        try:
            return decide(body)
        except ValueError as exc:
            raise _undecidable(header, exc) from None

    def _act(
        self,
        header: RequestHeader,
        frame: Bytes,
        entry: InFlight | None,
        outcome: Outcome,
        abandon: Abandon | None = None,
    ) -> None:
        if abandon is not None and abandon in self._dropped:  # the client went first: never forwarded
            self._dropped.discard(abandon)
            if entry is not None:  # nor answered: after a half-close the answers before it go, then the close
                self._flow.inflight.abandon(entry)
                self._flow.drain()
            return
        if isinstance(outcome, LookUp):
            self._look_up(header, frame, entry, outcome, abandon)
            return
        if isinstance(outcome, Await):
            self._await(header, frame, entry, outcome, abandon)
            return
        if abandon is not None:  # _settled, inline
            self._abandons.discard(abandon)
        if isinstance(outcome, HoldFor):
            self._hold(header, frame, entry, outcome, abandon)
            return
        if outcome.usage is not NO_USAGE:
            self.account(header, outcome.usage)
        if isinstance(outcome, AnswerLocally):
            if entry is None:  # acks=0 to a broker known not to answer: no answer, but its throttle mutes now
                if outcome.throttle is not None:
                    self._throttle(header, None, outcome.throttle)
            else:
                if outcome.throttle is not None:  # goes with the answer, which mutes once it is out
                    self._flow.throttle_request(entry, outcome.throttle, self._clock(), pause=False)
                self._flow.inflight.answer_locally(entry, outcome.frame)
                self.answered_locally = True
            return
        if outcome.body is not None:
            frame = (
                _INT32.pack(header.header_length - 4 + len(outcome.body))
                + bytes(frame[4 : header.header_length])
                + outcome.body
            )
        if entry is not None and outcome.leg is not NO_LEG:
            entry.leg = self._join(entry.leg, outcome.leg)
        if outcome.throttle is not None:
            self._throttle(header, entry, outcome.throttle)
        self._forward(frame)

    def _join(self, leg: ResponseLeg, more: ResponseLeg) -> ResponseLeg:
        """``leg``, then ``more`` (:meth:`ResponseLeg.then`): the last join reused when it was of the same two."""
        joined = self._joined
        if joined[0] is leg and joined[1] is more:
            return joined[2]
        combined = leg.then(more)
        self._joined = (leg, more, combined)
        return combined

    def _look_up(
        self, header: RequestHeader, frame: Bytes, entry: InFlight | None, lookup: LookUp, abandon: Abandon | None
    ) -> None:
        """Send the proxy's own request now; decide this one on its answer (reading waits until then)."""
        flow = self._flow
        frame = bytes(frame)  # the splitter's buffer is reused once this returns

        def answered(body: memoryview) -> None:
            flow.request_decided()
            self._act(header, frame, entry, self._decided(header, lookup.then, body), abandon)

        flow.request_deciding()
        self._forward(
            flow.inflight.look_up(
                entry, self._clock(), lookup.api_key, lookup.api_version, lookup.body, answered, lookup.client_id
            )
        )

    def _await(
        self, header: RequestHeader, frame: Bytes, entry: InFlight | None, work: Await, abandon: Abandon | None
    ) -> None:
        """Start the proxy's own work now; decide this request on its result (reading waits until then)."""
        if self._spawn is None:
            raise ProtocolError("this connection cannot run the proxy's own work")
        flow = self._flow
        frame = bytes(frame)

        def done(result: object) -> None:
            flow.request_decided()
            self._act(header, frame, entry, work.then(result), abandon)

        flow.request_deciding()
        self._spawn(work.start, done)

    def _hold(
        self, header: RequestHeader, frame: Bytes, entry: InFlight | None, hold: HoldFor, abandon: Abandon | None
    ) -> None:
        """Hold the request in the flow until its time (the flow's deadline, ended by the connection's one timer),
        then decide it; if the client goes first, the flow hands it back to be abandoned: never forwarded."""
        flow = self._flow
        frame = bytes(frame)

        def due() -> None:
            self._act(header, frame, entry, hold.then(), abandon)

        def abandoned() -> None:
            if abandon is not None:
                abandon()
            if entry is not None:  # nor answered: after a half-close the answers before it go, then the close
                flow.inflight.abandon(entry)
                flow.drain()

        if self._gone:  # replayed from the read-ahead after the client's end: held for nobody
            abandoned()
            return
        flow.hold(self._clock(), hold.delay_ms, due, abandoned)

    def _settled(self, abandon: Abandon | None) -> None:
        """The request is forwarded or answered: nothing of what its plan reserved is to be released any more."""
        if abandon is not None:
            self._abandons.discard(abandon)

    def client_gone(self) -> None:
        """The client closed (its side, or the connection): requests not yet forwarded or answered whose plans
        reserved something (a held producer id) release it now, never forwarded: the broker must not see a new
        producer id for a client that gave up (and after the client's end has been passed on, nothing more may be
        written to it). Held ones leave the flow now; ones still being read or looked up are dropped when decided."""
        self._gone = True
        abandons, self._abandons = self._abandons, set()
        self._dropped |= abandons
        for abandon in abandons:
            abandon()
        for hold in self._flow.abandon_holds():
            hold.abandon()

    def _throttle(self, header: RequestHeader, entry: InFlight | None, throttle: Throttle) -> None:
        """The flow takes the throttle: it goes with the response (counted in the usage log there), or, with no
        response to carry it (acks=0), mutes now."""
        now = self._clock()
        muted_ms = self._flow.throttle_request(entry, throttle, now)
        if muted_ms:
            self._session.muted_for, self._session.muted_by = header.client_id, throttle.by
            self._usage.throttled(header, throttle, muted_ms, now)


class PureRequestPath(_Decisions, PureRequests):
    """The client-to-broker direction on the pure path, called by the core for each request's header, whole frame
    and end."""

    __slots__ = ()


if TYPE_CHECKING or NATIVE is None:  # typed as the pure class: the twin has its methods and attributes
    RequestPath = PureRequestPath
else:

    class RequestPath(_Decisions, NATIVE.Requests):
        """The client-to-broker direction, called by the core for each request's header, whole frame and end."""

        __slots__ = ()


def _undecidable(header: RequestHeader, exc: ValueError) -> ProtocolError:
    """The error for a request whose body its plan could not decide on (a body that is not the API's)."""
    return ProtocolError(f"cannot decide request {header.api_key} v{header.api_version}: {exc}")
