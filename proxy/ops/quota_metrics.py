"""The per-entity quota metrics and the connection-quota metrics Prometheus reads, collected from the quota managers
when it scrapes (in the scrape thread), never on the request path.

They follow Kafka's quota metrics (``byte-rate``, ``throttle-time`` avg/max, throttled responses). Label
cardinality is bounded: beyond ``quota.metrics.max.entities`` entities (busiest first), the rest are summed under
``__other__``; a client-chosen label value is cut at MAX_LABEL characters.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from proxy.ops.metrics import PREFIX as METRICS_PREFIX
from quota.managers.connection import ConnectionQuotas
from quota.managers.volume import SKIP_REASONS
from quota.primitives.entity import CONSUMER_BYTE_RATE, DEFAULT, PRODUCER_BYTE_RATE
from quota.primitives.top import OTHER

if TYPE_CHECKING:
    from quota.managers.client_quota import ClientQuotaManager


PREFIX = "kafka_quota_proxy_quota"
MAX_LABEL = 128  # characters of a client-chosen label value (client id, user) in /metrics
SCRAPE_PAUSE_S = 0.0002


def label(value: str) -> str:
    """A client-chosen name as a metric label: at most MAX_LABEL characters; a longer one is cut and made unique
    with a short hash of the whole (``<first 110 characters>...#<10 hex digits>``)."""
    if len(value) <= MAX_LABEL:
        return value
    import hashlib

    return f"{value[:110]}...#{hashlib.sha256(value.encode('utf-8', 'surrogateescape')).hexdigest()[:10]}"


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

    def __init__(self, quotas, pause=let_the_loop_run) -> None:  # quotas: proxy.quotas.managers.ByteRateQuotas
        self._quotas = quotas
        self._pause = pause
        self.series = None  # proxy.ops.entity_series.EntitySeries, when it serves the per-entity families at scale

    def describe(self) -> list:
        return []  # collected on demand; nothing to register up front

    def collect(self) -> Iterator:
        if self.series is None or self.series.inline:  # else the series give them, from their last build
            yield from self.entity_families()
        yield from self._shadow_and_volume()
        yield self._overflowed()
        yield self._issued()

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
                tag_labels = [key, label(stats.tags.user), label(stats.tags.client_id)]
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
        yield from self._mutation_metrics()
        yield from self._producer_id_metrics()

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
        for quota in list(self._quotas.shadow_throttles):  # a few keys, added by the loop while this may run
            count, ms = self._quotas.shadow_throttles[quota]
            shadow_count.add_metric([quota], count)
            shadow_seconds.add_metric([quota], ms / 1000.0)
        mode = GaugeMetricFamily(f"{PREFIX}_shadow_mode", "1 while the whole proxy is in shadow mode (quota.mode).")
        mode.add_metric([], 1.0 if self._quotas.shadow else 0.0)
        yield from (shadow_count, shadow_seconds, mode)
        if self._quotas.volume is not None:
            yield from self._volume_metrics(self._quotas.volume)

    def _overflowed(self) -> CounterMetricFamily:
        """Entities a full table evicted to make room for new ones (issue 44: byte-rate sensors, mutation buckets,
        per-IP connection rates), and records of producer-id users counted in the ``<overflow>`` user (issue 35)."""
        per_broker = self._quotas.per_broker
        overflowed = CounterMetricFamily(
            f"{PREFIX}_overflowed_records",
            "Entities evicted to make room for new ones (producer-id users: records "
            "counted in the <overflow> user) because quota.max.tracked.entities entities were held; above 0 the cap "
            "bites.",
            labels=["quota"] + (["node_id"] if per_broker else []),
        )
        for (key, broker), n in self._quotas.overflow_counts().items():
            overflowed.add_metric([key] + ([broker] if per_broker else []), n)
        return overflowed

    def _byte_rate_managers(self) -> Iterator[tuple[str, ClientQuotaManager, str]]:
        """producer_byte_rate and consumer_byte_rate of every quota set (each once, with its broker label), and the
        volume-scaled produce quota (``volume_usage``, recorded only while THROTTLE; one per proxy, broker label "")
        when volume usage is configured."""
        for broker, quota_set in self._quotas.quota_sets():
            yield PRODUCER_BYTE_RATE, quota_set.produce, broker
            yield CONSUMER_BYTE_RATE, quota_set.fetch, broker
        if self._quotas.volume is not None:
            yield "volume_usage", self._quotas.volume.produce, ""

    def _volume_metrics(self, volume) -> Iterator:
        """Cluster volume usage: state, factor, snapshot ages, fallback, aggregates over every fresh volume, and
        per-volume series for the ``metrics_top_volumes`` volumes nearest their hard limit only (bounded whatever
        a snapshot lists)."""
        name = "kafka_quota_proxy_volume"
        state = volume.state
        states = GaugeMetricFamily(
            f"{name}_state", "1 for the current produce state (OPEN, THROTTLE, PAUSE).", labels=["state"]
        )
        for s in ("OPEN", "THROTTLE", "PAUSE"):
            states.add_metric([s], 1.0 if state.state == s else 0.0)
        factor = GaugeMetricFamily(f"{name}_factor", "What produce byte quotas are scaled by (1 OPEN, 0 PAUSE).")
        factor.add_metric([], state.factor)
        missing = GaugeMetricFamily(
            f"{name}_missing_data",
            "1 for a live broker with no fresh snapshot (the missing_data_action applies because of it).",
            labels=["node_id"],
        )
        for broker in state.missing_data:
            missing.add_metric([str(broker)], 1.0)
        awaiting = GaugeMetricFamily(
            f"{name}_awaiting_data",
            "1 while no broker list and no snapshot has arrived yet "
            "(start-up: the missing_data_action applies to the whole cluster).",
        )
        awaiting.add_metric([], 1.0 if state.awaiting_data else 0.0)
        age = GaugeMetricFamily(
            f"{name}_snapshot_age_seconds", "Age of each broker's latest snapshot.", labels=["node_id"]
        )
        now_ms = volume.wall.now_ms()
        for broker, at_ms in state.snapshot_at_ms.items():
            age.add_metric([str(broker)], (now_ms - at_ms) / 1000.0)
        count = GaugeMetricFamily(f"{name}_volumes", "Volumes in the brokers' fresh snapshots.")
        count.add_metric([], state.volume_count)
        ratio = GaugeMetricFamily(
            f"{name}_max_usage_ratio", "Used / capacity of the fullest volume in the fresh snapshots (0 to 1)."
        )
        ratio.add_metric([], state.max_usage_ratio)
        breached = GaugeMetricFamily(
            f"{name}_breached_volumes",
            "Volumes of the fresh snapshots past their soft "
            "limit (those past the hard limit included) or their hard limit.",
            labels=["limit"],
        )
        breached.add_metric(["soft"], state.soft_breaches)
        breached.add_metric(["hard"], state.hard_breaches)
        labels = ["node_id", "volume"]
        nearest = "; only the volumes nearest their hard limit (volume_usage.metrics_top_volumes)."
        used = GaugeMetricFamily(
            f"{name}_used_bytes", "Bytes used on the volume (latest fresh snapshot)" + nearest, labels=labels
        )
        free = GaugeMetricFamily(
            f"{name}_free_bytes", "Bytes free on the volume (latest fresh snapshot)" + nearest, labels=labels
        )
        breach = GaugeMetricFamily(
            f"{name}_limit_breached",
            "1 when the volume is past its soft or hard limit" + nearest,
            labels=labels + ["limit"],
        )
        for r in state.nearest:
            tags = [str(r.broker_id), label(r.name)]
            used.add_metric(tags, r.consumed)
            free.add_metric(tags, r.capacity - r.consumed)
            for limit in ("soft", "hard"):
                breach.add_metric(
                    tags + [limit], 1.0 if r.breach == limit or (limit == "soft" and r.breach == "hard") else 0.0
                )
        bad = CounterMetricFamily(
            f"{name}_bad_records",
            "Volume-usage records not taken, by reason: too_large "
            "(past max_record_bytes, not decoded), too_many_volumes (past "
            "max_volumes_per_snapshot), invalid, not_verified; the broker's last good "
            "snapshot stays.",
            labels=["reason"],
        )
        for reason in SKIP_REASONS:
            bad.add_metric([reason], volume.skipped.get(reason, 0))
        evaluations = CounterMetricFamily(
            f"{name}_evaluations",
            "Times the cluster's volume state was evaluated "
            "(a snapshot taken, the live brokers changed, a snapshot went stale).",
        )
        evaluations.add_metric([], volume.evaluations)
        yield from (
            states,
            factor,
            missing,
            awaiting,
            age,
            count,
            ratio,
            breached,
            used,
            free,
            breach,
            bad,
            evaluations,
        )

    def _producer_id_metrics(self) -> Iterator:
        """KIP-936's ProducerIds metrics (rate, tokens, throttle-time) per user, and the cache's size."""
        name = "kafka_quota_proxy_producer_ids"
        per_broker = self._quotas.per_broker
        labels = ["user"] + (["node_id"] if per_broker else [])
        new = CounterMetricFamily(
            f"{name}_new",
            "New producer ids counted against the user's quota (their rate is the rate() of this counter).",
            labels=labels,
        )
        tokens = GaugeMetricFamily(
            f"{name}_tokens", "Tokens left in the user's bucket; below 0 it is throttled.", labels=labels
        )
        limit = GaugeMetricFamily(
            f"{name}_limit",
            "The producer_ids_rate that applies to the user now (new producer ids per window; no sample when none does).",
            labels=labels,
        )
        throttle_total = CounterMetricFamily(
            f"{name}_throttle_time_seconds",
            "Total throttle time (seconds) applied to the user (shadow throttles not included).",
            labels=labels,
        )
        throttled = CounterMetricFamily(
            f"{name}_throttled_requests",
            "Produce requests throttled for the user's producer ids (applied; shadow not included).",
            labels=labels,
        )
        shadow_total = CounterMetricFamily(
            f"{name}_shadow_throttle_time_seconds",
            "Throttle time (seconds) a shadow quota decided for the user and did not apply.",
            labels=labels,
        )
        shadowed = CounterMetricFamily(
            f"{name}_shadow_throttled_requests",
            "Produce requests a shadow quota would have throttled for the user (not throttled).",
            labels=labels,
        )
        cache = GaugeMetricFamily(
            f"{name}_cache_bytes", "Bytes of bloom filters the user's producer-id cache holds.", labels=labels
        )
        held = CounterMetricFamily(
            f"{name}_held_requests",
            "Produce requests held in the proxy, before the broker saw their new producer id, until the user's bucket let it through (producer.id.quota.enforcement hold).",
            labels=labels,
        )
        hold_total = CounterMetricFamily(
            f"{name}_hold_time_seconds",
            "Total time (seconds) Produce requests with a new producer id were held for the user.",
            labels=labels,
        )
        refused = CounterMetricFamily(
            f"{name}_refused_requests",
            "Produce requests answered by the proxy with the retriable NOT_ENOUGH_REPLICAS because their new producer id would have been held past producer.id.quota.max.hold.ms (also counted as throttled).",
            labels=labels,
        )
        abandoned = CounterMetricFamily(
            f"{name}_abandoned_holds",
            "Held new producer ids released because every Produce waiting for them was on a connection that closed before the hold ended: the id never reached the broker, is not remembered, and its token went back to the bucket.",
            labels=labels,
        )
        now_ms = self._quotas.clock.now_ms()
        stats = []
        for broker, quota_set in self._quotas.quota_sets():
            top, other = quota_set.producer_ids.top_stats(self._quotas.max_metric_entities, now_ms, self._pause)
            stats += [(s, broker) for s in top + ([other] if other is not None else [])]
        for s, broker in stats:
            user = [label(s.tags.user)] + ([broker] if per_broker else [])
            new.add_metric(user, s.new_pids_total)
            if not math.isinf(s.limit):  # no quota applies to the user any more: no limit, no bucket
                tokens.add_metric(user, s.tokens)
                limit.add_metric(user, s.limit)
            throttle_total.add_metric(user, s.throttle_time_ms_total / 1000.0)
            throttled.add_metric(user, s.throttled_count)
            if s.shadow_throttled_count:
                shadow_total.add_metric(user, s.shadow_throttle_time_ms_total / 1000.0)
                shadowed.add_metric(user, s.shadow_throttled_count)
            cache.add_metric(user, s.cache_bytes)
            held.add_metric(user, s.held_count)
            hold_total.add_metric(user, s.hold_time_ms_total / 1000.0)
            refused.add_metric(user, s.refused_count)
            abandoned.add_metric(user, s.abandoned_count)
        yield from (
            new,
            tokens,
            limit,
            throttle_total,
            throttled,
            shadow_total,
            shadowed,
            cache,
            held,
            hold_total,
            refused,
            abandoned,
        )

    def _issued(self):
        """producer_ids_issued: bounded by its own cap (``quota.metrics.max.entities`` keys), so always fresh."""
        per_broker = self._quotas.per_broker
        issued = CounterMetricFamily(
            "kafka_quota_proxy_producer_ids_issued",
            "Producer ids the broker issued (InitProducerId), by who asked; "
            "beyond the entity cap the least recent are summed under __other__.",
            labels=["user", "client_id", "ip"] + (["node_id"] if per_broker else []),
        )
        for broker, quota_set in self._quotas.quota_sets():
            tracker, where = quota_set.producer_ids.issued, [broker] if per_broker else []
            for (user, client_id, ip), count in tracker.counts().items():
                issued.add_metric([label(user), label(client_id), ip] + where, count)
            if tracker.other:
                issued.add_metric([OTHER, OTHER, OTHER] + where, tracker.other)
        return issued

    def _mutation_metrics(self) -> Iterator:
        """KIP-599's ControllerMutation metrics (rate, tokens, throttle-time) per quota entity."""
        labels = ["user", "client_id"]
        name = "kafka_quota_proxy_controller_mutation"
        rate = GaugeMetricFamily(
            f"{name}_rate", "Partition mutations per second of the entity (sampled rate).", labels=labels
        )
        tokens = GaugeMetricFamily(
            f"{name}_tokens", "Tokens left in the entity's bucket; below 0 the entity is throttled.", labels=labels
        )
        limit = GaugeMetricFamily(
            f"{name}_limit",
            "The controller_mutation_rate (mutations/s) that applies to the entity now (no sample when none does).",
            labels=labels,
        )
        throttle_total = CounterMetricFamily(
            f"{name}_throttle_time_seconds",
            "Total throttle time (seconds) the entity's responses carried, after the broker's answer settled the charge (shadow throttles not included).",
            labels=labels,
        )
        throttled = CounterMetricFamily(
            f"{name}_throttled_requests",
            "Requests whose response carried a throttle for the entity, as settled (applied; shadow not included).",
            labels=labels,
        )
        shadow_total = CounterMetricFamily(
            f"{name}_shadow_throttle_time_seconds",
            "Throttle time (seconds) a shadow quota decided for the entity and did not apply.",
            labels=labels,
        )
        shadowed = CounterMetricFamily(
            f"{name}_shadow_throttled_requests",
            "Requests a shadow quota would have throttled for the entity (nothing throttled or rejected).",
            labels=labels,
        )
        recorded = CounterMetricFamily(
            f"{name}s", "Partition mutations counted against the entity's quota.", labels=labels
        )
        buckets, other = self._quotas.mutations.top_buckets(self._quotas.max_metric_entities, pause=self._pause)
        for stats, left in buckets + ([(other, math.nan)] if other is not None else []):
            tag_labels = [label(stats.tags.user), label(stats.tags.client_id)]
            if not math.isnan(stats.rate):  # the summed __other__ has no rate
                rate.add_metric(tag_labels, stats.rate)
            if not math.isinf(stats.limit):  # no quota applies to these tags any more: no limit, no bucket
                tokens.add_metric(tag_labels, left)
                limit.add_metric(tag_labels, stats.limit)
            throttle_total.add_metric(tag_labels, stats.throttle_time_ms_total / 1000.0)
            throttled.add_metric(tag_labels, stats.throttled_count)
            if stats.shadow_throttled_count or stats.shadow:
                shadow_total.add_metric(tag_labels, stats.shadow_throttle_time_ms_total / 1000.0)
                shadowed.add_metric(tag_labels, stats.shadow_throttled_count)
            recorded.add_metric(tag_labels, stats.value_total)
        yield from (rate, tokens, limit, throttle_total, throttled, shadow_total, shadowed, recorded)


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
