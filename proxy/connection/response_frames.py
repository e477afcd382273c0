"""What every response of a connection goes through: its header matched to its request in flight (stream, buffer or
drop it), its end accounted, and the broker side's events pulled from the splitter. :class:`PureResponses` is the
reference of the C twin (proxy/connection/native/responses.c, :mod:`proxy.connection.compiled`);
:mod:`proxy.connection.response_path` adds the rest (a buffered answer's leg, a local answer, a throttle) over either.
No I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from proxy.apis.response_leg import NO_LEG
from proxy.apis.usage import Usage
from proxy.codec.frame import (
    BUFFER,
    DROP,
    FRAME,
    HEADER,
    LAST_SEGMENT,
    NEED_DATA,
    SEGMENT,
    STREAM,
    Action,
    FrameSplitter,
)
from proxy.codec.header import RequestHeader, ResponseHeader
from proxy.codec.primitives import Bytes
from proxy.connection.flow import Flow
from proxy.connection.inflight import InFlight
from proxy.ops.usage_table import NO_USAGE_RECORDER, UsageRecorder
from proxy.session.session import Session

if TYPE_CHECKING:
    from proxy.ops.metrics import ApiMetrics


class PureResponses:
    """What every response goes through, called by the core: its header matched to its request (stream, buffer or
    drop it), its end accounted, and the broker side's events pulled from the splitter (:meth:`pump`). The reference
    of the C twin (``proxy.connection._native.Responses``); :class:`ResponsePath` adds the rest over either."""

    __slots__ = (
        "_flow",
        "_queue",
        "_write",
        "_clock",
        "_api_metrics",
        "_usage",
        "_session",
        "_account",
        "_current",
        "_sent",
        "dropping_since_ns",
    )

    def __init__(
        self,
        flow: Flow,
        write: Callable[[Bytes], None],
        clock: Callable[[], int],
        api_metrics: Callable[[int], ApiMetrics],
        usage: UsageRecorder,
        session: Session,
        account: Callable[[RequestHeader, Usage], None],
    ) -> None:
        self._flow = flow
        self._queue = flow.inflight  # the flow's in-flight queue, which the responses are matched against
        self._account = account  # records what a response leg accounted for (request_frames.Accounting)
        self._session = session  # whose SASL exchange raw token responses belong to
        self._write = write  # writes every whole frame and streamed segment to the client socket
        self._clock = clock  # the connection's one clock (ns): latencies, mutes, held responses, timeouts
        self._api_metrics = api_metrics
        self._usage = (
            usage  # what the usage log is told (proxy.ops.usage_log.UsageRecorder; does nothing without a log)
        )
        self._current: InFlight | None = None  # the request whose response is being received
        self._sent = 0  # the size of the response frame being received, as the client gets it
        self.dropping_since_ns = 0  # a dropped response (acks=0, the probe) is arriving: since when (ns)

    @property
    def receiving(self) -> InFlight | None:
        """The request whose response has started arriving and not finished (the response timeout covers it)."""
        return self._current

    def _answered(self, entry: InFlight, nbytes: int) -> None:
        """The one place a response is accounted, once its ``nbytes`` are handed to the client: bytes to the API's
        metrics and the usage log, latency from the request's header."""
        request = entry.header
        usage = self._usage
        if usage is not NO_USAGE_RECORDER:  # a call that does nothing, without a usage log
            usage.response(request, nbytes)
        self._api_metrics(request.api_key).answered(nbytes, (self._clock() - entry.received_ns) / 1e9)

    def pump(self, splitter: FrameSplitter) -> int:
        """Act on the events of the broker's bytes ``splitter`` holds, in the order a response brings them (a
        buffered one's, then a streamed one's), until it needs data; returns its ``streaming`` then."""
        while True:
            event = splitter.next_event()
            if event is HEADER:
                splitter.act(self.header(splitter.header))
            elif event is FRAME:
                self.frame(splitter.header, splitter.value)
                self.ended()
            elif event is NEED_DATA:
                return splitter.streaming
            elif event is LAST_SEGMENT:
                self._write(splitter.value)
                self.ended()
            elif event is SEGMENT:
                self._write(splitter.value)
            else:  # END
                self.ended()

    def header(self, header: ResponseHeader) -> Action:
        """A response's header: stream it, buffer it (its request's leg or throttle needs the whole), or drop it."""
        if header.raw:  # a raw SASL token from the broker: it answers the client's raw token, no correlation id
            self._current = None
            return BUFFER
        entry = self._queue.match(header.correlation_id)
        if entry is None:
            self.dropping_since_ns = self._clock()  # the response timeout covers it to its last byte too
            return DROP
        self._current = entry
        if entry.leg is not NO_LEG or entry.throttle is not None:
            return BUFFER
        self._sent = header.size + 4  # its frame_length (a property: a call)
        return STREAM

    def ended(self) -> None:
        """The response's last byte is out (or dropped): accounted, and the answers waiting behind it go."""
        entry = self._current
        self.dropping_since_ns = 0
        if entry is not None:
            self._current = None
            if entry.leg.lookup is None:
                self._answered(entry, self._sent)
        if self._queue.local_answers:  # a dropped response (acks=0, the probe) may have been all one waited for
            self.send_ready_local()

    if TYPE_CHECKING:  # _Legs' (over this class or its twin)

        def frame(self, header: ResponseHeader, frame: Bytes) -> None: ...

        def send_ready_local(self) -> None: ...
