"""Requests sent upstream and waiting for their responses, in order. Pure: no I/O.

A broker answers the requests of one connection in the order it received them. The proxy keeps one entry per
forwarded request and matches each response's correlation id against the oldest entry.

Produce with ``acks=0`` expects no response. Apache Kafka sends none; some brokers (Tansu) send one anyway. An
``acks=0`` entry therefore stays in the queue until the next response shows which kind of broker this is: a
response carrying its correlation id is dropped (the client must never see it), a response for a later request
means the broker stays silent for ``acks=0``, and the entry is retired. Once learned, the broker's behaviour is
remembered for the connection so silent entries are not queued at all.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, Callable

from proxy.codec.errors import ProtocolError
from proxy.codec.header import RequestHeader

# While the broker's acks=0 behaviour is unknown, at most this many silent entries wait for a response to tell.
MAX_UNRESOLVED_SILENT = 1024


@dataclass(slots=True)
class InFlight:
    header: RequestHeader
    received_ns: int  # when the request's header was read, for the latency histogram
    expects_response: bool
    # Set for responses the proxy must decode and rewrite: called with the response body (after the header),
    # returns the new body or None to keep the broker's.
    rewrite: Callable[[memoryview], bytes | None] | None = None
    # Set when the proxy answers the request itself: the whole response frame, sent in request order.
    local_response: bytes | None = None
    # A quota throttle to merge into the response and act on (mute, or hold the response).
    throttle: Any = None
    # True when the throttle was decided with the request (reading stays paused until the response is out).
    plan_throttled: bool = False
    # Decides a throttle from the size of the response the client gets (consumer byte rate).
    record_response: Callable[[int], Any] | None = None


class InFlightQueue:
    __slots__ = ("_queue", "broker_answers_acks0", "_silent")

    def __init__(self) -> None:
        self._queue: deque[InFlight] = deque()
        self.broker_answers_acks0: bool | None = None
        self._silent = 0  # acks=0 entries queued while the broker's behaviour is unknown

    def __len__(self) -> int:
        return len(self._queue)

    def add_local(self, header: RequestHeader, received_ns: int, response: bytes) -> None:
        """A request the proxy answers itself; :meth:`pop_ready_local` hands the answer out in order."""
        self._queue.append(InFlight(header, received_ns, True, local_response=response))

    def pop_ready_local(self) -> InFlight | None:
        """The oldest locally answered request whose turn has come (only silent acks=0 entries before it)."""
        for i, entry in enumerate(self._queue):
            if entry.local_response is not None:
                del self._queue[i]
                return entry
            if entry.expects_response:
                return None
        return None

    def add(self, header: RequestHeader, received_ns: int, plan: Any = None) -> None:
        """Queue a forwarded request; ``plan`` (a :class:`proxy.apis.Plan`) says what its response needs."""
        expects = header.expects_response
        if not expects:
            if self.broker_answers_acks0 is False:
                return
            if self.broker_answers_acks0 is None:
                if self._silent >= MAX_UNRESOLVED_SILENT:
                    # No response has come for a long run of acks=0 requests: that is Kafka's behaviour.
                    self.broker_answers_acks0 = False
                    self._drop_silent()
                    return
                self._silent += 1
        if plan is None:
            self._queue.append(InFlight(header, received_ns, expects))
        else:
            self._queue.append(InFlight(header, received_ns, expects, plan.rewrite, None, plan.throttle,
                                        plan.throttle is not None, plan.record_response))

    def match(self, correlation_id: int) -> InFlight | None:
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
            if not answers:
                self._drop_silent()
        if self._silent:
            self._silent -= 1

    def _drop_silent(self) -> None:
        kept = [e for e in self._queue if e.expects_response]
        self._queue.clear()
        self._queue.extend(kept)
        self._silent = 0

    def oldest_waiting_ns(self) -> int | None:
        """When the oldest request that still expects a response was read, or None."""
        for entry in self._queue:
            if entry.expects_response:
                return entry.received_ns
        return None

    def awaiting_response(self) -> bool:
        """True while some forwarded request still expects a response."""
        return any(e.expects_response for e in self._queue)
