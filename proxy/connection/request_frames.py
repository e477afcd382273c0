"""What every request frame of a connection goes through: its header planned (stream, buffer or drop it), its end,
and the client side's events pulled from the splitter. :class:`PureRequests` is the reference of the C twin
(proxy/connection/native/requests.c, :mod:`proxy.connection.compiled`); :mod:`proxy.connection.request_path` adds the
rest (a buffered request's decision, a lookup, a hold, a throttle) over either. No I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from proxy.apis import PASS, UNCOUNTED_PLANNING, ConnectionScope, Plan, plan_request
from proxy.apis.response_leg import NO_LEG, ResponseLeg
from proxy.apis.reuse import asked_from, reused, reused_asking
from proxy.apis.stages import fold
from proxy.apis.usage import NO_USAGE, Usage
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

Planner = Callable[[ConnectionScope, Session, RequestHeader], Plan]  # the per-API handler table (plan_request)
Abandon = Callable[[], None]  # releases what a plan reserved for a request never forwarded nor answered

# What a connection plans its requests with: :func:`proxy.apis.plan_request`, or its twin (``_native.Planner``,
# proxy/connection/native/planner.c) doing its common path (a reused plan, an API with no chain) without a Python frame
# of its own and handing it every other case.
PLAN_REQUEST: Planner = (
    plan_request
    if NATIVE is None
    else NATIVE.Planner(plan_request, UNCOUNTED_PLANNING, fold, reused, reused_asking, asked_from)
)


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
