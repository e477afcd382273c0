"""KIP-612's connection-quota metrics Prometheus reads, from the connection quotas when it scrapes: accept rates
(proxy-wide, per listener, per IP with its own ``connection_creation_rate`` entity), throttle times and the
connections the limits count."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from proxy.ops.metrics import PREFIX as METRICS_PREFIX
from quota.managers.connection import ConnectionQuotas
from quota.primitives.entity import DEFAULT


class ConnectionMetricsCollector(Collector):
    """KIP-612's metrics, as Prometheus samples: accept rates (proxy-wide, per listener, per IP with its own
    ``connection_creation_rate`` entity, so the label set is bounded by the configuration) and throttle times."""

    def __init__(self, quotas: ConnectionQuotas, clock) -> None:
        self._quotas = quotas
        self._clock = clock

    def describe(self) -> list:
        return []

    def collect(self) -> Iterator:
        quotas, now_ms = self._quotas, self._clock.now_ms()
        proxy_rate = GaugeMetricFamily(
            f"{METRICS_PREFIX}_broker_connection_accept_rate",
            "Connections accepted per second across the proxy's listeners, as "
            "max.connection.creation.rate measures it (KIP-612's broker-wide rate; the "
            "internal listener is not counted when there are others).",
        )
        proxy_rate.add_metric([], quotas.proxy_accept_rate(now_ms))
        listener_rate = GaugeMetricFamily(
            f"{METRICS_PREFIX}_connection_accept_rate",
            "Connections accepted per second on the listener (KIP-612).",
            labels=["listener"],
        )
        throttle = CounterMetricFamily(
            f"{METRICS_PREFIX}_connection_accept_throttle_time_seconds",
            "Time accepting waited for the proxy-wide or listener rate (seconds); divide by "
            "connection_accept_throttles for KIP-612's average.",
            labels=["listener"],
        )
        throttles = CounterMetricFamily(
            f"{METRICS_PREFIX}_connection_accept_throttles",
            "Accepts that waited for the proxy-wide or listener rate.",
            labels=["listener"],
        )
        ip_throttle = CounterMetricFamily(
            f"{METRICS_PREFIX}_ip_connection_accept_throttle_time_seconds",
            "Throttle time decided for connections from IPs over their "
            "connection_creation_rate (seconds, before the 1 s cap on the hold).",
            labels=["listener"],
        )
        ip_throttles = CounterMetricFamily(
            f"{METRICS_PREFIX}_ip_connection_accept_throttles",
            "Connections held because their IP was over its connection_creation_rate.",
            labels=["listener"],
        )
        for name, stats in quotas.accept_throttles.items():
            listener_rate.add_metric([name], quotas.listener_accept_rate(name, now_ms))
            throttle.add_metric([name], stats.total_ms / 1000.0)
            throttles.add_metric([name], stats.count)
            ip_stats = quotas.ip_throttles[name]
            ip_throttle.add_metric([name], ip_stats.total_ms / 1000.0)
            ip_throttles.add_metric([name], ip_stats.count)
        ip_rate = GaugeMetricFamily(
            f"{METRICS_PREFIX}_ip_connection_accept_rate",
            "Connections accepted per second from an IP that has its own connection_creation_rate quota entity.",
            labels=["ip"],
        )
        ip_limit = GaugeMetricFamily(
            f"{METRICS_PREFIX}_ip_connection_creation_rate_limit",
            "The connection_creation_rate configured for the IP.",
            labels=["ip"],
        )
        for ip, limit in quotas.limits.ip_rates.items():
            if ip != DEFAULT:
                ip_rate.add_metric([ip], quotas.ip_accept_rate(ip, now_ms))
                ip_limit.add_metric([ip], limit)
        counted = GaugeMetricFamily(
            f"{METRICS_PREFIX}_connections_counted",
            "Connections counted open by the connection limits (max.connections, "
            "listener.name.<listener>.max.connections, max.connections.per.ip).",
            labels=["listener"],
        )
        for name, n in list(quotas.per_listener.items()):
            counted.add_metric([name], n)
        tracked = GaugeMetricFamily(
            f"{METRICS_PREFIX}_ip_connection_rates_tracked",
            "IPs whose connection creation rate is being measured (dropped after an hour idle).",
        )
        tracked.add_metric([], quotas.tracked_ips)
        yield from (
            proxy_rate,
            listener_rate,
            throttle,
            throttles,
            ip_throttle,
            ip_throttles,
            ip_rate,
            ip_limit,
            counted,
            tracked,
        )
