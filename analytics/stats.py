"""The usage log as Spark DataFrames: reading it, per-interval totals, and per-entity / per-user / per-IP statistics.

Percentiles are **exact**: Spark SQL's ``percentile`` aggregate, which keeps every distinct value of the group and
interpolates linearly between the two closest ranks (as numpy's default): p99 of n values is the value at rank
``0.99 x (n - 1)``. Exact is affordable here because the log has one record per entity per interval, so a group holds
at most one value per interval (8,640 a day at 10 s).

A rate is measured per interval: the interval's total (summed over the entity's records of that interval, from
every listener, connection and worker) divided by its ``interval_s``. Percentiles are over the intervals in which the
entity appears in the log; intervals where it did nothing are not in the log and do not pull its percentiles down.
The byte rates a recommendation rests on are on the quota's own clock: over the last ``k`` intervals, ``k`` the
quota's sampled window (``quota.window.num x quota.window.size.seconds``, 11 s by default) in intervals, rounded
(at least 1), the missing intervals counted as nothing sent, as Kafka's rate counts empty samples; so a
stop-and-go tenant's rate is what it was let through, and its one-interval bursts are kept as ``*_burst_*``.

What a throttle held back: ``held_share`` is the share of wall time the entity was held (the usage log's
``held_ms``, a union of held spans, 0 to 1; records of several IPs or proxies in one interval are added and capped
at the interval), ``throttle_seconds`` the summed throttle time over every connection and request (it may pass the
wall time), and for a tenant held by a byte-rate quota its demand estimate (:mod:`analytics.demand`).

Records from several proxies (sidecars, workers) are put on one time grid before they are added up: each record goes
to the interval of the grid (its own ``interval_s`` rounded to two significant digits, aligned to the epoch) that
holds its midpoint, and adds ``count / max(grid length, interval_s)`` to that interval's rates. Where that needs the
quota scope (:mod:`analytics.scope`), the per-interval figures are the budget's: under ``broker`` the busiest
broker's (the max over the ``(proxy, broker)`` pairs of each one's total; the KIP-599 mutations and the connections
the busiest proxy's), under ``cluster`` the sum over every proxy (connections still per proxy: their limits are not
shared). Totals (requests, bytes, throttle time, mutations, new producer ids, connections) are always the sum.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, LongType, MapType, StringType, StructField, StructType

from analytics import demand
from analytics.scope import BROKER, CLUSTER
from analytics.usage_record import COUNTS

# What a throttle held back (absent from logs written before the proxy recorded them: held_ms is then read as
# min(throttle_ms, the interval), the rest as none)
HELD = ("held_ms", "throttles", "observed_rate_sum", "held_requests")
# Where a record came from, and under which quota.scope (absent from logs written before the proxy recorded them:
# null, read as one proxy, no broker, scope broker)
SOURCE = ("proxy", "broker", "scope")
SCHEMA = StructType(
    [StructField("time", DoubleType()), StructField("interval_s", DoubleType())]
    + [StructField(name, StringType()) for name in ("listener", "ip", "user", "client_id", "api")]
    + [StructField(name, LongType()) for name in COUNTS]
    + [StructField("held_ms", LongType()), StructField("throttles", LongType())]
    + [StructField("observed_rate_sum", DoubleType()), StructField("quota_rate", DoubleType())]
    + [StructField("proxy", StringType()), StructField("broker", LongType()), StructField("scope", StringType())]
    # by label, from proxies with topic quotas or group request rates (analytics.named_stats); null: none
    + [StructField(name, MapType(StringType(), LongType())) for name in ("topic_bytes", "group_requests")]
    # the quota group the entity is a member of (analytics.group_stats); null: none
    + [StructField("quota_group", StringType())]
    # by partition label, from proxies with partition quotas (read, not yet planned for); null: none
    + [StructField("partition_bytes", MapType(StringType(), LongType()))]
    # requests held, by the quota that held them (absent from older logs: the byte-rate throttles are read as them)
    + [StructField("held_by", MapType(StringType(), LongType()))]
)
# per-record rates (count / the record's length on the grid), added up per interval of the grid
RATES = {
    "request_rate": "request_bytes",
    "response_rate": "response_bytes",
    "mutation_rate": "partition_mutations",
    "new_pid_rate": "new_producer_ids",
    "connection_rate": "connections_opened",
}
TOTALS = COUNTS[:-1] + HELD  # an entity's totals per interval (connections are the IPs')
ALL_APIS = "*"  # the api of entity_stats rows that combine all of an entity's APIs
PERCENTILES = (0.5, 0.95, 0.99)
FILES = "*.jsonl{,.gz}"  # in a directory: the current file and rotated, gzipped ones


def read_usage(spark: SparkSession, path: str) -> DataFrame:
    """The usage log at ``path``: a directory of ``*.jsonl`` / ``*.jsonl.gz`` files, or one such file, on any Hadoop
    file system (local, hdfs://, s3a://, ...)."""
    return spark.read.schema(SCHEMA).option("pathGlobFilter", FILES).option("mode", "DROPMALFORMED").json(path)


def on_grid(usage: DataFrame) -> DataFrame:
    """The records on the time grid: ``time`` becomes the end of the grid interval holding the record's midpoint,
    ``interval_s`` that interval's length (the record's own, rounded to two significant digits), and each record
    gets its rates (:data:`RATES`): count / max(grid length, its own ``interval_s``)."""
    own = F.col("interval_s")
    grid_ms = F.expr(
        "round(interval_s * 1000 / pow(10, floor(log10(interval_s * 1000)) - 1)) "
        "* pow(10, floor(log10(interval_s * 1000)) - 1)"
    )
    usage = (
        usage.where(own > 0)
        .withColumn("_grid_ms", grid_ms)
        .withColumn("held_ms", F.coalesce("held_ms", F.least(F.col("throttle_ms").cast("double"), own * 1000)))
        .fillna(0, subset=["throttles", "observed_rate_sum"])
        .withColumn("held_requests", held_requests())
    )
    per_s = F.greatest(F.col("_grid_ms") / 1000, own)
    for rate, count in RATES.items():
        usage = usage.withColumn(rate, F.col(count) / per_s)
    index = F.floor((F.col("time") - own / 2) * 1000 / F.col("_grid_ms"))
    return (
        usage.withColumn("time", F.round((index + 1) * F.col("_grid_ms") / 1000, 3))
        .withColumn("interval_s", F.col("_grid_ms") / 1000)
        .drop("_grid_ms")
    )


def held_requests() -> Column:
    """``m`` of :mod:`analytics.demand`: the record's requests held by any quota (``held_by``'s sum), or in a log
    written before ``held_by``, its byte-rate throttles."""
    return F.coalesce(F.aggregate(F.map_values("held_by"), F.lit(0).cast("long"), lambda a, b: a + b), "throttles")


def _sum(*cols: str) -> list[Column]:
    return [F.sum(c).alias(c) for c in cols]


def entity_intervals(usage: DataFrame, scope: str = BROKER, ports: bool = True) -> DataFrame:
    """One row per (user, client_id, api, time), and per (user, client_id, time) with api ``*``: the totals of
    that interval (:data:`TOTALS`) and the budget's rates per second (``request_rate``, ``response_rate``,
    ``new_pid_rate`` per (proxy, broker); ``mutation_rate`` per proxy, as the KIP-599 bucket is one per proxy) and
    counts (``mutations``, ``new_pids``): the busiest budget's under ``broker``, the sum under ``cluster`` (also
    right, and one aggregation instead of three, for a log of one budget). ``ports`` False when no proxy in the log
    has several broker ports (sidecars): a proxy is then one broker, one aggregation fewer. ``usage`` is on the grid
    (:func:`on_grid`)."""
    requests = usage.where(F.col("api").isNotNull())
    per_api = _entity_budgets(requests, ["user", "client_id", "api", "time"], scope, ports)
    all_apis = (
        _entity_budgets(requests, ["user", "client_id", "time"], scope, ports)
        .withColumn("api", F.lit(ALL_APIS))
        .select(per_api.columns)
    )
    return per_api.unionByName(all_apis)


def _quota() -> Column:
    return F.max("quota_rate").alias("quota_rate")  # the byte-rate quota in force when a throttle was decided


def _entity_budgets(frame: DataFrame, keys: list[str], scope: str, ports: bool) -> DataFrame:
    if scope == CLUSTER:  # everything summed: one aggregation
        return frame.groupBy(*keys).agg(
            _quota(),
            *_sum(*TOTALS, "request_rate", "response_rate", "new_pid_rate", "mutation_rate"),
            F.sum("partition_mutations").alias("mutations"),
            F.sum("new_producer_ids").alias("new_pids"),
            F.max("interval_s").alias("interval_s"),
        )
    if ports:  # a cluster-mode proxy's broker ports: each its own byte-rate budget, one mutation bucket between them
        per_broker = frame.groupBy(*keys, "proxy", "broker").agg(
            _quota(),
            *_sum(*TOTALS, "request_rate", "response_rate", "mutation_rate", "new_pid_rate"),
            F.max("interval_s").alias("interval_s"),
        )
        per_proxy = per_broker.groupBy(*keys, "proxy").agg(
            _quota(),
            *_sum(*TOTALS, "mutation_rate"),
            F.sum("partition_mutations").alias("mutations"),
            *[F.max(c).alias(c) for c in ("request_rate", "response_rate", "new_pid_rate")],
            F.max("new_producer_ids").alias("new_pids"),
            F.max("interval_s").alias("interval_s"),
        )
    else:  # one broker per proxy
        per_proxy = frame.groupBy(*keys, "proxy").agg(
            _quota(),
            *_sum(*TOTALS, "request_rate", "response_rate", "mutation_rate", "new_pid_rate"),
            F.sum("partition_mutations").alias("mutations"),
            F.sum("new_producer_ids").alias("new_pids"),
            F.max("interval_s").alias("interval_s"),
        )
    return per_proxy.groupBy(*keys).agg(
        _quota(),
        *_sum(*TOTALS),
        *[
            F.max(c).alias(c)
            for c in ("request_rate", "response_rate", "new_pid_rate", "mutation_rate", "mutations", "new_pids")
        ],
        F.max("interval_s").alias("interval_s"),
    )


def ip_intervals(usage: DataFrame, by_proxy: bool = True) -> DataFrame:
    """One row per (ip, time) with connections opened: ``connections_opened`` in all, and the busiest proxy's
    ``connections`` and ``connection_rate`` (connection limits are per proxy under either scope; ``by_proxy`` False
    when the log is one proxy's: one aggregation)."""
    conns = usage.where(F.col("ip").isNotNull() & (F.col("connections_opened") > 0))
    if not by_proxy:
        return conns.groupBy("ip", "time").agg(
            *_sum("connections_opened", "connection_rate"),
            F.sum("connections_opened").alias("connections"),
            F.max("interval_s").alias("interval_s"),
        )
    per_proxy = conns.groupBy("ip", "time", "proxy").agg(
        *_sum("connections_opened", "connection_rate"), F.max("interval_s").alias("interval_s")
    )
    return per_proxy.groupBy("ip", "time").agg(
        F.sum("connections_opened").alias("connections_opened"),
        F.max("connections_opened").alias("connections"),
        F.max("connection_rate").alias("connection_rate"),
        F.max("interval_s").alias("interval_s"),
    )


def user_intervals(usage: DataFrame, scope: str = BROKER) -> DataFrame:
    """One row per (user, time) in which the user appears (with or without new producer ids), over all the user's
    client ids: producer_ids_rate is per user (KIP-936). ``new_producer_ids`` in all; the budget's ``new_pids`` and
    ``new_pid_rate`` (per (proxy, broker), combined by ``scope``)."""
    pids = usage.where(F.col("user").isNotNull())
    if scope == CLUSTER:  # everything summed: one aggregation
        return pids.groupBy("user", "time").agg(
            *_sum("new_producer_ids", "new_pid_rate"),
            F.sum("new_producer_ids").alias("new_pids"),
            F.max("interval_s").alias("interval_s"),
        )
    per_broker = pids.groupBy("user", "time", "proxy", "broker").agg(
        *_sum("new_producer_ids", "new_pid_rate"), F.max("interval_s").alias("interval_s")
    )
    return per_broker.groupBy("user", "time").agg(
        F.sum("new_producer_ids").alias("new_producer_ids"),
        F.max("new_producer_ids").alias("new_pids"),
        F.max("new_pid_rate").alias("new_pid_rate"),
        F.max("interval_s").alias("interval_s"),
    )


def _percentiles(col: str, name: str, with_max: bool = True) -> list[Column]:
    """Exact p50, p95, p99 (and max) of ``col`` as ``name_p50`` ...; see the module docstring."""
    arr = F.expr(f"percentile({col}, array({', '.join(str(p) for p in PERCENTILES)}))")
    cols = [arr[i].alias(f"{name}_p{round(p * 100)}") for i, p in enumerate(PERCENTILES)]
    return cols + ([F.max(col).alias(f"{name}_max")] if with_max else [])


def _interval_bursts(col: str, name: str) -> list[Column]:
    return [F.max(col).alias(f"{name}_max_interval"), F.expr(f"percentile({col}, 0.99)").alias(f"{name}_p99_interval")]


def window_intervals(quota_window_s: float, interval_s: float) -> int:
    """How many log intervals make the quota's sampled window (rounded, at least 1)."""
    return max(1, round(quota_window_s / interval_s)) if interval_s > 0 else 1


def on_quota_window(intervals: DataFrame, k: int, interval_s: float) -> DataFrame:
    """``request_rate_w``/``response_rate_w``: the byte rates over the last ``k`` intervals of ``interval_s`` (the
    quota's window on the log's grid), intervals without a record counted as nothing sent."""
    if k <= 1:
        return intervals.withColumn("request_rate_w", F.col("request_rate")).withColumn(
            "response_rate_w", F.col("response_rate")
        )
    span_ms = round((k - 1) * interval_s * 1000)
    w = (
        Window.partitionBy("user", "client_id", "api")
        .orderBy(F.round(F.col("time") * 1000).cast("long"))
        .rangeBetween(-span_ms, 0)
    )
    per_s = k * interval_s
    return intervals.withColumn(
        "request_rate_w", F.sum(F.col("request_rate") * F.col("interval_s")).over(w) / per_s
    ).withColumn("response_rate_w", F.sum(F.col("response_rate") * F.col("interval_s")).over(w) / per_s)


def _interval_demand(side: str) -> Column:
    """``d`` of :func:`analytics.demand.interval_demand` per interval (null where it does not tell, and right after
    an interval its tenant was held through, as :func:`analytics.demand.demand_rate` reads it)."""
    held_s = F.least(F.col("held_ms"), F.col("interval_s") * 1000) / 1000
    free_s = F.col("interval_s") - held_s
    held = F.col("held_requests")
    tells = (held_s > 0) & (free_s >= F.col("interval_s") * demand.MIN_FREE) & (F.col("requests") > held)
    tells = tells & ~F.coalesce(F.col("_after_hold"), F.lit(False))
    sent = F.col(f"{side}_rate") * F.col("interval_s")
    return F.when(tells, sent * (F.col("requests") - held) / F.col("requests") / free_s)


def _held_through() -> Column:
    """:func:`analytics.demand.held_through` of an interval."""
    held_s = F.least(F.col("held_ms"), F.col("interval_s") * 1000) / 1000
    return (F.col("interval_s") - held_s) < F.col("interval_s") * demand.MIN_FREE


def _demand(side: str) -> list[Column]:
    """The estimated demand of :func:`analytics.demand.demand_rate`: ``d`` pooled over the intervals that tell it
    and in which it was above the quota in force (over all that tell when none was)."""
    d, free = F.col(f"_d_{side}"), F.col("interval_s") - F.least(F.col("held_ms"), F.col("interval_s") * 1000) / 1000
    above = d > F.col("_quota")
    pooled_above = F.sum(F.when(above, d * free)) / F.sum(F.when(above, free))
    pooled = F.sum(F.when(d.isNotNull(), d * free)) / F.sum(F.when(d.isNotNull(), free))
    return [F.coalesce(pooled_above, pooled).alias(f"{side}_demand")]


def entity_stats(intervals: DataFrame, k: int = 1, interval_s: float = 0.0) -> DataFrame:
    """Per (user, client_id, api): byte-rate percentiles on the quota's window (``k`` intervals of ``interval_s``,
    :func:`on_quota_window`) and per interval (``*_burst_*``), what throttles held back (held share, throttle
    seconds, demand estimates), partition-mutation and new-PID rates."""
    interval_ms = F.sum(F.col("interval_s") * 1000)
    held_ms = F.least(F.col("held_ms"), F.col("interval_s") * 1000)
    tenant = Window.partitionBy("user", "client_id", "api")
    intervals = (
        on_quota_window(intervals, k, interval_s)
        .withColumn("_quota", F.max("quota_rate").over(tenant))
        .withColumn("_after_hold", F.lag(_held_through(), 1).over(tenant.orderBy("time")))
        .withColumn("_d_request", _interval_demand("request"))
        .withColumn("_d_response", _interval_demand("response"))
    )
    return intervals.groupBy("user", "client_id", "api").agg(
        F.count(F.lit(1)).alias("intervals"),
        F.sum("requests").alias("requests"),
        F.sum("request_bytes").alias("request_bytes"),
        F.sum("response_bytes").alias("response_bytes"),
        *_percentiles("request_rate_w", "request_rate"),
        *_percentiles("response_rate_w", "response_rate"),
        F.expr("percentile(request_rate, 0.99)").alias("request_burst_p99"),
        F.max("request_rate").alias("request_burst_max"),
        F.expr("percentile(response_rate, 0.99)").alias("response_burst_p99"),
        F.max("response_rate").alias("response_burst_max"),
        # The share of wall time the entity was held (0-1), beside the throttle time summed over its connections.
        (F.sum(held_ms) / interval_ms).alias("held_share"),
        F.count(F.when(F.col("held_ms") > 0, 1)).alias("held_intervals"),
        (F.sum("throttle_ms") / 1000).alias("throttle_seconds"),
        (F.sum("shadow_throttle_ms") / 1000).alias("shadow_throttle_seconds"),
        F.max("quota_rate").alias("quota_rate"),
        F.try_divide(F.sum("observed_rate_sum"), F.sum("throttles")).alias("observed_rate_mean"),
        *_demand("request"),
        *_demand("response"),
        *bucket_stats(),
    )


def bucket_stats() -> list[Column]:
    """The token-bucket keys' figures of an entity's intervals (:func:`entity_intervals`): partition mutations
    (KIP-599) and new producer ids (KIP-936), in all, per second (p99, max) and per interval (max, p99)."""
    return [
        F.sum("partition_mutations").alias("partition_mutations"),
        F.expr("percentile(mutation_rate, 0.99)").alias("mutation_rate_p99"),
        F.max("mutation_rate").alias("mutation_rate_max"),
        *_interval_bursts("mutations", "mutations"),
        F.sum("new_producer_ids").alias("new_producer_ids"),
        F.expr("percentile(new_pid_rate, 0.99)").alias("new_pid_rate_p99"),
        F.max("new_pid_rate").alias("new_pid_rate_max"),
        *_interval_bursts("new_pids", "new_pids"),
    ]


def user_stats(users: DataFrame) -> DataFrame:
    """Per user: new producer ids per second (p50/p95/p99/max) and per interval (max, p99)."""
    return users.groupBy("user").agg(
        F.count(F.lit(1)).alias("intervals"),
        F.sum("new_producer_ids").alias("new_producer_ids"),
        *_percentiles("new_pid_rate", "new_pid_rate"),
        *_interval_bursts("new_pids", "new_pids"),
    )


def ip_stats(ips: DataFrame) -> DataFrame:
    """Per IP: connections opened per second (p50/p95/p99/max) and per interval (max, p99)."""
    return ips.groupBy("ip").agg(
        F.count(F.lit(1)).alias("intervals"),
        F.sum("connections_opened").alias("connections"),
        *_percentiles("connection_rate", "connection_rate"),
        *_interval_bursts("connections", "connections"),
    )


def sources(usage: DataFrame) -> list[dict]:
    """Where the log's records came from: one row per (scope, proxy, broker) with its record count (small: one per
    proxy and broker port)."""
    return [r.asDict() for r in usage.groupBy(*SOURCE).agg(F.count(F.lit(1)).alias("records")).collect()]
