"""The topic quotas' metrics (``kafka_quota_proxy_topic_quota_*``) Prometheus reads, from the topic quota managers
when it scrapes, never on the request path.

Their ``topic`` label is bounded by the configuration, not by what clients name: a topic whose own entry sets the
quota has its series, and every topic under ``<default>`` is summed into one ``topic="<default>"`` series (its counters
added up; no rate, which would cost a measurement per topic). ``quota`` is ``producer_byte_rate`` or
``consumer_byte_rate``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from quota.primitives.entity import DEFAULT

if TYPE_CHECKING:
    from quota.managers.topic_quota import TopicQuotas

PREFIX = "kafka_quota_proxy_topic_quota"


def topic_families(topics: TopicQuotas) -> Iterator[Metric]:
    labels = ["quota", "topic"]
    rate = GaugeMetricFamily(
        f"{PREFIX}_byte_rate",
        "Measured record bytes/s of the topic, as its quota check measures it (topics with an entry of their own).",
        labels=labels,
    )
    limit = GaugeMetricFamily(
        f"{PREFIX}_limit", "The topic's quota (bytes/s); for <default>, each such topic's own.", labels=labels
    )
    recorded = CounterMetricFamily(f"{PREFIX}_bytes", "Record bytes counted against the topic's quota.", labels=labels)
    throttle_total = CounterMetricFamily(
        f"{PREFIX}_throttle_time_seconds",
        "Throttle time (seconds) the topic's quota decided and applied (shadow throttles not included).",
        labels=labels,
    )
    throttle_max = GaugeMetricFamily(
        f"{PREFIX}_throttle_time_max_seconds",
        "Longest throttle (seconds) the topic's quota applied within the last quota window span.",
        labels=labels,
    )
    throttled = CounterMetricFamily(
        f"{PREFIX}_throttled_requests",
        "Requests (Produce) or responses (Fetch) the topic's quota throttled (shadow not included).",
        labels=labels,
    )
    shadow_total = CounterMetricFamily(
        f"{PREFIX}_shadow_throttle_time_seconds",
        "Throttle time (seconds) a shadow topic quota decided and did not apply.",
        labels=labels,
    )
    shadowed = CounterMetricFamily(
        f"{PREFIX}_shadow_throttled_requests",
        "Requests or responses a shadow topic quota would have throttled (not throttled).",
        labels=labels,
    )
    rejected = CounterMetricFamily(
        f"{PREFIX}_rejected_partitions",
        "Produce partitions refused NOT_ENOUGH_REPLICAS by the topic's quota (on_exceed: reject), never forwarded.",
        labels=labels,
    )
    rejected_bytes = CounterMetricFamily(
        f"{PREFIX}_rejected_bytes",
        "Record bytes of the Produce partitions the topic's quota refused (on_exceed: reject); nothing of them written.",
        labels=labels,
    )
    shadow_rejected = CounterMetricFamily(
        f"{PREFIX}_shadow_rejected_partitions",
        "Produce partitions a shadow topic quota with on_exceed: reject would have refused (all were written).",
        labels=labels,
    )
    for family, counts in ((rejected, topics.produce.rejected), (shadow_rejected, topics.produce.shadow_rejected)):
        for topic, (partitions, nbytes) in dict(counts).items():
            family.add_metric([topics.produce.quota_key, topic], partitions)
            if family is rejected:
                rejected_bytes.add_metric([topics.produce.quota_key, topic], nbytes)
    for manager in (topics.produce, topics.fetch):
        for topic, stats, quota in manager.grouped_stats():
            values = [manager.quota_key, topic]
            if topic != DEFAULT:
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
    yield from (rate, limit, recorded, throttle_total, throttle_max, throttled, shadow_total, shadowed)
    yield from (rejected, rejected_bytes, shadow_rejected)
