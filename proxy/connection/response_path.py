"""The response path of one connection: the broker's responses, in request order, to the client. No I/O.

The connection core (:mod:`proxy.connection.core`) hands the broker's bytes to a frame splitter and this path pulls
its events (:meth:`PureResponses.pump`), acting on each with its plain methods: :meth:`PureResponses.header` at each
response's header (matched to its request by correlation id, :mod:`proxy.connection.inflight`; the answer says
whether to stream, buffer or drop it), writing a streamed response's segments to the client, ``frame`` with a
buffered response, :meth:`PureResponses.ended` at its end.

Most responses stream through untouched. One whose request has a response leg
(:class:`~proxy.apis.response_leg.ResponseLeg`) or a throttle is buffered whole (bounded by
``upstream.response.max.bytes``) and its leg run: observed, rewritten, charged to the consumer byte rate, its
throttle settled; the throttle is merged into ``throttle_time_ms`` and acted on through the
:class:`~proxy.connection.flow.Flow`: the response goes at once and the connection is muted after it, in every
version, as Kafka's broker does. Answers the proxy makes itself go out once every request before them has been
answered. A response to an ``acks=0`` Produce, to the proxy's own probe or to its own lookup reaches no client.

What a response's leg accounted for (KIP-599 tokens given back, a shadow consumer throttle: data, never written by the
planning code) is recorded where the leg ran, through the connection's one accounting
(:class:`~proxy.connection.request_frames.Accounting`), even when the response then fails to be rewritten; what
it learns only later (a count looked up after the response went out) is recorded the same way when it comes.

Every response the client gets is accounted once, by :meth:`ResponsePath._answered` (its bytes to the API's
metrics and the usage log, its latency), when its last byte has been handed over: streamed, buffered or the
proxy's own. A dropped response, or the answer to a lookup, is not a response to a client and is not counted.

What every response goes through (its header matched, its end accounted, the broker side's events pulled:
:class:`PureResponses`) is a C twin's where the extension is built (proxy/connection/native/responses.c,
:mod:`proxy.connection.compiled`); :class:`ResponsePath` adds what a buffered response, a local answer and a throttle
need, in Python for both.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, cast

from proxy.apis.response_leg import ResponseLeg
from proxy.codec.errors import ProtocolError
from proxy.codec.header import RequestHeader, ResponseHeader, response_header_length
from proxy.codec.primitives import Bytes
from proxy.codec.skim import tagged_fields
from proxy.codec.throttle import merge_throttle
from proxy.connection.compiled import NATIVE
from proxy.connection.inflight import InFlight
from proxy.connection.response_frames import PureResponses
from quota.primitives.decision import Decision, Throttle, combined

if TYPE_CHECKING:
    from proxy.session.sasl import SaslExchange

_INT32 = struct.Struct(">i")


def _unwritable(request: RequestHeader, exc: ValueError) -> ProtocolError:
    """The error for a response its leg could not rewrite (or charge): a message not encodable in the version."""
    return ProtocolError(f"cannot rewrite {request.api_key} v{request.api_version} response: {exc}")


def _with_throttle(
    request: RequestHeader, original: memoryview, body: bytes | None, throttle: Throttle | None
) -> bytes | None:
    """The response's new body (None: the broker's stays) with ``throttle`` merged into its ``throttle_time_ms``
    (a version without the field keeps ``body``); raises ValueError when it cannot be encoded."""
    if throttle is None:
        return body
    merged = merge_throttle(
        request.api_key, request.api_version, original if body is None else body, throttle.throttle_time_ms
    )
    return merged if merged is not None else body


def _kept(leg: ResponseLeg, request: RequestHeader, body: memoryview) -> bool:
    """The leg's rewrite would keep the broker's ``body``: it lacks the tag the rewrite looks for
    (:attr:`ResponseLeg.unless_tagged`), found without calling it."""
    tag = leg.unless_tagged
    return tag is not None and tag not in tagged_fields(request.api_key, "response", request.api_version, body)


if TYPE_CHECKING:  # what _Legs is used over (typed as the pure class: the twin has its methods and attributes)
    _Over = PureResponses
else:
    _Over = object


class _Legs(_Over):
    """The broker-to-client direction's rest, over :class:`PureResponses` or its twin: what a buffered response (its
    request's leg run, its throttle merged), a local answer and a throttle need."""

    __slots__ = ()

    def send_ready_local(self) -> None:
        """Answers the proxy made itself go out once every request before them has been answered, and never in the
        middle of a broker response being streamed to the client (its entry has left the queue at its header)."""
        if self._current is not None:
            return  # ended() sends them
        inflight = self._flow.inflight
        while (entry := inflight.pop_ready_local()) is not None:
            local = cast(bytes, entry.local_response)  # what pop_ready_local hands out has one
            self._write(local)
            self._answered(entry, len(local))
            if entry.throttle is not None:
                self._act(entry, entry.throttle, None)

    def frame(self, header: ResponseHeader, frame: Bytes) -> None:
        """A buffered response: its request's leg run, its throttle merged and acted on."""
        if header.raw:
            session = self._session
            sasl = cast("SaslExchange", session.sasl)  # a raw token is split only while the exchange expects one
            if sasl.raw_response(bytes(frame[4:])):
                session.authenticated(sasl.principal)
            self._write(bytes(frame))
            return
        entry = self._current  # a response is buffered once header() matched its request
        assert entry is not None
        request = entry.header
        header_length = response_header_length(request.api_key, request.api_version, frame)
        original = memoryview(frame)[header_length:]
        leg = entry.leg
        if leg.lookup is not None:  # the proxy's own question: the request waiting on it is decided now
            leg.lookup(original)
            return
        throttle = entry.throttle
        try:
            if throttle is None and leg.rewrite_alone:  # what run() gives then (cluster mode's node endpoints)
                rewrite = leg.rewrite
                body = None if rewrite is None or _kept(leg, request, original) else rewrite(original)
            else:
                body, throttle = leg.run(
                    original,
                    lambda rewritten: len(frame) - 4 if rewritten is None else header_length - 4 + len(rewritten),
                    throttle,
                )
                entry.throttle = throttle
                body = _with_throttle(request, original, body, throttle)
        except ValueError as exc:  # the rewritten message cannot be encoded in the client's version
            raise _unwritable(request, exc) from None
        finally:
            if leg.accounted is not None:  # as the leg ran: the bucket and the usage log agree whatever follows
                self._account(request, leg.accounted(lambda usage: self._account(request, usage)))
        self._send_answer(entry, frame, header_length, body, throttle)

    def _charged(
        self,
        entry: InFlight,
        frame: Bytes,
        header_length: int,
        original: memoryview,
        rewritten: bytes | None,
        decision: Decision,
    ) -> None:
        """What :meth:`frame` does after its leg's charge for a leg that only rewrites and charges, the charge not a
        plain forward (a throttle, a shadow one): the twin's pump runs such a leg itself up to the charge, then hands
        the rest here."""
        request = entry.header
        body, throttle = rewritten, combined(None, decision)  # ResponseLeg.run's, from no throttle
        try:
            entry.throttle = throttle
            body = _with_throttle(request, original, body, throttle)
        except ValueError as exc:
            raise _unwritable(request, exc) from None
        self._send_answer(entry, frame, header_length, body, throttle)

    def _send_answer(
        self, entry: InFlight, frame: Bytes, header_length: int, body: bytes | None, throttle: Throttle | None
    ) -> None:
        """The buffered response, its body replaced by ``body`` unless None, to the client; its throttle acted on."""
        if body is not None:
            frame = _INT32.pack(header_length - 4 + len(body)) + bytes(frame[4:header_length]) + body
        self._sent = len(frame)
        if throttle is None:
            self._write(frame)
        else:
            self._act(entry, throttle, frame)

    def _act(self, entry: InFlight, throttle: Throttle, frame: Bytes | None) -> None:
        """Act on a response's throttle: the response goes at once and the connection is muted after it, in every
        version (Kafka >= 2.0; before KIP-219 only the client's own back-off differs). ``frame`` None: already sent
        (a local answer)."""
        now = self._clock()
        self._usage.throttled(entry.header, throttle, throttle.mute_ms, now)
        self._flow.throttled_response(entry, now)
        self._session.muted_for, self._session.muted_by = entry.header.client_id, throttle.by
        if frame is not None:
            self._write(frame)


class PureResponsePath(_Legs, PureResponses):
    """The broker-to-client direction on the pure path, called by the core for each response's header, whole frame
    and end."""

    __slots__ = ()


if TYPE_CHECKING or NATIVE is None:  # typed as the pure class: the twin has its methods and attributes
    ResponsePath = PureResponsePath
else:

    class ResponsePath(_Legs, NATIVE.Responses):
        """The broker-to-client direction, called by the core for each response's header, whole frame and end."""

        __slots__ = ()
