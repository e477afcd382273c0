"""Per interval of the log, what a quota table commits: the sum of the limits of the budgets active in it
(:mod:`analytics.capacity` says what is done with it). The limits are resolved in the driver, one per tenant (a
small table); Spark joins them to the per-interval frames and adds them up per interval. A budget is a tenant's
own, or a quota group's: the members a table resolves to their group (:mod:`analytics.group_table`) share one
limit, counted once in an interval however many of them are active in it, as the proxy's one sensor holds them."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, StringType, StructField, StructType

from analytics.capacity import DIMENSIONS, Interval
from analytics.group_table import group_of
from analytics.in_force import ip_limit, quota_table

ACTIVE = {"Produce": "request_rate", "Fetch": "response_rate", "*": "mutation_rate"}  # active: this rate above 0


def limits(
    items: Sequence[Mapping], tenants: Iterable[tuple[str | None, str | None, str]], ips: Iterable[str]
) -> tuple[list[tuple], list[tuple]]:
    """``(user, client_id, api, limit, quota group)`` for each tenant's activity (``api`` of :data:`ACTIVE`; the
    group whose budget the limit is, else None) and ``(ip, limit)`` for each IP: the limit ``items`` gives it (None:
    no quota of that key)."""
    table = quota_table(items)
    keys = {api: key for _, (api, key, _) in DIMENSIONS.items()}
    per_tenant = []
    for user, client_id, api in tenants:
        if api in ACTIVE:
            resolved = table.resolve(keys[api], user or "", client_id or "")
            limit = None if resolved.unlimited else resolved.limit
            per_tenant.append((user, client_id, api, limit, group_of(resolved)))
    per_ip = [(ip, ip_limit(items, ip)) for ip in ips]
    return per_tenant, [(ip, None if limit is None else float(limit)) for ip, limit in per_ip]  # a DoubleType column


def committed(
    spark: SparkSession, entity: DataFrame, ip: DataFrame, per_tenant: list[tuple], per_ip: list[tuple]
) -> dict[str, list[Interval]]:
    """Per capacity dimension, one :data:`analytics.capacity.Interval` per interval with activity."""
    tenant_schema = StructType(
        [StructField(c, StringType()) for c in ("user", "client_id", "api")]
        + [StructField("limit", DoubleType()), StructField("quota_group", StringType())]
    )
    tenants = spark.createDataFrame(per_tenant, tenant_schema)
    active = F.lit(False)
    for api, rate in ACTIVE.items():
        active = active | ((F.col("api") == api) & (F.col(rate) > 0))
    frame = entity.where(active).select("user", "client_id", "api", "time")
    on = [frame[c].eqNullSafe(tenants[c]) for c in ("user", "client_id", "api")]
    budget = F.coalesce("quota_group", F.to_json(F.struct(frame["user"], frame["client_id"])))
    joined = (
        frame.join(F.broadcast(tenants), on)
        .groupBy(frame["api"], "time", budget.alias("budget"))  # a group's members: its one limit, once
        .agg(F.first("limit").alias("limit"))
        .select("api", "time", "limit")
    )
    ips = spark.createDataFrame(
        per_ip, StructType([StructField("ip", StringType()), StructField("limit", DoubleType())])
    )
    by_ip = (
        ip.where(F.col("connection_rate") > 0)
        .join(F.broadcast(ips), "ip")
        .select(F.lit("ip").alias("api"), "time", "limit")
    )
    totals = (
        joined.unionByName(by_ip)
        .groupBy("api", "time")
        .agg(
            F.sum(F.coalesce("limit", F.lit(0.0))).alias("committed"),
            F.count(F.lit(1)).alias("active"),
            F.sum(F.col("limit").isNull().cast("int")).alias("unbounded"),
        )
        .collect()
    )
    names = {api: name for name, (api, _, _) in DIMENSIONS.items()}
    out: dict[str, list[Interval]] = {}
    for r in totals:
        out.setdefault(names[r["api"]], []).append((r["time"], r["committed"], r["active"], r["unbounded"]))
    return out


def every_entry(per_tenant: Iterable[tuple], per_ip: Iterable[tuple]) -> dict[str, float]:
    """Each budget's limit once (a tenant's, a quota group's), active together or not (math.inf where one has
    none): the naive sum."""
    names = {api: name for name, (api, _, _) in DIMENSIONS.items()}
    out: dict[str, float] = {}
    counted = set()
    for user, client_id, api, limit, group in per_tenant:
        budget = (api, group) if group is not None else (api, user, client_id, None)
        if budget in counted:
            continue
        counted.add(budget)
        out[names[api]] = out.get(names[api], 0.0) + (math.inf if limit is None else limit)
    for _, limit in per_ip:
        out["connections"] = out.get("connections", 0.0) + (math.inf if limit is None else limit)
    return out
