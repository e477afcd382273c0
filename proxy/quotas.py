"""The byte-rate quota managers of a running proxy, and the metrics Prometheus reads from them.

The managers live in ``quota/`` and are pure; this module builds them from the configuration with the real
clock, expires idle sensors in the background, and exposes per-entity metrics following Kafka's quota metrics
(``byte-rate``, ``throttle-time`` avg/max, throttled responses). Metrics are read from the managers when
Prometheus scrapes, never on the request path. Label cardinality is bounded: beyond
``quota.metrics.max.entities`` entities (busiest first), the rest are summed under ``__other__``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from config.model import ProxyConfig
from proxy.clock import SystemClock
from quota.client_quota import ClientQuotaManager
from quota.entity import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, QuotaTable, QuotaTags
from quota.rate import QuotaWindow
from quota.sensor import EntityStats

OTHER = "__other__"
PREFIX = "kafka_quota_proxy_quota"


class ByteRateQuotas:
    """``produce`` (producer_byte_rate, request bytes) and ``fetch`` (consumer_byte_rate, response bytes)."""

    def __init__(self, config: ProxyConfig, clock=None) -> None:
        settings = config.settings
        self.window = QuotaWindow(settings["quota.window.num"], settings["quota.window.size.seconds"])
        mute_max = settings["quota.mute.max.ms"]
        self.mute_max_ms = mute_max
        self.clock = clock or SystemClock()
        self.produce = ClientQuotaManager(config.quotas, PRODUCER_BYTE_RATE, self.clock, self.window, mute_max)
        self.fetch = ClientQuotaManager(config.quotas, CONSUMER_BYTE_RATE, self.clock, self.window, mute_max)
        self.max_metric_entities = settings["quota.metrics.max.entities"]

    def update(self, table: QuotaTable) -> None:
        """Swap in a new quota table (dynamic config); live sensors take the new limits at once."""
        self.produce.update_quotas(table)
        self.fetch.update_quotas(table)

    def expire_idle(self) -> int:
        return self.produce.expire_idle_sensors() + self.fetch.expire_idle_sensors()

    def managers(self) -> tuple[tuple[str, ClientQuotaManager], ...]:
        return ((PRODUCER_BYTE_RATE, self.produce), (CONSUMER_BYTE_RATE, self.fetch))


class QuotaMetricsCollector(Collector):
    def __init__(self, quotas: ByteRateQuotas) -> None:
        self._quotas = quotas

    def describe(self) -> list:
        return []  # collected on demand; nothing to register up front

    def collect(self) -> Iterator:
        labels = ["quota", "user", "client_id"]
        rate = GaugeMetricFamily(f"{PREFIX}_byte_rate", "Measured byte rate (bytes/s) of the quota entity, as the quota check measures it.", labels=labels)
        limit = GaugeMetricFamily(f"{PREFIX}_limit", "Configured quota (bytes/s) that applies to the entity.", labels=labels)
        throttle_total = CounterMetricFamily(f"{PREFIX}_throttle_time_ms", "Total throttle time (ms) decided for the entity; divide by throttled_responses for the average.", labels=labels)
        throttle_max = GaugeMetricFamily(f"{PREFIX}_throttle_time_max_ms", "Longest throttle (ms) decided for the entity within the last quota window span.", labels=labels)
        throttled = CounterMetricFamily(f"{PREFIX}_throttled_responses", "Responses that carried a throttle for the entity.", labels=labels)
        recorded = CounterMetricFamily(f"{PREFIX}_bytes", "Bytes counted against the entity's quota.", labels=labels)
        for key, manager in self._quotas.managers():
            for stats in self._bounded(manager.stats()):
                tag_labels = [key, stats.tags.user, stats.tags.client_id]
                rate.add_metric(tag_labels, stats.rate)
                if not math.isinf(stats.limit):
                    limit.add_metric(tag_labels, stats.limit)
                throttle_total.add_metric(tag_labels, stats.throttle_time_ms_total)
                throttle_max.add_metric(tag_labels, stats.throttle_time_ms_max)
                throttled.add_metric(tag_labels, stats.throttled_count)
                recorded.add_metric(tag_labels, stats.value_total)
        yield from (rate, limit, throttle_total, throttle_max, throttled, recorded)

    def _bounded(self, stats: list[EntityStats]) -> list[EntityStats]:
        cap = self._quotas.max_metric_entities
        if len(stats) <= cap:
            return stats
        stats = sorted(stats, key=lambda s: s.value_total, reverse=True)
        kept, rest = stats[: cap - 1], stats[cap - 1 :]
        other = EntityStats(
            tags=QuotaTags(OTHER, OTHER), entity=None, limit=math.inf, rate=sum(s.rate for s in rest),
            value_total=sum(s.value_total for s in rest), throttle_time_ms_total=sum(s.throttle_time_ms_total for s in rest),
            throttle_time_ms_max=max(s.throttle_time_ms_max for s in rest), throttled_count=sum(s.throttled_count for s in rest),
            last_record_ms=max(s.last_record_ms for s in rest), shadow=False,
        )
        return [*kept, other]
