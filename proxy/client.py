"""The client-side connection: the only code that touches a client socket.

A client socket is wrapped only once its broker connection is open, so no byte is read before there is
somewhere to send it. Each request frame's header is parsed, the request is
recorded as in flight, and its bytes stream to the broker as they arrive. Reading pauses while the broker side
cannot keep up (back-pressure), so nothing is buffered without bound.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from dataclasses import dataclass
from typing import Callable

from config.model import Address
from proxy.apis import PASS, ConnectionScope, Plan, Session, plan_request
from proxy.buffers import SharedReadBuffer
from proxy.codec.errors import ProtocolError
from proxy.codec.frame import STOP, STREAM, Action, FrameSplitter
from proxy.codec.header import RequestHeader, parse_request_prefix
from proxy.flow import BACKPRESSURE, DRAINING, THROTTLED, ReadGate
from proxy.inflight import InFlightQueue
from proxy.metrics import ApiMetrics, ProxyMetrics
from proxy.outbox import Outbox
from proxy.upstream import UpstreamConnection

log = logging.getLogger(__name__)

_INT32 = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class ListenerContext:
    """What every connection of one listener shares."""

    name: str
    upstreams: Callable[[], tuple[Address, ...]]  # where this listener's connections go, read at connect time
    scope: ConnectionScope
    max_request_bytes: int
    connect_timeout_s: float
    metrics: ProxyMetrics
    request_buffer: SharedReadBuffer
    response_buffer: SharedReadBuffer
    on_upstream_result: Callable[[bool], None]  # readiness: True when a broker connection opened, False on failure
    connections: set  # open ClientConnections, for draining at shutdown


class ClientConnection(asyncio.BufferedProtocol):
    def __init__(self, ctx: ListenerContext) -> None:
        self.ctx = ctx
        self.transport: asyncio.Transport | None = None
        self.gate: ReadGate | None = None
        self.peer = "?"
        self.upstream_name = "-"
        self.upstream: UpstreamConnection | None = None
        self.inflight = InFlightQueue()
        self.draining = False
        self.client_eof = False
        self.session = Session(ctx.name, "?")
        self._plan: Plan = PASS  # the plan of the request being buffered (BUFFER)
        self.outbox: Outbox | None = None  # responses to the client, in order (made once the socket is wrapped)
        self._throttled_in_flight = 0
        self._closed_reason: str | None = None
        self._splitter = FrameSplitter(self._parse, self)
        self._api_cache: dict[int, ApiMetrics] = {}
        self.last_read_ns = time.monotonic_ns()

    # -- asyncio callbacks ------------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.gate = ReadGate(transport, on_resume=self._release_held_requests)  # type: ignore[arg-type]
        self.outbox = Outbox(transport, self.upstream.gate, lambda: self.throttle_pending(False),  # type: ignore
                             self._outbox_empty)
        if self._closed_reason is not None:  # the broker went away while the socket was being wrapped
            transport.close()

    def accepted(self, peer: tuple | None) -> None:
        """Count the connection as open; called once, when it is accepted (before it has an upstream)."""
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.session.peer_ip = peer[0] if peer else "?"
        metrics = self.ctx.metrics
        metrics.connections_accepted.labels(self.ctx.name).inc()
        metrics.active_connections.labels(self.ctx.name).inc()
        self.ctx.connections.add(self)

    async def connect_upstream(self) -> bool:
        """Open the broker connection, trying each bootstrap server in turn; False closes the client."""
        loop = asyncio.get_running_loop()
        for address in self.ctx.upstreams():
            try:
                _, upstream = await asyncio.wait_for(
                    loop.create_connection(
                        lambda: UpstreamConnection(self, self.ctx.response_buffer), address.host, address.port
                    ),
                    self.ctx.connect_timeout_s,
                )
            except (OSError, asyncio.TimeoutError) as exc:
                log.warning("cannot reach broker %s for client %s: %s", address, self.peer, exc or "timed out")
                self.ctx.metrics.upstream_errors.labels(self.ctx.name, "connect").inc()
                continue
            if self._closed_reason is not None:
                upstream.close()
                return False
            self.upstream = upstream
            self.upstream_name = str(address)
            self.ctx.on_upstream_result(True)
            return True
        self.ctx.on_upstream_result(False)
        self.close("upstream_unreachable")
        return False

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.ctx.request_buffer.view

    def buffer_updated(self, nbytes: int) -> None:
        self.last_read_ns = time.monotonic_ns()
        buffer = self.ctx.request_buffer
        try:
            self._splitter.feed(buffer.view[:nbytes])
        except ProtocolError as exc:
            log.warning("closing client %s on listener %s: %s", self.peer, self.ctx.name, exc)
            self.metrics_frame_error("request")
            self.close("frame_error")
            return
        upstream = self.upstream
        if upstream is not None and upstream.transport.get_write_buffer_size():
            buffer.hand_off()

    def eof_received(self) -> bool:
        """The client is done sending: pass the half-close on, so the broker still processes (and answers)
        everything already forwarded before it sees the end, then closes its side, which closes ours.

        Closing the broker socket at once instead would reset it while answers were on their way, and a broker
        may drop requests it had received but not yet read."""
        self.client_eof = True
        upstream = self.upstream
        if upstream is None or upstream.transport is None or upstream.transport.is_closing():
            return False
        if not self._splitter.at_frame_boundary:
            log.info("client %s closed in the middle of a request", self.peer)
        upstream.transport.write_eof()
        return True  # keep our side open to deliver the remaining answers

    def connection_lost(self, exc: Exception | None) -> None:
        self.close("client_closed")

    def pause_writing(self) -> None:
        if self.upstream is not None:
            self.upstream.gate.pause(BACKPRESSURE)

    def resume_writing(self) -> None:
        if self.upstream is not None:
            self.upstream.gate.resume(BACKPRESSURE)

    # -- request frames ---------------------------------------------------------------------------------------

    def _parse(self, buf) -> RequestHeader:
        return parse_request_prefix(buf, self.ctx.max_request_bytes)

    def on_header(self, header: RequestHeader) -> Action:
        if self.draining:
            self.gate.pause(DRAINING)
            self._close_if_drained()
            return STOP
        api = self.api_metrics(header.api_key)
        api.requests.inc()
        api.request_bytes.inc(header.frame_length)
        plan = plan_request(self.ctx.scope, self.session, header)
        if plan is PASS:
            self.inflight.add(header, time.perf_counter_ns())
            return STREAM
        if plan.local_response is not None:
            self.inflight.add_local(header, time.perf_counter_ns(), plan.local_response)
            self._send_local_responses()
            return plan.action
        self.inflight.add(header, time.perf_counter_ns(), plan)
        if plan.throttle is not None:
            if header.expects_response:
                self.throttle_pending(True)
            else:
                self.mute(plan.throttle.mute_ms)  # acks=0: no response to carry the throttle, only the mute
        self._plan = plan
        return plan.action

    def on_segment(self, view) -> None:
        self.upstream.write(view)

    def on_frame(self, header: RequestHeader, frame: bytearray) -> None:
        """A buffered request: rewritten by its plan, then forwarded whole."""
        plan, self._plan = self._plan, PASS
        if plan.request_rewrite is not None:
            try:
                body = plan.request_rewrite(memoryview(frame)[header.header_length:])
            except ValueError as exc:
                raise ProtocolError(f"cannot rewrite request {header.api_key} v{header.api_version}: {exc}") from None
            if body is not None:
                frame = _INT32.pack(header.header_length - 4 + len(body)) + bytes(frame[4:header.header_length]) + body
        self.upstream.write(frame)

    def on_frame_end(self, header: RequestHeader) -> None:
        if self.draining:
            self._close_if_drained()

    # -- called by the upstream side --------------------------------------------------------------------------

    def api_metrics(self, api_key: int) -> ApiMetrics:
        found = self._api_cache.get(api_key)
        if found is None:
            found = self._api_cache[api_key] = self.ctx.metrics.api(self.ctx.name, api_key)
        return found

    def metrics_frame_error(self, direction: str) -> None:
        self.ctx.metrics.frame_errors.labels(self.ctx.name, direction).inc()

    def response_done(self) -> None:
        self._send_local_responses()
        if self.draining:
            self._close_if_drained()

    # -- responses to the client, and throttling ------------------------------------------------------------

    def send(self, data) -> None:
        self.outbox.send(data)

    def throttle_pending(self, pending: bool) -> None:
        """A throttled request is in flight: read nothing more until its response is out and its mute is over.

        A broker reads one request per connection at a time, so a client it throttles cannot slip more requests
        in meanwhile; the proxy reads ahead, so it stops reading the moment it decides a throttle.
        """
        self._throttled_in_flight += 1 if pending else -1
        if self._throttled_in_flight == (1 if pending else 0):
            if pending:
                self._splitter.hold()
                self.gate.pause(THROTTLED)
            else:
                self.gate.resume(THROTTLED)

    def mute(self, mute_ms: int) -> None:
        """Stop reading requests for ``mute_ms`` (a quota throttle)."""
        if mute_ms > 0:
            self._splitter.hold()
            self.gate.mute(asyncio.get_running_loop(), mute_ms)

    def _release_held_requests(self) -> None:
        """Reading resumes: requests read ahead while throttled go on first, in order."""
        try:
            self._splitter.release()
        except ProtocolError as exc:
            log.warning("closing client %s on listener %s: %s", self.peer, self.ctx.name, exc)
            self.metrics_frame_error("request")
            self.close("frame_error")

    def hold_response(self, frame: bytes, delay_ms: int) -> None:
        """KIP-13's original throttle: this response, and all after it, go out ``delay_ms`` from now; reading stays
        paused until then (the broker would not read the next request before answering this one)."""
        self.outbox.hold(frame, delay_ms)

    def _holding(self) -> bool:
        return self.outbox is not None and self.outbox.holding

    def _outbox_empty(self) -> None:
        if self.draining:
            self._close_if_drained()

    def _send_local_responses(self) -> None:
        """Answers the proxy made itself go out once every request before them has been answered."""
        while (entry := self.inflight.pop_ready_local()) is not None:
            self.send(entry.local_response)
            api = self.api_metrics(entry.header.api_key)
            api.response_bytes.inc(len(entry.local_response))
            api.latency.observe((time.perf_counter_ns() - entry.received_ns) / 1e9)

    def upstream_lost(self, exc: Exception | None) -> None:
        if self._closed_reason is None and self.client_eof:
            self.close("client_closed")  # the broker closed after the client's half-close: the normal end
        elif self._closed_reason is None:
            log.info("broker %s closed the connection of client %s%s", self.upstream_name, self.peer,
                     f": {exc}" if exc else "")
            self.ctx.metrics.upstream_errors.labels(self.ctx.name, "lost").inc()
            self.close("upstream_closed")

    # -- lifecycle --------------------------------------------------------------------------------------------

    def check_timeouts(self, now_ns: int, response_timeout_ns: int, idle_timeout_ns: int) -> None:
        """Close a connection whose broker stopped answering, or that has been idle too long (every wait bounded)."""
        waiting_since = self.inflight.oldest_waiting_ns()
        if waiting_since is not None:
            if now_ns - waiting_since > response_timeout_ns:
                log.warning("closing client %s: broker %s did not answer within %d ms", self.peer, self.upstream_name,
                            response_timeout_ns // 1_000_000)
                self.ctx.metrics.upstream_errors.labels(self.ctx.name, "timeout").inc()
                self.close("upstream_timeout")
        elif now_ns - self.last_read_ns > idle_timeout_ns and not self._holding():
            log.info("closing client %s: idle for %d ms", self.peer, idle_timeout_ns // 1_000_000)
            self.close("idle")

    def drain(self) -> None:
        """Shutdown: finish the requests in flight, read no new ones, then close."""
        self.draining = True
        self._close_if_drained()

    def _close_if_drained(self) -> None:
        if self._splitter.at_frame_boundary or self._splitter.stopped:
            if not self.inflight.awaiting_response() and not self._holding():
                self.close("shutdown")

    def close(self, reason: str) -> None:
        if self._closed_reason is not None:
            return
        self._closed_reason = reason
        ctx = self.ctx
        ctx.connections.discard(self)
        ctx.metrics.active_connections.labels(ctx.name).dec()
        ctx.metrics.connections_closed.labels(ctx.name, reason).inc()
        if self.gate is not None:
            self.gate.close()
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()
        if self.upstream is not None:
            self.upstream.close()

    def abort(self) -> None:
        """Grace period over: close now, dropping whatever is still in flight."""
        self.close("shutdown_timeout")
        if self.transport is not None:
            self.transport.abort()
