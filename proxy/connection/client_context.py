"""What every client connection of one listener shares, and how a client's error or a timeout reaches a log line."""

from __future__ import annotations

import logging
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from config.model import Address
from proxy.apis import ConnectionScope
from proxy.connection.buffers import SharedReadBuffer
from proxy.connection.descriptors import DescriptorBudget
from proxy.connection.open_gate import OpenGate
from proxy.ground.logs import LogLimiter
from proxy.ops.metrics import ApiMetrics, ProxyMetrics
from proxy.ops.usage_table import NO_USAGE, UsageTable
from quota.managers.connection import ConnectionQuotas
from quota.primitives.clock import Clock

# A client's address as an accepted socket gives it: (ip, port), and for IPv6 (ip, port, flowinfo, scope id)
PeerAddress = tuple[str, int] | tuple[str, int, int, int]


@dataclass(frozen=True, slots=True)
class ListenerContext:
    """What every connection of one listener shares."""

    name: str
    upstreams: Callable[[], tuple[Address, ...]]  # where this listener's connections go, read at connect time
    scope: ConnectionScope
    max_request_bytes: int
    max_response_bytes: int
    max_inflight_requests: int
    max_buffered_response_bytes: int
    connect_timeout_s: float
    metrics: ProxyMetrics
    request_buffer: SharedReadBuffer
    response_buffer: SharedReadBuffer
    on_upstream_result: Callable[[bool], None]  # readiness: True when a broker connection opened, False on failure
    connections: set[Any]  # open ClientConnections, for draining at shutdown
    connection_quotas: ConnectionQuotas  # connection creation rates and counts, shared by every listener
    clock: Clock  # the quotas' clock
    ssl_context: ssl.SSLContext | None = None  # TLS termination on this listener
    principal_rules: tuple[Any, ...] = ()  # mTLS: ssl.principal.mapping.rules (proxy.session.principals)
    sasl: bool = False  # the broker behind authenticates with SASL: frames limited until a client has
    pre_auth_max_bytes: int = 524288  # sasl.server.max.receive.size
    upstream_ssl: ssl.SSLContext | None = None  # TLS to the brokers
    tls_handshake_timeout_s: float = 10.0  # listener.tls.handshake.timeout.ms
    max_header_bytes: int = 65536  # request.header.max.bytes
    splice: bool = False  # connections.splice auto, on a platform with splice(2), neither side TLS
    send_buffer_bytes: int = -1  # socket.send.buffer.bytes: SO_SNDBUF of client connections (-1: the kernel's)
    receive_buffer_bytes: int = -1  # socket.receive.buffer.bytes: SO_RCVBUF of client connections (-1: the kernel's)
    open_gate: OpenGate = field(default_factory=OpenGate)  # workers: the open counts kept by the parent
    descriptors: DescriptorBudget = field(default_factory=lambda: DescriptorBudget(set()))  # RLIMIT_NOFILE headroom
    response_timeout_ns: int = 300_000 * 1_000_000  # upstream.response.timeout.ms
    idle_timeout_ns: int = 600_000 * 1_000_000  # connections.max.idle.ms
    usage: UsageTable = NO_USAGE  # the usage log's table (a broker port's view in cluster mode); NO_USAGE: no log


class ApiMetricsCache(dict[int, ApiMetrics]):
    """One connection's per-API metrics by API key, the listener's fetched at a key's first request; its
    ``__getitem__`` is what the connection's paths call, with no Python call once a key is known."""

    __slots__ = ("_metrics", "_listener")

    def __init__(self, metrics: ProxyMetrics, listener: str) -> None:
        super().__init__()
        self._metrics, self._listener = metrics, listener

    def __missing__(self, api_key: int) -> ApiMetrics:
        found = self[api_key] = self._metrics.api(self._listener, api_key)
        return found


FRAME_ERROR_LOG = LogLimiter()  # one frame-error line per client address and direction every 10 s
MAX_LOGGED_ERROR = 300  # characters of an error message in a log line: a client's bytes are never echoed at length


def bounded(error: object, limit: int = MAX_LOGGED_ERROR) -> str:
    """An error message cut to ``limit`` characters (with how much was cut), so no log line grows with what a
    client sent."""
    text = str(error)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text) - limit} more characters)"


def log_fields(ctx: ListenerContext, peer: str, broker: object = None) -> dict[str, str]:
    """A connection's context fields for a log line's ``extra=`` (``--log-format json`` writes them as keys)."""
    fields = {"listener": ctx.name, "client": peer}
    if broker is not None:
        fields["broker"] = str(broker)
    return fields


def said_frame_error(
    log: logging.Logger, ctx: ListenerContext, peer: str, peer_ip: str, direction: str, error: object
) -> None:
    """A client's frame error (``direction``: request or response) in the log, at most one line per address and
    direction every 10 s, and in the frame-errors metric; the caller closes the connection."""
    suppressed = FRAME_ERROR_LOG.allow(peer_ip, direction, time.monotonic())
    if suppressed is not None:
        log.warning(
            "closing client %s on listener %s: %s%s",
            peer,
            ctx.name,
            bounded(error),
            f" ({suppressed} more like it from this address not logged)" if suppressed else "",
            extra=log_fields(ctx, peer),
        )
    ctx.metrics.frame_errors.labels(ctx.name, direction).inc()


def said_overdue(
    log: logging.Logger, ctx: ListenerContext, peer: str, upstream: str, mute_state: str, overdue: str
) -> str:
    """A connection past a bound (``overdue``: client_full, upstream_timeout or idle) in the log and metrics; the
    reason to close it with. The broker's bound runs until a response's last byte; time the proxy itself kept the
    broker unread does not count against it."""
    if overdue == "upstream_timeout":
        log.warning(
            "closing client %s: broker %s did not answer within %d ms (%s)",
            peer,
            upstream,
            ctx.response_timeout_ns // 1_000_000,
            mute_state,
            extra=log_fields(ctx, peer, upstream),
        )
        ctx.metrics.upstream_errors.labels(ctx.name, "timeout").inc()
        return "upstream_timeout"
    what = "took no response for" if overdue == "client_full" else "idle for"
    log.info(
        "closing client %s: %s %d ms (%s)",
        peer,
        what,
        ctx.idle_timeout_ns // 1_000_000,
        mute_state,
        extra=log_fields(ctx, peer),
    )
    return "idle"


def said_broker_error(log: logging.Logger, ctx: ListenerContext, peer: str, upstream: str, error: object) -> str:
    """A broker's response that is no Kafka frame, in the log and the frame-errors metric; the reason to close with."""
    log.warning(
        "closing %s: protocol error in response from broker %s: %s",
        peer,
        upstream,
        bounded(error),
        extra=log_fields(ctx, peer, upstream),
    )
    ctx.metrics.frame_errors.labels(ctx.name, "response").inc()
    return "broker_protocol_error"


def said_broker_lost(log: logging.Logger, ctx: ListenerContext, peer: str, upstream: str, exc: Exception | None) -> str:
    """The broker closed a client's connection before the client did, in the log and metrics; the reason to close
    with."""
    log.info(
        "broker %s closed the connection of client %s%s",
        upstream,
        peer,
        f": {exc}" if exc else "",
        extra=log_fields(ctx, peer, upstream),
    )
    ctx.metrics.upstream_errors.labels(ctx.name, "lost").inc()
    return "upstream_closed"
