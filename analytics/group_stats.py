"""The quota groups' statistics: their members' records added up, and their summed demand. Spark.

``group_stats``: rows of the group's records added up per interval as a tenant's are (``user`` the group's name,
``client_id`` null), in the columns of the tables the same key of a tenant is recommended from:

- ``api`` Produce and Fetch (``entity_stats``' columns): the byte rates by the scope
  (:func:`analytics.stats.entity_intervals`), what held them, and ``request_demand``/``response_demand`` the members'
  summed demand (:mod:`analytics.summed_demand`);
- ``api`` ``*``: the token buckets' figures over all its APIs (:func:`analytics.stats.bucket_stats`): partition
  mutations (one KIP-599 bucket per proxy, summed under ``cluster``) and new producer ids (per broker, summed under
  ``cluster``), as a tenant's;
- ``api`` ``request_rate`` (``named_stats``' columns, ``key`` request_rate): the requests ``request_rate`` counts,
  the busiest proxy's under either scope (each proxy counts them), and ``demand``, the members' summed demand in
  requests/s where a hold hid it.

``tenant_groups``: the group of each tenant, its latest record's.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from analytics import named_stats, stats
from analytics.groups import GROUP_KEYS
from analytics.summed_demand import summed_demand
from quota.primitives.entity import REQUEST_RATE

TENANT = ["user", "client_id"]


Tenant = tuple[str | None, str | None, str | None]  # (user, client_id, quota group)


def tenant_groups(grid: DataFrame) -> list[Tenant]:
    """``(user, client_id, quota group)`` of every tenant that sent requests: the group its latest record names."""
    requests = grid.where(F.col("api").isNotNull())
    found = requests.groupBy(*TENANT).agg(F.max_by("quota_group", "time").alias("quota_group")).collect()
    return [(r["user"], r["client_id"], r["quota_group"]) for r in found]


def _rates(intervals: DataFrame) -> DataFrame:
    """The columns of :func:`analytics.stats.entity_stats` a group's byte rates rest on: the rates' percentiles on
    the quota's window, what held its members, and the quota in force (one aggregation: the groups' are few)."""
    interval_ms = F.sum(F.col("interval_s") * 1000)
    return intervals.groupBy(*TENANT, "api").agg(
        F.count(F.lit(1)).alias("intervals"),
        *[F.sum(c).alias(c) for c in ("requests", "request_bytes", "response_bytes")],
        *stats._percentiles("request_rate_w", "request_rate"),
        *stats._percentiles("response_rate_w", "response_rate"),
        (F.sum(F.least(F.col("held_ms"), F.col("interval_s") * 1000)) / interval_ms).alias("held_share"),
        F.count(F.when(F.col("held_ms") > 0, 1)).alias("held_intervals"),
        (F.sum("throttle_ms") / 1000).alias("throttle_seconds"),
        F.max("quota_rate").alias("quota_rate"),
    )


def group_stats(
    grid: DataFrame,
    entity_frame: DataFrame,
    tenants: Sequence[Tenant],
    scope: str,
    ports: bool,
    k: int = 1,
    interval_s: float = 0.0,
    apis: Sequence[str] = (),
) -> DataFrame:
    """Per quota group, its byte rates (Produce, Fetch: :func:`_rates`, its demand the members' summed demand), its
    token buckets (``*``) and its request rate (``request_rate``, the requests of ``apis``). ``grid``: the records on
    the grid; ``entity_frame``: the tenants' intervals (:func:`analytics.stats.entity_intervals`); ``tenants``:
    :func:`tenant_groups`."""
    byte_apis = list(GROUP_KEYS)
    grouped = grid.where(F.col("quota_group").isNotNull() & F.col("api").isNotNull())
    as_tenant = grouped.withColumn("user", F.col("quota_group")).withColumn("client_id", F.lit(None).cast("string"))
    records = as_tenant.where(F.col("api").isin(byte_apis))
    intervals = stats._entity_budgets(records, [*TENANT, "api", "time"], scope, ports)  # its APIs' own: no "*"
    summed = _rates(stats.on_quota_window(intervals, k, interval_s))
    schema = "user string, client_id string, quota_group string"
    groups = grid.sparkSession.createDataFrame([t for t in tenants if t[2] is not None], schema)
    members = entity_frame.where(F.col("api").isin(byte_apis)).join(F.broadcast(groups), TENANT)
    demand = summed_demand(members, ["quota_group", "api"], TENANT, ("request", "response")).drop("held_intervals")
    byte_rates = summed.join(demand.withColumnRenamed("quota_group", "user"), ["user", "api"], "left")
    every_api = stats._entity_budgets(as_tenant, [*TENANT, "time"], scope, ports)
    buckets = every_api.groupBy(*TENANT).agg(F.count(F.lit(1)).alias("intervals"), *stats.bucket_stats())
    out = byte_rates.unionByName(buckets.withColumn("api", F.lit(stats.ALL_APIS)), allowMissingColumns=True)
    if apis:
        counted = grouped.where(F.col("api").isin(list(apis)))
        out = out.unionByName(_request_rates(counted, k, interval_s), allowMissingColumns=True)
    return out


def _request_rates(counted: DataFrame, k: int, interval_s: float) -> DataFrame:
    """The groups' ``request_rate`` rows from their members' ``counted`` records: added up per proxy and interval,
    the busiest proxy's (:func:`analytics.named_stats.named_stats`' columns), and ``demand``, the members' summed
    demand where a hold hid it (each proxy's, the busiest)."""
    none = F.lit(None).cast("string")
    per_proxy = counted.groupBy("quota_group", "time", "proxy").agg(
        F.sum("requests").alias("count"), F.max("interval_s").alias("interval_s")
    )
    intervals = per_proxy.groupBy("quota_group", "time").agg(
        F.sum("count").alias("total"),
        F.max(F.col("count") / F.col("interval_s")).alias("rate"),
        F.max("interval_s").alias("interval_s"),
    )
    named = intervals.select(
        F.col("quota_group").alias("user"),
        *[none.alias(c) for c in ("client_id", "topic", "partition", "group")],
        F.lit(REQUEST_RATE).alias("key"),
        "time",
        "total",
        "rate",
        "interval_s",
    )
    rates = named_stats.named_stats(named, k, interval_s)
    parts = (
        counted.groupBy("quota_group", "proxy", *TENANT, "time")
        .agg(
            *[F.sum(c).alias(c) for c in ("requests", "held_requests", "held_ms")],
            F.max("interval_s").alias("interval_s"),
        )
        .withColumn("request_rate", F.col("requests") / F.col("interval_s"))
        .withColumn("quota_rate", F.lit(None).cast("double"))
    )
    held = summed_demand(parts, ["quota_group", "proxy"], TENANT, ("request",)).where(F.col("held_intervals") > 0)
    demand = held.groupBy(F.col("quota_group").alias("user")).agg(
        F.max("held_intervals").alias("held_intervals"), F.max("request_demand").alias("demand")
    )
    return rates.join(demand, "user", "left").withColumn("api", F.lit(REQUEST_RATE))
