"""The request-rate quotas' metrics Prometheus reads (``kafka_quota_proxy_request_rate_*``, per client entity and
per group), from :class:`~quota.managers.request_rate.RequestRateQuotas` when it scrapes, never on the request path.

Labels are bounded: the client families by ``quota.metrics.max.entities`` (the busiest entities by requests
counted, the rest summed under ``__other__``), the group family by the configuration (a group whose own entry sets
the quota has its series, every group under ``<default>`` is summed into ``group="<default>"``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from proxy.ops.metric_labels import label, tag_labels
from quota.primitives.sensor import EntityStats
from quota.primitives.top import no_pause

if TYPE_CHECKING:
    from quota.managers.request_rate import RequestRateQuotas

PREFIX = "kafka_quota_proxy_request_rate"


def request_rate_families(
    requests: RequestRateQuotas, max_entities: int, pause: Callable[[], None] = no_pause
) -> Iterator[Metric]:
    """One series per client entity (``group=""``) and per group (``user=""``, ``client_id=""``), as Kafka tags
    its quota metrics with "" for the parts an entity does not have."""
    labels = ["user", "client_id", "group"]
    rate = GaugeMetricFamily(
        f"{PREFIX}_rate", "Measured requests/s of the entity, as its request_rate check measures it.", labels=labels
    )
    limit = GaugeMetricFamily(f"{PREFIX}_limit", "The entity's request_rate quota (requests/s).", labels=labels)
    counted = CounterMetricFamily(
        f"{PREFIX}_requests", "Requests counted against the entity's request_rate quota.", labels=labels
    )
    throttle_total = CounterMetricFamily(
        f"{PREFIX}_throttle_time_seconds",
        "Throttle time (seconds) the entity's request_rate quota applied (shadow throttles not included).",
        labels=labels,
    )
    throttle_max = GaugeMetricFamily(
        f"{PREFIX}_throttle_time_max_seconds",
        "Longest throttle (seconds) the entity's request_rate quota applied within the last quota window span.",
        labels=labels,
    )
    throttled = CounterMetricFamily(
        f"{PREFIX}_throttled_requests", "Requests the entity's request_rate quota throttled.", labels=labels
    )
    shadow_total = CounterMetricFamily(
        f"{PREFIX}_shadow_throttle_time_seconds",
        "Throttle time (seconds) a shadow request_rate quota of the entity decided and did not apply.",
        labels=labels,
    )
    shadowed = CounterMetricFamily(
        f"{PREFIX}_shadow_throttled_requests",
        "Requests a shadow request_rate quota of the entity would have throttled (not throttled).",
        labels=labels,
    )

    def add(values: list[str], stats: EntityStats, quota: float) -> None:
        if not math.isnan(stats.rate):  # a sum of several has no rate
            rate.add_metric(values, stats.rate)
        if not math.isinf(quota):
            limit.add_metric(values, quota)
        counted.add_metric(values, stats.value_total)
        throttle_total.add_metric(values, stats.throttle_time_ms_total / 1000.0)
        throttle_max.add_metric(values, stats.throttle_time_ms_max / 1000.0)
        throttled.add_metric(values, stats.throttled_count)
        if stats.shadow_throttled_count or stats.shadow:  # series only where a shadow quota is or was
            shadow_total.add_metric(values, stats.shadow_throttle_time_ms_total / 1000.0)
            shadowed.add_metric(values, stats.shadow_throttled_count)

    top, other = requests.clients.top_stats(max_entities, pause=pause)
    for stats in top + ([other] if other is not None else []):
        add([*tag_labels(stats.tags), ""], stats, stats.limit)
    for group, stats, quota in requests.group_stats():
        add(["", "", label(group)], stats, quota)
    yield from (rate, limit, counted, throttle_total, throttle_max, throttled, shadow_total, shadowed)
