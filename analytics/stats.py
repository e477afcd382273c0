"""The usage log as Spark DataFrames: reading it, per-interval totals, and per-entity / per-user / per-IP statistics.

Percentiles are **exact**: Spark SQL's ``percentile`` aggregate, which keeps every distinct value of the group and
interpolates linearly between the two closest ranks (as numpy's default): p99 of n values is the value at rank
``0.99 x (n - 1)``. Exact is affordable here because the log has one record per entity per interval, so a group holds
at most one value per interval (8,640 a day at 10 s).

A rate is measured per interval: the interval's total (summed over the entity's records of that interval, from
every listener, connection and worker) divided by its ``interval_s``. Percentiles are over the intervals in which the
entity appears in the log; intervals where it did nothing are not in the log and do not pull its percentiles down.

Records from several proxies (sidecars, workers) are put on one time grid before they are added up: each record goes
to the interval of the grid (its own ``interval_s`` rounded to two significant digits, aligned to the epoch) that
holds its midpoint, and adds ``count / max(grid length, interval_s)`` to that interval's rates. Where that needs the
quota scope (:mod:`analytics.scope`), the per-interval figures are the budget's: under ``broker`` the busiest
broker's (the max over the ``(proxy, broker)`` pairs of each one's total; the KIP-599 mutations and the connections
the busiest proxy's), under ``cluster`` the sum over every proxy (connections still per proxy: their limits are not
shared). Totals (requests, bytes, throttle time, mutations, new producer ids, connections) are always the sum.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from analytics.scope import BROKER, CLUSTER

COUNTS = ("requests", "request_bytes", "response_bytes", "throttle_ms", "shadow_throttle_ms", "partition_mutations",
          "new_producer_ids", "connections_opened")
# Where a record came from, and under which quota.scope (absent from logs written before the proxy recorded them:
# null, read as one proxy, no broker, scope broker)
SOURCE = ("proxy", "broker", "scope")
SCHEMA = StructType(
    [StructField("time", DoubleType()), StructField("interval_s", DoubleType())]
    + [StructField(name, StringType()) for name in ("listener", "ip", "user", "client_id", "api")]
    + [StructField(name, LongType()) for name in COUNTS]
    + [StructField("proxy", StringType()), StructField("broker", LongType()), StructField("scope", StringType())]
)
# per-record rates (count / the record's length on the grid), added up per interval of the grid
RATES = {"request_rate": "request_bytes", "response_rate": "response_bytes", "mutation_rate": "partition_mutations",
         "new_pid_rate": "new_producer_ids", "connection_rate": "connections_opened"}
TOTALS = COUNTS[:-1]  # an entity's totals per interval (connections are the IPs')
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
    grid_ms = F.expr("round(interval_s * 1000 / pow(10, floor(log10(interval_s * 1000)) - 1)) "
                     "* pow(10, floor(log10(interval_s * 1000)) - 1)")
    usage = usage.where(own > 0).withColumn("_grid_ms", grid_ms)
    per_s = F.greatest(F.col("_grid_ms") / 1000, own)
    for rate, count in RATES.items():
        usage = usage.withColumn(rate, F.col(count) / per_s)
    index = F.floor((F.col("time") - own / 2) * 1000 / F.col("_grid_ms"))
    return (usage.withColumn("time", F.round((index + 1) * F.col("_grid_ms") / 1000, 3))
            .withColumn("interval_s", F.col("_grid_ms") / 1000).drop("_grid_ms"))


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
    all_apis = (_entity_budgets(requests, ["user", "client_id", "time"], scope, ports)
                .withColumn("api", F.lit(ALL_APIS)).select(per_api.columns))
    return per_api.unionByName(all_apis)


def _entity_budgets(frame: DataFrame, keys: list[str], scope: str, ports: bool) -> DataFrame:
    if scope == CLUSTER:  # everything summed: one aggregation
        return frame.groupBy(*keys).agg(
            *_sum(*TOTALS, "request_rate", "response_rate", "new_pid_rate", "mutation_rate"),
            F.sum("partition_mutations").alias("mutations"), F.sum("new_producer_ids").alias("new_pids"),
            F.max("interval_s").alias("interval_s"))
    if ports:  # a cluster-mode proxy's broker ports: each its own byte-rate budget, one mutation bucket between them
        per_broker = frame.groupBy(*keys, "proxy", "broker").agg(
            *_sum(*TOTALS, "request_rate", "response_rate", "mutation_rate", "new_pid_rate"),
            F.max("interval_s").alias("interval_s"))
        per_proxy = per_broker.groupBy(*keys, "proxy").agg(
            *_sum(*TOTALS, "mutation_rate"), F.sum("partition_mutations").alias("mutations"),
            *[F.max(c).alias(c) for c in ("request_rate", "response_rate", "new_pid_rate")],
            F.max("new_producer_ids").alias("new_pids"), F.max("interval_s").alias("interval_s"))
    else:  # one broker per proxy
        per_proxy = frame.groupBy(*keys, "proxy").agg(
            *_sum(*TOTALS, "request_rate", "response_rate", "mutation_rate", "new_pid_rate"),
            F.sum("partition_mutations").alias("mutations"), F.sum("new_producer_ids").alias("new_pids"),
            F.max("interval_s").alias("interval_s"))
    return per_proxy.groupBy(*keys).agg(
        *_sum(*TOTALS),
        *[F.max(c).alias(c) for c in ("request_rate", "response_rate", "new_pid_rate", "mutation_rate", "mutations",
                                      "new_pids")],
        F.max("interval_s").alias("interval_s"))


def ip_intervals(usage: DataFrame, by_proxy: bool = True) -> DataFrame:
    """One row per (ip, time) with connections opened: ``connections_opened`` in all, and the busiest proxy's
    ``connections`` and ``connection_rate`` (connection limits are per proxy under either scope; ``by_proxy`` False
    when the log is one proxy's: one aggregation)."""
    conns = usage.where(F.col("ip").isNotNull() & (F.col("connections_opened") > 0))
    if not by_proxy:
        return conns.groupBy("ip", "time").agg(
            *_sum("connections_opened", "connection_rate"), F.sum("connections_opened").alias("connections"),
            F.max("interval_s").alias("interval_s"))
    per_proxy = conns.groupBy("ip", "time", "proxy").agg(
        *_sum("connections_opened", "connection_rate"), F.max("interval_s").alias("interval_s"))
    return per_proxy.groupBy("ip", "time").agg(
        F.sum("connections_opened").alias("connections_opened"), F.max("connections_opened").alias("connections"),
        F.max("connection_rate").alias("connection_rate"), F.max("interval_s").alias("interval_s"))


def user_intervals(usage: DataFrame, scope: str = BROKER) -> DataFrame:
    """One row per (user, time) in which the user appears (with or without new producer ids), over all the user's
    client ids: producer_ids_rate is per user (KIP-936). ``new_producer_ids`` in all; the budget's ``new_pids`` and
    ``new_pid_rate`` (per (proxy, broker), combined by ``scope``)."""
    pids = usage.where(F.col("user").isNotNull())
    if scope == CLUSTER:  # everything summed: one aggregation
        return pids.groupBy("user", "time").agg(
            *_sum("new_producer_ids", "new_pid_rate"), F.sum("new_producer_ids").alias("new_pids"),
            F.max("interval_s").alias("interval_s"))
    per_broker = pids.groupBy("user", "time", "proxy", "broker").agg(
        *_sum("new_producer_ids", "new_pid_rate"), F.max("interval_s").alias("interval_s"))
    return per_broker.groupBy("user", "time").agg(
        F.sum("new_producer_ids").alias("new_producer_ids"), F.max("new_producer_ids").alias("new_pids"),
        F.max("new_pid_rate").alias("new_pid_rate"), F.max("interval_s").alias("interval_s"))


def _percentiles(col: str, name: str, with_max: bool = True) -> list[Column]:
    """Exact p50, p95, p99 (and max) of ``col`` as ``name_p50`` ...; see the module docstring."""
    arr = F.expr(f"percentile({col}, array({', '.join(str(p) for p in PERCENTILES)}))")
    cols = [arr[i].alias(f"{name}_p{round(p * 100)}") for i, p in enumerate(PERCENTILES)]
    return cols + ([F.max(col).alias(f"{name}_max")] if with_max else [])


def _interval_bursts(col: str, name: str) -> list[Column]:
    return [F.max(col).alias(f"{name}_max_interval"),
            F.expr(f"percentile({col}, 0.99)").alias(f"{name}_p99_interval")]


def entity_stats(intervals: DataFrame) -> DataFrame:
    """Per (user, client_id, api): byte-rate percentiles, throttle shares, partition-mutation and new-PID rates."""
    interval_ms = F.sum(F.col("interval_s") * 1000)
    return intervals.groupBy("user", "client_id", "api").agg(
        F.count(F.lit(1)).alias("intervals"),
        F.sum("requests").alias("requests"),
        F.sum("request_bytes").alias("request_bytes"),
        F.sum("response_bytes").alias("response_bytes"),
        *_percentiles("request_rate", "request_rate"),
        *_percentiles("response_rate", "response_rate"),
        # Throttle time per unit of log time, summed over the entity's connections (so it may pass 1).
        (F.sum("throttle_ms") / interval_ms).alias("throttle_share"),
        (F.sum("shadow_throttle_ms") / interval_ms).alias("shadow_throttle_share"),
        F.sum("partition_mutations").alias("partition_mutations"),
        F.expr("percentile(mutation_rate, 0.99)").alias("mutation_rate_p99"),
        F.max("mutation_rate").alias("mutation_rate_max"),
        *_interval_bursts("mutations", "mutations"),
        F.sum("new_producer_ids").alias("new_producer_ids"),
        F.expr("percentile(new_pid_rate, 0.99)").alias("new_pid_rate_p99"),
        F.max("new_pid_rate").alias("new_pid_rate_max"),
        *_interval_bursts("new_pids", "new_pids"),
    )


def user_stats(users: DataFrame) -> DataFrame:
    """Per user: new producer ids per second (p50/p95/p99/max) and per interval (max, p99)."""
    return users.groupBy("user").agg(
        F.count(F.lit(1)).alias("intervals"), F.sum("new_producer_ids").alias("new_producer_ids"),
        *_percentiles("new_pid_rate", "new_pid_rate"), *_interval_bursts("new_pids", "new_pids"))


def ip_stats(ips: DataFrame) -> DataFrame:
    """Per IP: connections opened per second (p50/p95/p99/max) and per interval (max, p99)."""
    return ips.groupBy("ip").agg(
        F.count(F.lit(1)).alias("intervals"), F.sum("connections_opened").alias("connections"),
        *_percentiles("connection_rate", "connection_rate"), *_interval_bursts("connections", "connections"))


def sources(usage: DataFrame) -> list[dict]:
    """Where the log's records came from: one row per (scope, proxy, broker) with its record count (small: one per
    proxy and broker port)."""
    return [r.asDict() for r in usage.groupBy(*SOURCE).agg(F.count(F.lit(1)).alias("records")).collect()]
