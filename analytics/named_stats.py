"""The usage log's counts for the quotas kept per proxy on names other than a client's: a topic's byte rates
(``topic_bytes``), a consumer group's requests (``group_requests``), and a client entity's requests of the APIs
``request_rate`` counts (``requests`` of those APIs' records). Spark.

These quotas are each proxy's under either ``quota.scope`` (a topic quota and both request rates are kept per
proxy, shared by its workers, not between sidecars), so a figure is the busiest proxy's in each interval, as the
connection rates are (:mod:`analytics.scope`); its rates are on the quota's own clock, over the last ``k`` intervals
as :func:`analytics.stats.on_quota_window` takes the byte rates.

One table, ``named_stats``: one row per ``(user, client_id, topic, group, key)``, the parts the entity does not have
null (a client entity: user and client id; a topic; a group), ``key`` the quota recommended for it
(``producer_byte_rate`` and ``consumer_byte_rate`` of a topic, ``request_rate`` of a client or a group), with
``intervals``, ``total`` (bytes or requests), ``rate_p50/p95/p99/max`` (per second, on the quota's window) and
``burst_max`` (the most in one interval, per second). A proxy labels topics and groups as its metrics do: by name
where an entry of their own sets the quota, every other one under ``<default>`` together.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from analytics.recommend import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE
from analytics.stats import _percentiles
from quota.primitives.entity import REQUEST_RATE

KEYS = ["user", "client_id", "topic", "group", "key"]


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
        none.alias("group"),
        F.lit(REQUEST_RATE).alias("key"),
        F.col("requests").alias("count"),
    )
    side = F.when(F.col("api") == "Produce", F.lit(PRODUCER_BYTE_RATE)).otherwise(F.lit(CONSUMER_BYTE_RATE))
    topics = (
        usage.where(F.col("topic_bytes").isNotNull())
        .select(*where, side.alias("key"), F.explode("topic_bytes").alias("topic", "count"))
        .select(*where, none.alias("user"), none.alias("client_id"), "topic", none.alias("group"), "key", "count")
    )
    groups = (
        usage.where(F.col("group_requests").isNotNull())
        .select(*where, F.explode("group_requests").alias("group", "count"))
        .select(
            *where,
            none.alias("user"),
            none.alias("client_id"),
            none.alias("topic"),
            "group",
            F.lit(REQUEST_RATE).alias("key"),
            "count",
        )
    )
    per_proxy = (
        clients.unionByName(topics)
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
