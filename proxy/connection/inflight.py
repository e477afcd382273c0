"""Requests sent upstream and waiting for their responses, in order. Pure: no I/O.

A broker answers the requests of one connection in the order it received them. The proxy keeps one entry per
forwarded request and matches each response's correlation id against the oldest entry.

Produce with ``acks=0`` expects no response. Apache Kafka sends none; some brokers (Tansu) send one anyway. An
``acks=0`` entry therefore stays in the queue until the next response shows which kind of broker this is: a
response carrying its correlation id is dropped (the client must never see it), a response for a later request
means the broker stays silent for ``acks=0``, and the entry is retired. Once learned, the broker's behaviour is
remembered for the connection so silent entries are not queued at all.

Responses come back in request order, so the answer is exact, never a guess. So that it comes even from a client
that sends nothing but ``acks=0`` produces, the first such request of a connection is followed by a probe of the
proxy's own (ApiVersions v0, with a correlation id no queued request has): the probe's response, which is dropped,
arrives either after the broker's answer to the ``acks=0`` request or without one. What the queue holds meanwhile
counts against the connection's in-flight bound, so its memory is bounded either way.

:data:`InFlightQueue` and :data:`InFlight`, what connections use, are :class:`PureInFlightQueue` and
:class:`PureInFlight` or their C twin (proxy/connection/native/inflight.c, :mod:`proxy.connection.compiled`), chosen
once at import. The twin holds the queue's per-request methods; the proxy's own requests (the probe, the lookups:
:class:`_OwnRequests`) are Python for both.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from proxy.apis.response_leg import NO_LEG, ResponseLeg
from proxy.codec.apis import API_VERSIONS
from proxy.codec.errors import ProtocolError
from proxy.codec.header import RequestHeader, encode_request_header, frame
from proxy.connection.compiled import NATIVE
from quota.primitives.decision import Throttle

_INT32_MIN = -(2**31)

PROBE_CLIENT_ID = "kafka-quota-proxy"


@dataclass(slots=True, eq=False)
class PureInFlight:
    header: RequestHeader
    received_ns: int  # when the request's header was read, for the latency histogram
    expects_response: bool
    # What the response needs besides its bytes (decoded, observed, rewritten, charged, settled; or the proxy's
    # own lookup's answer): NO_LEG streams it through untouched unless a throttle goes with it.
    leg: ResponseLeg = NO_LEG
    # Set when the proxy answers the request itself: the whole response frame, sent in request order.
    local_response: bytes | None = None
    # A quota throttle to merge into the response and act on (mute after it): the flow's, decided with the request.
    throttle: Throttle | None = None
    # Set by the flow: the throttle was decided with the request (reading stays paused until the response is out).
    throttled: bool = False
    # The proxy's own acks=0 probe: its response is dropped.
    probe: bool = False


class _OwnRequests:
    """The proxy's own requests in the queue (the acks=0 probe, a lookup), for both queues: rare, so Python in both.
    A queue gives them ``_entry`` (its entry class), ``_append``, ``_last``, ``_pop_last``, ``_probe_went`` and its
    iteration."""

    __slots__ = ()

    _entry: type[PureInFlight]

    def probe(self, received_ns: int) -> bytes:
        """The probe frame to forward now (after the acks=0 request that asked for it), queued as in flight."""
        header, head = self._own_header(API_VERSIONS, 0)
        self._append(self._entry(header, received_ns, True, probe=True))
        self._probe_went()
        return frame(head)

    def look_up(
        self,
        waiting: PureInFlight | None,
        received_ns: int,
        api_key: int,
        api_version: int,
        body: bytes,
        answered: Callable[[memoryview], None],
        client_id: str | None = None,
    ) -> bytes:
        """A request of the proxy's own (``body`` of ``api_key`` v``api_version``) to forward now, ahead of the
        request ``waiting`` to be decided on its answer (the last one queued; None if it expects no response):
        the lookup is queued before it, so the answers still come in order; ``client_id`` None: the proxy's own.
        Returns the frame to send."""
        if waiting is not None and self._last() is not waiting:
            raise ProtocolError("a lookup was made for a request that is not the last one read")
        if waiting is not None:
            self._pop_last()
        header, head = self._own_header(api_key, api_version, PROBE_CLIENT_ID if client_id is None else client_id)
        self._append(self._entry(header, received_ns, True, ResponseLeg(lookup=answered)))
        if waiting is not None:
            self._append(waiting)
        return frame(head + body)

    def _own_header(
        self, api_key: int, api_version: int, client_id: str = PROBE_CLIENT_ID
    ) -> tuple[RequestHeader, bytes]:
        """A request header of the proxy's own, with a correlation id no queued request has."""
        taken = {e.header.correlation_id for e in self}
        correlation_id = _INT32_MIN
        while correlation_id in taken:
            correlation_id += 1
        head = encode_request_header(api_key, api_version, correlation_id, client_id)
        return RequestHeader(len(head), api_key, api_version, correlation_id, client_id, len(head) + 4), head

    if TYPE_CHECKING:  # what each queue defines (a stub here would hide the C twin's, which comes after in the MRO)

        def _probe_went(self) -> None: ...

        def _append(self, entry: PureInFlight) -> None: ...

        def _last(self) -> PureInFlight | None: ...

        def _pop_last(self) -> PureInFlight: ...

        def __iter__(self) -> Iterator[PureInFlight]: ...


