"""The cluster volume-usage metrics (``kafka_quota_proxy_volume_*``) Prometheus reads, from the volume quota's
state when it scrapes: bounded whatever a snapshot lists (per-volume series for the volumes nearest their hard limit
only)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from proxy.ops.metric_labels import label
from quota.managers.volume import SKIP_REASONS

if TYPE_CHECKING:
    from proxy.enforcement.volume_throttle import VolumeThrottle


def volume_families(volume: VolumeThrottle) -> Iterator[Metric]:
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
    age = GaugeMetricFamily(f"{name}_snapshot_age_seconds", "Age of each broker's latest snapshot.", labels=["node_id"])
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
    refused = CounterMetricFamily(
        f"{name}_refused_writes",
        "Requests refused, wholly or in part, because a volume is at PAUSE, by API: Produce; OffsetCommit and "
        "TxnOffsetCommit carrying metadata; JoinGroup, SyncGroup and the group heartbeats (Consumer, Share, "
        "Streams) and share acknowledgements (ShareAcknowledge, ShareFetch) over paused_group_metadata_max_bytes; "
        "InitProducerId of a transactional id new to its coordinator; AddPartitionsToTxn and WriteTxnMarkers.",
        labels=["api"],
    )
    for api, n in sorted(volume.refused_writes.items()):
        refused.add_metric([api], n)
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
        refused,
    )
