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
from typing import TYPE_CHECKING, cast

from proxy.apis import PASS, AnswerLocally, Await, HoldFor, LookUp, Outcome
from proxy.apis.plan import Decide
from proxy.apis.response_leg import NO_LEG, ResponseLeg
from proxy.apis.usage import NO_USAGE
from proxy.codec.errors import ProtocolError
from proxy.codec.header import RequestHeader
from proxy.codec.primitives import Bytes
from proxy.connection.compiled import NATIVE
from proxy.connection.inflight import InFlight
from proxy.connection.request_frames import Abandon, PureRequests
from quota.primitives.decision import Throttle

if TYPE_CHECKING:
    from proxy.session.sasl import SaslExchange

_INT32 = struct.Struct(">i")

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

    def _undecidable(self, header: RequestHeader, exc: ValueError) -> ProtocolError:
        """The error for a request whose body its plan could not decide on (the twin's frame() raises it)."""
        return _undecidable(header, exc)

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
