"""The client-side connection: the only code that touches a client socket.

A client socket is wrapped only once its broker connection is open, so no byte is read before there is
somewhere to send it. Each request frame's header is parsed, the request is
recorded as in flight, and its bytes stream to the broker as they arrive. Reading pauses while the broker side
cannot keep up (back-pressure), so nothing is buffered without bound.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Callable

from config.model import Address
from proxy.apis import ConnectionScope, plan_request
from proxy.buffers import SharedReadBuffer
from proxy.codec.errors import ProtocolError
from proxy.codec.frame import STOP, Action, FrameSplitter
from proxy.codec.header import RequestHeader, parse_request_prefix
from proxy.flow import BACKPRESSURE, DRAINING, ReadGate
from proxy.inflight import InFlightQueue
from proxy.metrics import ApiMetrics, ProxyMetrics
from proxy.upstream import UpstreamConnection

log = logging.getLogger(__name__)


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
        self._closed_reason: str | None = None
        self._splitter = FrameSplitter(self._parse, self)
        self._api_cache: dict[int, ApiMetrics] = {}

    # -- asyncio callbacks ------------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.gate = ReadGate(transport)  # type: ignore[arg-type]
        if self._closed_reason is not None:  # the broker went away while the socket was being wrapped
            transport.close()

    def accepted(self, peer: tuple | None) -> None:
        """Count the connection as open; called once, when it is accepted (before it has an upstream)."""
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
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
        return False

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
        plan = plan_request(self.ctx.scope, header)
        if plan.local_response is not None:
            self.inflight.add_local(header, time.perf_counter_ns(), plan.local_response)
            self._send_local_responses()
        else:
            self.inflight.add(header, time.perf_counter_ns(), plan.rewrite)
        return plan.action

    def on_segment(self, view) -> None:
        self.upstream.write(view)

    def on_frame(self, header, frame) -> None:  # no request API is buffered yet
        raise AssertionError("unexpected buffered request")

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

    def _send_local_responses(self) -> None:
        """Answers the proxy made itself go out once every request before them has been answered."""
        while (entry := self.inflight.pop_ready_local()) is not None:
            self.transport.write(entry.local_response)
            api = self.api_metrics(entry.header.api_key)
            api.response_bytes.inc(len(entry.local_response))
            api.latency.observe((time.perf_counter_ns() - entry.received_ns) / 1e9)

    def upstream_lost(self, exc: Exception | None) -> None:
        if self._closed_reason is None:
            log.info("broker %s closed the connection of client %s%s", self.upstream_name, self.peer,
                     f": {exc}" if exc else "")
            self.ctx.metrics.upstream_errors.labels(self.ctx.name, "lost").inc()
            self.close("upstream_closed")

    # -- lifecycle --------------------------------------------------------------------------------------------

    def drain(self) -> None:
        """Shutdown: finish the requests in flight, read no new ones, then close."""
        self.draining = True
        self._close_if_drained()

    def _close_if_drained(self) -> None:
        if self._splitter.at_frame_boundary or self._splitter.stopped:
            if not self.inflight.awaiting_response():
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
