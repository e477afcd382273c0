"""KIP-936's producer-id metrics (``kafka_quota_proxy_producer_ids_*``) Prometheus reads, from the quota sets'
producer-id managers when it scrapes: per user, bounded to ``quota.metrics.max.entities`` users (busiest first) and
``__other__``; and who asked the broker for producer ids."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from proxy.ops.metric_labels import label, tag_labels
from quota.primitives.top import OTHER

if TYPE_CHECKING:
    from proxy.enforcement.proxy_quotas import ProxyQuotas


def producer_id_families(quotas: ProxyQuotas, pause: Callable[[], None]) -> Iterator[Metric]:
    """KIP-936's ProducerIds metrics (rate, tokens, throttle-time) per user, and the cache's size."""
    name = "kafka_quota_proxy_producer_ids"
    per_broker = quotas.per_broker
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
    now_ms = quotas.clock.now_ms()
    stats = []
    for broker, quota_set in quotas.quota_sets():
        top, other = quota_set.producer_ids.top_stats(quotas.max_metric_entities, now_ms, pause)
        stats += [(s, broker) for s in top + ([other] if other is not None else [])]
    for s, broker in stats:
        user = [tag_labels(s.tags)[0]] + ([broker] if per_broker else [])
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


def issued_family(quotas: ProxyQuotas) -> CounterMetricFamily:
    """producer_ids_issued: bounded by its own cap (``quota.metrics.max.entities`` keys), so always fresh."""
    per_broker = quotas.per_broker
    issued = CounterMetricFamily(
        "kafka_quota_proxy_producer_ids_issued",
        "Producer ids the broker issued (InitProducerId), by who asked; "
        "beyond the entity cap the least recent are summed under __other__.",
        labels=["user", "client_id", "ip"] + (["node_id"] if per_broker else []),
    )
    for broker, quota_set in quotas.quota_sets():
        tracker, where = quota_set.producer_ids.issued, [broker] if per_broker else []
        for (user, client_id, ip), count in tracker.counts().items():
            issued.add_metric([label(user), label(client_id), ip] + where, count)
        if tracker.other:
            issued.add_metric([OTHER, OTHER, OTHER] + where, tracker.other)
    return issued
