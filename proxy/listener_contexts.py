"""What the connections of each listener are given (a :class:`ListenerContext`): the settings' bounds and timeouts,
the listener's own TLS termination, principal rules and SASL, and what every connection of the proxy shares (metrics,
read buffers, the connection quotas, the open-files budget). One per listener, and one per broker port in cluster
mode."""

from __future__ import annotations

import ssl
from collections.abc import Callable

from config.model import Address, ProxyConfig
from config.principal_rules import parse_rules
from proxy.apis import ConnectionScope
from proxy.connection.buffers import SharedReadBuffer
from proxy.connection.client_socket import ClientConnection, ListenerContext
from proxy.connection.descriptors import DescriptorBudget
from proxy.connection.open_gate import OpenGate
from proxy.connection.splice import splice_supported
from proxy.ops.metrics import ProxyMetrics
from proxy.ops.usage_table import NO_USAGE, UsageTable
from quota.managers.connection import ConnectionQuotas
from quota.primitives.clock import Clock


class ListenerContexts:
    """Makes the listeners' contexts; the TLS contexts are made once per listener, here."""

    def __init__(
        self,
        config: ProxyConfig,
        *,
        metrics: ProxyMetrics,
        on_upstream_result: Callable[[bool], None],
        connections: set[ClientConnection],
        connection_quotas: ConnectionQuotas,
        clock: Clock,
        upstream_ssl: ssl.SSLContext | None,
        open_gate: OpenGate,
        descriptors: DescriptorBudget,
        usage: UsageTable = NO_USAGE,
    ) -> None:
        self._settings = config.settings
        self._tls = {
            lc.name: (
                (lc.tls.context(), parse_rules(lc.tls.principal_mapping_rules)) if lc.tls is not None else (None, ())
            )
            for lc in config.listeners
        }
        self._sasl = {lc.name: lc.sasl for lc in config.listeners}
        self._buffers = (SharedReadBuffer(), SharedReadBuffer())  # requests', responses': one each per process
        self._metrics = metrics
        self._on_upstream_result = on_upstream_result
        self._connections = connections
        self._connection_quotas = connection_quotas
        self._clock = clock
        self._upstream_ssl = upstream_ssl
        self._open_gate = open_gate
        self._descriptors = descriptors
        self._usage = usage  # the usage log's table (NO_USAGE: no usage log)

    def make(
        self,
        name: str,
        upstreams: Callable[[], tuple[Address, ...]],
        scope: ConnectionScope,
        broker: int | None = None,
    ) -> ListenerContext:
        """The context of listener ``name``'s connections, which go to ``upstreams()`` (read at connect time);
        ``broker``: cluster mode's port of that broker (its usage log rows name it)."""
        settings = self._settings
        ssl_context, principal_rules = self._tls[name]
        return ListenerContext(
            name=name,
            upstreams=upstreams,
            scope=scope,
            max_request_bytes=settings.socket_request_max_bytes,
            max_response_bytes=settings.upstream_response_max_bytes,
            max_inflight_requests=settings.connections_max_inflight_requests,
            max_buffered_response_bytes=settings.connections_max_buffered_response_bytes,
            connect_timeout_s=settings.upstream_connect_timeout_ms / 1000.0,
            metrics=self._metrics,
            request_buffer=self._buffers[0],
            response_buffer=self._buffers[1],
            on_upstream_result=self._on_upstream_result,
            connections=self._connections,
            connection_quotas=self._connection_quotas,
            clock=self._clock,
            ssl_context=ssl_context,
            principal_rules=principal_rules,
            sasl=self._sasl[name],
            pre_auth_max_bytes=settings.sasl_server_max_receive_size,
            upstream_ssl=self._upstream_ssl,
            tls_handshake_timeout_s=settings.listener_tls_handshake_timeout_ms / 1000.0,
            max_header_bytes=settings.request_header_max_bytes,
            splice=(
                settings.connections_splice == "auto"
                and splice_supported()
                and ssl_context is None
                and self._upstream_ssl is None
            ),
            send_buffer_bytes=settings.socket_send_buffer_bytes,
            receive_buffer_bytes=settings.socket_receive_buffer_bytes,
            open_gate=self._open_gate,
            descriptors=self._descriptors,
            response_timeout_ns=settings.upstream_response_timeout_ms * 1_000_000,
            idle_timeout_ns=settings.connections_max_idle_ms * 1_000_000,
            usage=self._usage if broker is None else self._usage.for_broker(broker),
        )
