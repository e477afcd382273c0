"""The topic quotas' metrics (``kafka_quota_proxy_topic_quota_*``) Prometheus reads, from the topic quota managers
when it scrapes, never on the request path.

Their ``topic`` label is bounded by the configuration, not by what clients name: a topic whose own entry sets the
quota has its series, and every topic under ``<default>`` is summed into one ``topic="<default>"`` series (its counters
added up; no rate, which would cost a measurement per topic). ``quota`` is ``producer_byte_rate`` or
``consumer_byte_rate``.

The partition quotas' (``kafka_quota_proxy_partition_quota_*``) are the same families labelled ``topic`` and
``partition`` too: a partition named by its own entry has its series, the partitions under a topic's ``partition:
<default>`` share one ``partition="<default>"`` series (so a tenant writing thousands of partitions adds none).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from quota.managers.topic_quota import PartitionQuotaManager
from quota.primitives.entity import DEFAULT
from quota.primitives.topic_quotas import PARTITION

if TYPE_CHECKING:
    from quota.managers.topic_quota import NamedRateManager, TopicQuotas

PREFIX = "kafka_quota_proxy_topic_quota"
PARTITION_PREFIX = "kafka_quota_proxy_partition_quota"


KINDS = (
    (PREFIX, "topic", ["quota", "topic"]),
    (PARTITION_PREFIX, "partition", ["quota", "topic", "partition"]),
)
"""Each kind of named byte-rate quota: its families' prefix, what they are of, and their labels."""


def topic_families(topics: TopicQuotas) -> Iterator[Metric]:
    """The topic quotas' families (``kafka_quota_proxy_topic_quota_*``, labelled ``quota`` and ``topic``) and, once
    a partition entry is configured, the partition quotas' (``kafka_quota_proxy_partition_quota_*``, labelled
    ``quota``, ``topic`` and ``partition``)."""
    for prefix, what, labels in KINDS:
        produce: NamedRateManager[Any] = topics.produce
        fetch: NamedRateManager[Any] = topics.fetch
        if what == PARTITION:
            produce, fetch = topics.partition_produce, topics.partition_fetch
            if not (produce.enabled or fetch.enabled or len(produce.keeper) or len(fetch.keeper)):
                continue
        rate = GaugeMetricFamily(
            f"{prefix}_byte_rate",
            f"Measured record bytes/s of the {what}, as its quota check measures it ({what}s with an entry of their "
            "own).",
            labels=labels,
        )
        limit = GaugeMetricFamily(
            f"{prefix}_limit", f"The {what}'s quota (bytes/s); for <default>, each such {what}'s own.", labels=labels
        )
        recorded = CounterMetricFamily(
            f"{prefix}_bytes", f"Record bytes counted against the {what}'s quota.", labels=labels
        )
        throttle_total = CounterMetricFamily(
            f"{prefix}_throttle_time_seconds",
            f"Throttle time (seconds) the {what}'s quota decided and applied (shadow throttles not included).",
            labels=labels,
        )
        throttle_max = GaugeMetricFamily(
            f"{prefix}_throttle_time_max_seconds",
            f"Longest throttle (seconds) the {what}'s quota applied within the last quota window span.",
            labels=labels,
        )
        throttled = CounterMetricFamily(
            f"{prefix}_throttled_requests",
            f"Requests (Produce) or responses (Fetch) the {what}'s quota throttled (shadow not included).",
            labels=labels,
        )
        shadow_total = CounterMetricFamily(
            f"{prefix}_shadow_throttle_time_seconds",
            f"Throttle time (seconds) a shadow {what} quota decided and did not apply.",
            labels=labels,
        )
        shadowed = CounterMetricFamily(
            f"{prefix}_shadow_throttled_requests",
            f"Requests or responses a shadow {what} quota would have throttled (not throttled).",
            labels=labels,
        )
        rejected = CounterMetricFamily(
            f"{prefix}_rejected_partitions",
            f"Produce partitions refused NOT_ENOUGH_REPLICAS by the {what}'s quota (on_exceed: reject), never "
            "forwarded.",
            labels=labels,
        )
        rejected_bytes = CounterMetricFamily(
            f"{prefix}_rejected_bytes",
            f"Record bytes of the Produce partitions the {what}'s quota refused (on_exceed: reject); nothing of them "
            "written.",
            labels=labels,
        )
        shadow_rejected = CounterMetricFamily(
            f"{prefix}_shadow_rejected_partitions",
            f"Produce partitions a shadow {what} quota with on_exceed: reject would have refused (all were written).",
            labels=labels,
        )
        _fill((rate, limit, recorded, throttle_total, throttle_max, throttled, shadow_total, shadowed), produce, fetch)
        _fill_rejected((rejected, rejected_bytes, shadow_rejected), produce)
        yield from (rate, limit, recorded, throttle_total, throttle_max, throttled, shadow_total, shadowed)
        yield from (rejected, rejected_bytes, shadow_rejected)


def _values(manager: NamedRateManager[Any], label: str) -> list[str]:
    """The label values of one of ``manager``'s labels: a topic's as it is, a partition's ``topic/N`` split."""
    return [manager.quota_key, *(label.split("/", 1) if isinstance(manager, PartitionQuotaManager) else [label])]


Family = GaugeMetricFamily | CounterMetricFamily


def _fill(families: tuple[Family, ...], produce: NamedRateManager[Any], fetch: NamedRateManager[Any]) -> None:
    rate, limit, recorded, throttle_total, throttle_max, throttled, shadow_total, shadowed = families
    for manager in (produce, fetch):
        for label, stats, quota in manager.grouped_stats():
            values = _values(manager, label)
            if values[-1] != DEFAULT:
                rate.add_metric(values, stats.rate)
            if not math.isinf(quota):
                limit.add_metric(values, quota)
            recorded.add_metric(values, stats.value_total)
            throttle_total.add_metric(values, stats.throttle_time_ms_total / 1000.0)
            throttle_max.add_metric(values, stats.throttle_time_ms_max / 1000.0)
            throttled.add_metric(values, stats.throttled_count)
            if stats.shadow_throttled_count or stats.shadow:
                shadow_total.add_metric(values, stats.shadow_throttle_time_ms_total / 1000.0)
                shadowed.add_metric(values, stats.shadow_throttled_count)


def _fill_rejected(families: tuple[Family, ...], produce: NamedRateManager[Any]) -> None:
    rejected, rejected_bytes, shadow_rejected = families
    for family, counts in ((rejected, produce.rejected), (shadow_rejected, produce.shadow_rejected)):
        for label, (partitions, nbytes) in dict(counts).items():
            family.add_metric(_values(produce, label), partitions)
            if family is rejected:
                rejected_bytes.add_metric(_values(produce, label), nbytes)
