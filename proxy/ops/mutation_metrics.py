"""KIP-599's controller mutation metrics (``kafka_quota_proxy_controller_mutation_*``) Prometheus reads, from the
mutation quota's buckets when it scrapes: per entity, bounded to ``quota.metrics.max.entities`` entities (busiest
first) and ``__other__``."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from proxy.ops.metric_labels import tag_labels as tag_labels_of

if TYPE_CHECKING:
    from proxy.enforcement.proxy_quotas import ProxyQuotas


def mutation_families(quotas: ProxyQuotas, pause: Callable[[], None]) -> Iterator[Metric]:
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
    recorded = CounterMetricFamily(f"{name}s", "Partition mutations counted against the entity's quota.", labels=labels)
    buckets, other = quotas.mutations.top_buckets(quotas.max_metric_entities, pause=pause)
    for stats, left in buckets + ([(other, math.nan)] if other is not None else []):
        tag_labels = list(tag_labels_of(stats.tags))
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
