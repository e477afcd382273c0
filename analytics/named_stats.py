"""The usage log's counts for the quotas kept per proxy on names other than a client's: a topic's byte rates
(``topic_bytes``), a consumer group's requests (``group_requests``), and a client entity's requests of the APIs
``request_rate`` counts (``requests`` of those APIs' records). Spark.

These quotas are each proxy's under either ``quota.scope`` (a topic quota and both request rates are kept per
proxy, shared by its workers, not between sidecars), so a figure is the busiest proxy's in each interval, as the
connection rates are (:mod:`analytics.scope`); its rates are on the quota's own clock, over the last ``k`` intervals
as :func:`analytics.stats.on_quota_window` takes the byte rates.

One table, ``named_stats``: one row per ``(user, client_id, topic, partition, group, key)``, the parts the entity does
not have null (a client entity: user and client id; a topic; a partition: its topic and its index or ``<default>``,
from ``partition_bytes``; a group), ``key`` the quota recommended for it (``producer_byte_rate`` and
``consumer_byte_rate`` of a topic or a partition, ``request_rate`` of a client or a group), with
``intervals``, ``total`` (bytes or requests), ``rate_p50/p95/p99/max`` (per second, on the quota's window) and
``burst_max`` (the most in one interval, per second). A proxy labels topics and groups as its metrics do: by name
where an entry of their own sets the quota, every other one under ``<default>`` together; a partition by its index
where an entry of its own names it, every other partition its topic's ``partition: <default>`` entry covers under
``<default>`` together (``orders/<default>``).

What a hold hid (:func:`named_demand`): a client held while sending the requests ``request_rate`` counts, and a
topic whose producers or consumers were held while writing or reading it, have ``held_intervals`` (the intervals
in which it was held) and ``demand``, the demand the holds hid (:mod:`analytics.summed_demand`): a client's from its
own requests (``d`` in requests/s), a topic's (a partition's) from its members' parts of its bytes (each held member's bytes of the
topic at its pace while free, the others' as sent), the busiest proxy's; none for a consumer group (the log keeps
a hold on the member's record, not on the group's).
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from analytics.recommend import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE
from analytics.stats import _percentiles
from analytics.summed_demand import summed_demand
from quota.primitives.entity import REQUEST_RATE

KEYS = ["user", "client_id", "topic", "partition", "group", "key"]


def _partitions(bytes_of: Column) -> list[Column]:
    """``topic`` and ``partition`` from an exploded ``partition_bytes`` label (``orders/3``, ``orders/<default>``;
    a topic name has no ``/``)."""
    return [F.regexp_extract(bytes_of, r"^(.*)/([^/]*)$", i).alias(n) for i, n in ((1, "topic"), (2, "partition"))]


def named_intervals(usage: DataFrame, apis: Sequence[str]) -> DataFrame:
    """One row per (entity, key, time): ``total`` (summed over every proxy), ``rate`` (the busiest proxy's, per
    second) and ``interval_s``. ``usage`` is on the grid (:func:`analytics.stats.on_grid`); ``apis``: the API names
    ``request_rate`` counts (``quota.request.rate.apis``)."""
    none = F.lit(None).cast("string")
    where = ["time", "interval_s", "proxy"]
    clients = usage.where(
        F.col("api").isin(list(apis)) & (F.col("user").isNotNull() | F.col("client_id").isNotNull())
    ).select(
        *where,
        "user",
        "client_id",
        none.alias("topic"),
        none.alias("partition"),
        none.alias("group"),
        F.lit(REQUEST_RATE).alias("key"),
        F.col("requests").alias("count"),
    )
    side = F.when(F.col("api") == "Produce", F.lit(PRODUCER_BYTE_RATE)).otherwise(F.lit(CONSUMER_BYTE_RATE))
    topics = (
        usage.where(F.col("topic_bytes").isNotNull())
        .select(*where, side.alias("key"), F.explode("topic_bytes").alias("topic", "count"))
        .select(*where, none.alias("user"), none.alias("client_id"), "topic", none.alias("partition"), "key", "count")
        .withColumn("group", none)
    )
    partitions = (
        usage.where(F.col("partition_bytes").isNotNull())
        .select(*where, side.alias("key"), F.explode("partition_bytes").alias("label", "count"))
        .select(*where, none.alias("user"), none.alias("client_id"), *_partitions(F.col("label")), "key", "count")
        .withColumn("group", none)
    )
    groups = (
        usage.where(F.col("group_requests").isNotNull())
        .select(*where, F.explode("group_requests").alias("group", "count"))
        .select(
            *where,
            none.alias("user"),
            none.alias("client_id"),
            none.alias("topic"),
            none.alias("partition"),
            "group",
            F.lit(REQUEST_RATE).alias("key"),
            "count",
        )
    )
    per_proxy = (
        clients.unionByName(topics)
        .unionByName(partitions)
        .unionByName(groups)
        .groupBy(*KEYS, "time", "proxy")
        .agg(F.sum("count").alias("count"), F.max("interval_s").alias("interval_s"))
    )
    return per_proxy.groupBy(*KEYS, "time").agg(
        F.sum("count").alias("total"),
        F.max(F.col("count") / F.col("interval_s")).alias("rate"),
        F.max("interval_s").alias("interval_s"),
    )


def named_stats(intervals: DataFrame, k: int = 1, interval_s: float = 0.0) -> DataFrame:
    """Per (entity, key): the rate's percentiles on the quota's window (``k`` intervals of ``interval_s``, the
    intervals without a record counted as nothing), and its most in one interval (``burst_max``)."""
    rate_w = F.col("rate")
    if k > 1:
        w = (
            Window.partitionBy(*KEYS)
            .orderBy(F.round(F.col("time") * 1000).cast("long"))
            .rangeBetween(-round((k - 1) * interval_s * 1000), 0)
        )
        rate_w = F.sum(F.col("rate") * F.col("interval_s")).over(w) / (k * interval_s)
    return (
        intervals.withColumn("rate_w", rate_w)
        .groupBy(*KEYS)
        .agg(
            F.count(F.lit(1)).alias("intervals"),
            F.sum("total").alias("total"),
            *_percentiles("rate_w", "rate"),
            F.max("rate").alias("burst_max"),
        )
    )


def held(apis: Sequence[str]) -> Column:
    """A record (as read, before the grid) held while sending requests ``request_rate`` counts (``apis``) or bytes
    of topic or partition quotas: :func:`named_demand` has something to estimate."""
    held_ms = F.coalesce(F.col("held_ms"), F.col("throttle_ms"))
    named = F.col("topic_bytes").isNotNull() | F.col("partition_bytes").isNotNull()
    return (held_ms > 0) & (named | F.col("api").isin(list(apis)))


def named_demand(usage: DataFrame, apis: Sequence[str]) -> DataFrame:
    """Per (entity, key) held in some interval: ``held_intervals`` and ``demand`` (null where no interval tells
    it), the busiest proxy's. ``usage`` is on the grid; ``apis`` as for :func:`named_intervals`."""
    none = F.lit(None).cast("string")
    where = ["time", "proxy", "user", "client_id"]
    held_parts = ["interval_s", "requests", "held_requests", "held_ms"]
    clients = usage.where(
        F.col("api").isin(list(apis)) & (F.col("user").isNotNull() | F.col("client_id").isNotNull())
    ).select(
        *where,
        none.alias("topic"),
        none.alias("partition"),
        F.lit(REQUEST_RATE).alias("key"),
        *held_parts,
        F.col("requests").alias("count"),
    )
    side = F.when(F.col("api") == "Produce", F.lit(PRODUCER_BYTE_RATE)).otherwise(F.lit(CONSUMER_BYTE_RATE))
    topics = usage.where(F.col("topic_bytes").isNotNull()).select(
        *where, side.alias("key"), *held_parts, F.explode("topic_bytes").alias("topic", "count")
    )
    partitions = (
        usage.where(F.col("partition_bytes").isNotNull())
        .select(*where, side.alias("key"), *held_parts, F.explode("partition_bytes").alias("label", "count"))
        .select(*where, "key", *held_parts, *_partitions(F.col("label")), "count")
    )
    member = ["user", "client_id"]
    owner = ["topic", "partition", "key", "proxy"]
    parts = (
        clients.unionByName(topics.withColumn("partition", none))
        .unionByName(partitions)
        .groupBy(*owner, *member, "time")
        .agg(
            *[F.sum(c).alias(c) for c in ("requests", "held_requests", "held_ms", "count")],
            F.max("interval_s").alias("interval_s"),
        )
        .withColumn("request_rate", F.col("count") / F.col("interval_s"))
        .withColumn("quota_rate", F.lit(None).cast("double"))
    )
    # a client's request rate: the client alone is the member (its own demand); a topic: its producers or consumers
    own = F.col("topic").isNull()
    parts = parts.withColumn("_owner_user", F.when(own, F.col("user"))).withColumn(
        "_owner_client", F.when(own, F.col("client_id"))
    )
    owners = ["_owner_user", "_owner_client", *owner]
    per_proxy = summed_demand(parts, owners, member, ("request",)).where(F.col("held_intervals") > 0)
    return (
        per_proxy.groupBy(*owners[:-1])
        .agg(F.max("held_intervals").alias("held_intervals"), F.max("request_demand").alias("demand"))
        .select(
            F.col("_owner_user").alias("user"),
            F.col("_owner_client").alias("client_id"),
            "topic",
            "partition",
            none.alias("group"),
            "key",
            "held_intervals",
            "demand",
        )
    )


def with_demand(stats: DataFrame, demand: DataFrame) -> DataFrame:
    """:func:`named_stats`' rows with :func:`named_demand`'s columns (null where the entity was never held)."""
    on = [stats[k].eqNullSafe(demand[k]) for k in KEYS]  # a client's topic and group are null, a topic's user ...
    held = F.broadcast(demand)  # a row per entity held: few
    return stats.join(held, on, "left").select(stats["*"], held["held_intervals"], held["demand"])
