"""The metrics of a proxy's membership of the usage topic (``cluster_usage_*``, ``quota.scope: cluster``): what
:class:`~proxy.observers.cluster_usage.ClusterUsage` and its follower count, made once per registry."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

from proxy.ops.metrics import PREFIX

DIRECTIONS = ("sent", "expired", "received", "skipped", "duplicate", "future", "error")


class ClusterUsageMetrics:
    __slots__ = ("records", "peers", "carried", "record_bytes", "fallback", "topics_shared")

    def __init__(self, registry) -> None:
        self.records = Counter(
            f"{PREFIX}_cluster_usage_records",
            "Usage records this sidecar published "
            "(direction=sent), dropped unsent after quota.cluster.stale.ms (expired), recorded "
            "from its peers (received), skipped as stale or its own (skipped), as applied already "
            "(duplicate) or as dated more than 30 s ahead (future), or could not publish or read "
            "(error).",
            ["direction"],
            registry=registry,
        )
        for direction in DIRECTIONS:
            self.records.labels(direction)  # at 0 from the start: increase() sees the first of each
        self.peers = Gauge(
            f"{PREFIX}_cluster_usage_peers",
            "Other sidecars on the usage topic: known "
            "(heard from within quota.cluster.forget.ms of the topic's newest record) and fresh "
            "(last record at most quota.cluster.stale.ms old).",
            ["state"],
            registry=registry,
        )
        self.carried = Counter(
            f"{PREFIX}_cluster_usage_carried_entities",
            "Entities left out of a usage record "
            "because it would have been longer than quota.cluster.record.max.bytes: their usage "
            "waits for the next sync (counted once per sync they wait).",
            registry=registry,
        )
        self.record_bytes = Gauge(
            f"{PREFIX}_cluster_usage_record_bytes",
            "The size of this proxy's last usage record (compressed), and the entities in it.",
            ["what"],
            registry=registry,
        )
        self.fallback = Gauge(
            f"{PREFIX}_cluster_usage_fallback",
            "1 while no peer sidecar is fresh and this "
            "one keeps to its per-broker share (quota / live sidecars), else 0.",
            registry=registry,
        )
        self.topics_shared = Gauge(
            f"{PREFIX}_cluster_usage_topic_quotas_shared",
            "1 while this sidecar's usage records carry its topic quotas' usage (every live peer reads it), else 0: "
            "the topic quotas are then kept per sidecar.",
            registry=registry,
        )
