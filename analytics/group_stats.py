"""The quota groups' statistics: their members' records added up, and their summed demand. Spark.

``group_stats``: one row per ``(quota group, api)`` for Produce and Fetch, in columns of ``entity_stats`` (``user``
the group's name, ``client_id`` null): the rates of the group's records added up per interval as a tenant's are, by
the scope (:func:`analytics.stats.entity_intervals`), what held them, and ``request_demand``/``response_demand`` the members' summed
demand (:mod:`analytics.summed_demand`). ``tenant_groups``: the group of each tenant, its latest record's.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from analytics import stats
from analytics.groups import GROUP_KEYS
from analytics.summed_demand import summed_demand

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
) -> DataFrame:
    """Per (quota group, Produce/Fetch): the group's records added up per interval (:func:`_rates`), its demand the
    members' summed demand. ``grid``: the records on the grid; ``entity_frame``: the tenants' intervals
    (:func:`analytics.stats.entity_intervals`); ``tenants``: :func:`tenant_groups`."""
    apis = list(GROUP_KEYS)
    records = grid.where(F.col("quota_group").isNotNull() & F.col("api").isin(apis))
    as_tenant = records.withColumn("user", F.col("quota_group")).withColumn("client_id", F.lit(None).cast("string"))
    intervals = stats._entity_budgets(as_tenant, [*TENANT, "api", "time"], scope, ports)  # its APIs' own: no "*"
    summed = _rates(stats.on_quota_window(intervals, k, interval_s))
    schema = "user string, client_id string, quota_group string"
    groups = grid.sparkSession.createDataFrame([t for t in tenants if t[2] is not None], schema)
    members = entity_frame.where(F.col("api").isin(apis)).join(F.broadcast(groups), TENANT)
    demand = summed_demand(members, ["quota_group", "api"], TENANT, ("request", "response")).drop("held_intervals")
    return summed.join(demand.withColumnRenamed("quota_group", "user"), ["user", "api"], "left")
