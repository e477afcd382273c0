"""The broker-side connection: one per client connection, the only code that touches a broker socket.

Responses are split into frames, matched to their requests by correlation id (:mod:`proxy.inflight`) and
streamed back to the client as they arrive; those whose request plan asked for it are buffered whole, decoded
and rewritten. A response to an ``acks=0`` Produce is dropped.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from typing import TYPE_CHECKING

from proxy.apis.byte_rate import delays_response, merge_throttle
from proxy.buffers import SharedReadBuffer
from proxy.codec.errors import ProtocolError
from proxy.codec.frame import BUFFER, DROP, STREAM, Action, FrameSplitter
from proxy.codec.header import ResponseHeader, parse_response_prefix, response_header_length
from proxy.flow import BACKPRESSURE, ReadGate
from proxy.inflight import InFlight
from quota.decision import is_applied

if TYPE_CHECKING:
    from proxy.client import ClientConnection

log = logging.getLogger(__name__)

_INT32 = struct.Struct(">i")


class UpstreamConnection(asyncio.BufferedProtocol):
    def __init__(self, client: "ClientConnection", buffer: SharedReadBuffer) -> None:
        self._client = client
        self._buffer = buffer
        self._splitter = FrameSplitter(parse_response_prefix, self)
        self._current: InFlight | None = None
        self.transport: asyncio.Transport | None = None
        self.gate: ReadGate | None = None
        self.closed = False

    # -- asyncio callbacks ------------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.gate = ReadGate(transport)  # type: ignore[arg-type]

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._buffer.view

    def buffer_updated(self, nbytes: int) -> None:
        client = self._client
        try:
            self._splitter.feed(self._buffer.view[:nbytes])
        except ProtocolError as exc:
            log.warning("closing %s: protocol error in response from broker %s: %s", client.peer, client.upstream_name, exc)
            client.metrics_frame_error("response")
            client.close("broker_protocol_error")
            return
        transport = client.transport
        if transport is not None and transport.get_write_buffer_size():
            self._buffer.hand_off()

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.gate is not None:
            self.gate.close()
        self._client.upstream_lost(exc)

    def pause_writing(self) -> None:
        self._client.gate.pause(BACKPRESSURE)

    def resume_writing(self) -> None:
        self._client.gate.resume(BACKPRESSURE)

    # -- frames -----------------------------------------------------------------------------------------------

    def on_header(self, header: ResponseHeader) -> Action:
        entry = self._client.inflight.match(header.correlation_id)
        if entry is None:
            return DROP
        self._current = entry
        if entry.rewrite is not None or entry.throttle is not None or entry.record_response is not None:
            return BUFFER
        self._client.api_metrics(entry.header.api_key).response_bytes.inc(header.frame_length)
        return STREAM

    def on_segment(self, view) -> None:
        self._client.send(view)

    def on_frame(self, header: ResponseHeader, frame: bytearray) -> None:
        """A response the proxy decodes and may rewrite (its request's plan asked for it)."""
        entry = self._current
        request = entry.header
        header_length = response_header_length(request.api_key, request.api_version, frame)
        original = memoryview(frame)[header_length:]
        try:
            body = entry.rewrite(original) if entry.rewrite is not None else None
            if entry.record_response is not None:  # recorded as the client will receive it (after any trimming)
                decision = entry.record_response(len(frame) - 4 if body is None else header_length - 4 + len(body))
                if is_applied(decision):
                    entry.throttle = decision
            throttle = entry.throttle
            if throttle is not None:
                merged = merge_throttle(request.api_key, request.api_version,
                                        original if body is None else body, throttle.throttle_time_ms)
                body = merged if merged is not None else body
        except ValueError as exc:  # the rewritten message cannot be encoded in the client's version
            raise ProtocolError(f"cannot rewrite {request.api_key} v{request.api_version} response: {exc}") from None
        if body is not None:
            frame = _INT32.pack(header_length - 4 + len(body)) + bytes(frame[4:header_length]) + body
        client = self._client
        client.api_metrics(request.api_key).response_bytes.inc(len(frame))
        if throttle is None:
            client.send(frame)
        elif delays_response(request.api_key, request.api_version):
            client.hold_response(frame, throttle.mute_ms)
        else:
            client.send(frame)
            client.mute(throttle.mute_ms)
            if entry.plan_throttled:
                client.throttle_pending(False)

    def on_frame_end(self, header: ResponseHeader) -> None:
        entry = self._current
        if entry is None:
            return
        self._current = None
        elapsed = (time.perf_counter_ns() - entry.received_ns) / 1e9
        self._client.api_metrics(entry.header.api_key).latency.observe(elapsed)
        self._client.response_done()

    # -- control ----------------------------------------------------------------------------------------------

    def write(self, data) -> None:
        self.transport.write(data)

    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()