class PureInFlightQueue(_OwnRequests):
    """The reference queue (the C twin answers the same at every step: tests/proxy/connection/
    test_inflight_native.py)."""

    __slots__ = ("_queue", "broker_answers_acks0", "_probe_sent", "probe_wanted", "local_answers")

    _entry = PureInFlight

    def __init__(self) -> None:
        self._queue: deque[PureInFlight] = deque()
        self.local_answers = 0  # entries answered by the proxy, not yet handed out (read by the response path)
        self.broker_answers_acks0: bool | None = None
        self._probe_sent = False
        self.probe_wanted = False  # an acks=0 request was queued: send a probe once it has been forwarded

    def __len__(self) -> int:
        return len(self._queue)

    def __iter__(self) -> Iterator[PureInFlight]:
        return iter(self._queue)

    def _append(self, entry: PureInFlight) -> None:
        self._queue.append(entry)

    def _probe_went(self) -> None:
        self._probe_sent = True
        self.probe_wanted = False

    def _last(self) -> PureInFlight | None:
        return self._queue[-1] if self._queue else None

    def _pop_last(self) -> PureInFlight:
        return self._queue.pop()

    @property
    def entries(self) -> deque[PureInFlight]:
        """The queue itself, read-only for callers (the flow reads its length on the hot path)."""
        return self._queue

    def add_local(self, header: RequestHeader, received_ns: int, response: bytes) -> None:
        """A request the proxy answers itself; :meth:`pop_ready_local` hands the answer out in order."""
        self._queue.append(PureInFlight(header, received_ns, True, local_response=response))
        self.local_answers += 1

    def pop_ready_local(self) -> PureInFlight | None:
        """The oldest locally answered request whose turn has come (only silent acks=0 entries before it)."""
        if not self.local_answers:
            return None
        for i, entry in enumerate(self._queue):
            if entry.local_response is not None:
                del self._queue[i]
                self.local_answers -= 1
                return entry
            if entry.expects_response:
                return None
        return None

    def add(self, header: RequestHeader, received_ns: int, leg: ResponseLeg = NO_LEG) -> PureInFlight | None:
        """Queue a forwarded request; ``leg`` says what its response needs. Returns the entry (None for an acks=0
        request to a broker known not to answer it)."""
        expects = header.acks != 0  # header.expects_response (a property: a call)
        if not expects:
            if self.broker_answers_acks0 is False:
                return None
            if self.broker_answers_acks0 is None and not self._probe_sent:
                self.probe_wanted = True
        entry = PureInFlight(header, received_ns, expects, leg)
        self._queue.append(entry)
        return entry

    def answer_locally(self, entry: PureInFlight, response: bytes) -> None:
        """A queued request the proxy answers itself after all (decided on its body); an acks=0 one is dropped."""
        if entry.expects_response:
            entry.local_response = response
            self.local_answers += 1
        else:
            self._queue.remove(entry)

    def abandon(self, entry: PureInFlight) -> None:
        """A queued request that will never be forwarded nor answered (its client went while it was held): out of
        the queue, so the answers before it still go and nothing waits for it."""
        self._queue.remove(entry)

    def match(self, correlation_id: int) -> PureInFlight | None:
        """The request a response answers, or None when the response must be dropped (acks=0)."""
        queue = self._queue
        while queue:
            entry = queue.popleft()
            if entry.local_response is not None:
                raise ProtocolError(
                    f"response correlation id {correlation_id} arrived while the proxy's own answer to "
                    f"{entry.header.correlation_id} was still queued"
                )
            if entry.header.correlation_id == correlation_id:
                if entry.probe:
                    return None
                if entry.expects_response:
                    return entry
                self._learn(True)
                return None
            if entry.expects_response:
                raise ProtocolError(
                    f"response correlation id {correlation_id} does not match the oldest request in flight "
                    f"({entry.header.correlation_id})"
                )
            self._learn(False)
        raise ProtocolError(f"response correlation id {correlation_id} with no request in flight")

    def _learn(self, answers: bool) -> None:
        if self.broker_answers_acks0 is None:
            self.broker_answers_acks0 = answers
            self.probe_wanted = False
            if not answers:
                kept = [e for e in self._queue if e.expects_response]
                self._queue.clear()
                self._queue.extend(kept)

    def oldest_waiting_ns(self) -> int | None:
        """When the oldest request whose response is still to come was read, or None. An acks=0 request counts
        once the broker is known to answer those: its answer is dropped, but the broker owes it all the same."""
        answers_acks0 = self.broker_answers_acks0 is True
        for entry in self._queue:
            if entry.expects_response or answers_acks0:
                return entry.received_ns
        return None

    def awaiting_response(self) -> bool:
        """True while some forwarded request still expects a response (the proxy's own probe aside: its answer is
        dropped, so a connection may close before it comes)."""
        return any(e.expects_response and not e.probe for e in self._queue)


if TYPE_CHECKING or NATIVE is None:  # typed as the pure classes: the twin has their methods and attributes
    InFlight = PureInFlight
    InFlightQueue = PureInFlightQueue
else:
    InFlight = NATIVE.InFlight

    class InFlightQueue(_OwnRequests, NATIVE.Queue):
        """Requests in flight in C (:class:`PureInFlightQueue`'s twin), the proxy's own requests added in Python."""

        __slots__ = ()

        _entry = NATIVE.InFlight
