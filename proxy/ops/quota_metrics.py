"""The per-entity quota metrics Prometheus reads, collected from the quota managers when it scrapes (in the scrape
thread), never on the request path: the byte rates and the shadow throttles here, with the controller mutations'
(:mod:`proxy.ops.mutation_metrics`), the topic quotas' (:mod:`proxy.ops.topic_metrics`), the request rates'
(:mod:`proxy.ops.request_rate_metrics`), the producer ids'
(:mod:`proxy.ops.producer_id_metrics`) and volume usage's (:mod:`proxy.ops.volume_metrics`); the connection quotas
have their own collector (:mod:`proxy.ops.connection_metrics`).

They follow Kafka's quota metrics (``byte-rate``, ``throttle-time`` avg/max, throttled responses). Label
cardinality is bounded: beyond ``quota.metrics.max.entities`` entities (busiest first), the rest are summed under
``__other__``; a client-chosen label value is cut at MAX_LABEL characters (:mod:`proxy.ops.metric_labels`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from proxy.ops.metric_labels import tag_labels as tag_labels_of
from proxy.ops.mutation_metrics import mutation_families
from proxy.ops.producer_id_metrics import issued_family, producer_id_families
from proxy.ops.request_rate_metrics import request_rate_families
from proxy.ops.topic_metrics import topic_families
from proxy.ops.volume_metrics import volume_families
from quota.primitives.entity import (
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    PRODUCER_BYTE_RATE,
    PRODUCER_IDS_RATE,
)

if TYPE_CHECKING:
    from proxy.ops.entity_series import EntitySeries
    from quota.managers.client_quota import ClientQuotaManager


PREFIX = "kafka_quota_proxy_quota"
SCRAPE_PAUSE_S = 0.0002


def let_the_loop_run() -> None:
    """Between two chunks of a scrape's work (in the scrape thread, see proxy.ops.http): the GIL given back long enough
    for the event loop to take it if it waits for it, so traffic waits at most a chunk (~1 ms), not the switch
    interval (5 ms) or a whole C-level loop over every entity."""
    time.sleep(SCRAPE_PAUSE_S)


class _Families:
    """Metric families as a registry to format (``generate_latest`` asks only for ``collect``)."""

    def __init__(self, families: Iterator) -> None:
        self._families = families

    def collect(self) -> Iterator:
        return self._families


class QuotaMetricsCollector(Collector):
    """The per-entity quota metrics, read when Prometheus scrapes (in the scrape thread, never on the request path):
    each family bounded to ``quota.metrics.max.entities`` series per quota, the busiest by what they count, the
    rest summed under ``__other__``."""

    def __init__(self, quotas, pause=let_the_loop_run) -> None:  # quotas: proxy.enforcement.proxy_quotas.ProxyQuotas
        self._quotas = quotas
        self._pause = pause
        self.series: EntitySeries | None = None  # when it serves the per-entity families at scale

    def describe(self) -> list:
        return []  # collected on demand; nothing to register up front

    def collect(self) -> Iterator:
        if self.series is None or self.series.inline:  # else the series give them, from their last build
            yield from self.entity_families()
        yield from self._shadow_and_volume()
        yield from topic_families(self._quotas.topics)
        yield from request_rate_families(self._quotas.requests, self._quotas.max_metric_entities, self._pause)
        yield self._overflowed()
        yield self._refunds_refused()
        yield issued_family(self._quotas)

    def entities(self) -> int:
        """Quota entities the per-entity families walk (what a build costs)."""
        q = self._quotas
        return (
            sum(len(s.produce) + len(s.fetch) + len(s.producer_ids) for _, s in q.quota_sets())
            + len(q.mutations)
            + (len(q.volume.produce) if q.volume is not None else 0)
        )

    def render(self) -> bytes:
        """The per-entity families as text exposition (a background build of :mod:`proxy.ops.entity_series`)."""
        return generate_latest(_Families(self.entity_families()))

    def entity_families(self) -> Iterator:
        """One series per busy entity and ``__other__``: byte rates, controller mutations, producer ids (users)."""
        per_broker = self._quotas.per_broker  # quota.scope broker in cluster mode: a broker label on each set's series
        labels = ["quota", "user", "client_id"] + (["node_id"] if per_broker else [])
        rate = GaugeMetricFamily(
            f"{PREFIX}_byte_rate",
            "Measured byte rate (bytes/s) of the quota entity, as the quota check measures it.",
            labels=labels,
        )
        limit = GaugeMetricFamily(
            f"{PREFIX}_limit",
            "Quota (bytes/s) that applies to the entity now (no sample when none does).",
            labels=labels,
        )
        throttle_total = CounterMetricFamily(
            f"{PREFIX}_throttle_time_seconds",
            "Total throttle time (seconds) applied to the entity (shadow throttles not included); divide by throttled_responses for the average.",
            labels=labels,
        )
        throttle_max = GaugeMetricFamily(
            f"{PREFIX}_throttle_time_max_seconds",
            "Longest throttle (seconds) applied to the entity within the last quota window span.",
            labels=labels,
        )
        throttled = CounterMetricFamily(
            f"{PREFIX}_throttled_responses",
            "Responses that carried a throttle applied for the entity (shadow throttles not included).",
            labels=labels,
        )
        recorded = CounterMetricFamily(f"{PREFIX}_bytes", "Bytes counted against the entity's quota.", labels=labels)
        shadow_total = CounterMetricFamily(
            f"{PREFIX}_entity_shadow_throttle_time_seconds",
            "Throttle time (seconds) a shadow quota decided for the entity and did not apply.",
            labels=labels,
        )
        shadowed = CounterMetricFamily(
            f"{PREFIX}_entity_shadow_throttled_responses",
            "Responses a shadow quota would have throttled for the entity (not throttled).",
            labels=labels,
        )
        for key, manager, broker in self._byte_rate_managers():
            top, other = manager.top_stats(self._quotas.max_metric_entities, pause=self._pause)
            for stats in top + ([other] if other is not None else []):
                tag_labels = [key, *tag_labels_of(stats.tags)]
                tag_labels += [broker] if per_broker else []
                if not math.isnan(stats.rate):  # the summed __other__ has no rate
                    rate.add_metric(tag_labels, stats.rate)
                if not math.isinf(stats.limit):
                    limit.add_metric(tag_labels, stats.limit)
                throttle_total.add_metric(tag_labels, stats.throttle_time_ms_total / 1000.0)
                throttle_max.add_metric(tag_labels, stats.throttle_time_ms_max / 1000.0)
                throttled.add_metric(tag_labels, stats.throttled_count)
                recorded.add_metric(tag_labels, stats.value_total)
                if stats.shadow_throttled_count or stats.shadow:  # series only where a shadow quota is or was
                    shadow_total.add_metric(tag_labels, stats.shadow_throttle_time_ms_total / 1000.0)
                    shadowed.add_metric(tag_labels, stats.shadow_throttled_count)
        yield from (rate, limit, throttle_total, throttle_max, throttled, recorded, shadow_total, shadowed)
        yield from mutation_families(self._quotas, self._pause)
        yield from producer_id_families(self._quotas, self._pause)

    def _shadow_and_volume(self) -> Iterator:
        shadow_count = CounterMetricFamily(
            f"{PREFIX}_shadow_throttles",
            "Throttles computed in shadow mode and not applied, by quota.",
            labels=["quota"],
        )
        shadow_seconds = CounterMetricFamily(
            f"{PREFIX}_shadow_throttle_time_seconds",
            "Throttle time computed in shadow mode and not applied (seconds), by quota.",
            labels=["quota"],
        )
        for quota in list(self._quotas.shadows.counts):  # a few keys, added by the loop while this may run
            count, ms = self._quotas.shadows.counts[quota]
            shadow_count.add_metric([quota], count)
            shadow_seconds.add_metric([quota], ms / 1000.0)
        mode = GaugeMetricFamily(f"{PREFIX}_shadow_mode", "1 while the whole proxy is in shadow mode (quota.mode).")
        mode.add_metric([], 1.0 if self._quotas.mode.shadow else 0.0)
        yield from (shadow_count, shadow_seconds, mode)
        if self._quotas.volume is not None:
            yield from volume_families(self._quotas.volume)

    def _overflowed(self) -> CounterMetricFamily:
        """Entities a full table evicted to make room for new ones (issue 44: byte-rate sensors, mutation buckets,
        per-IP connection rates, producer-id users)."""
        per_broker = self._quotas.per_broker
        overflowed = CounterMetricFamily(
            f"{PREFIX}_overflowed_records",
            "Entities evicted to make room for new ones because quota.max.tracked.entities entities were held; above "
            "0 the cap bites.",
            labels=["quota"] + (["node_id"] if per_broker else []),
        )
        for (key, broker), n in self._quotas.overflow_counts().items():
            overflowed.add_metric([key] + ([broker] if per_broker else []), n)
        return overflowed

    def _refunds_refused(self) -> CounterMetricFamily:
        """Peers' refunds cut to what they charged (issue 44, T8: quota.primitives.peer_refunds), per quota."""
        refused = CounterMetricFamily(
            f"{PREFIX}_peer_refunds_refused",
            "Peers' usage entries giving back more mutation tokens or producer ids than that peer charged the entity "
            "lately (a record written straight to the usage topic?): the excess was not given back.",
            labels=["quota"],
        )
        q = self._quotas
        refused.add_metric([CONTROLLER_MUTATION_RATE], q.mutations.peer_refunds.refused_records)
        by_sets = sum(s.producer_ids.peer_refunds.refused_records for _, s in q.quota_sets())
        refused.add_metric([PRODUCER_IDS_RATE], by_sets)
        return refused

    def _byte_rate_managers(self) -> Iterator[tuple[str, ClientQuotaManager, str]]:
        """producer_byte_rate and consumer_byte_rate of every quota set (each once, with its broker label), and the
        volume-scaled produce quota (``volume_usage``, recorded only while THROTTLE; one per proxy, broker label "")
        when volume usage is configured."""
        for broker, quota_set in self._quotas.quota_sets():
            yield PRODUCER_BYTE_RATE, quota_set.produce, broker
            yield CONSUMER_BYTE_RATE, quota_set.fetch, broker
        if self._quotas.volume is not None:
            yield "volume_usage", self._quotas.volume.produce, ""
