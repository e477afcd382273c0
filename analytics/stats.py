"""The usage log as Spark DataFrames: reading it, per-interval totals, and per-entity / per-user / per-IP statistics.

Percentiles are **exact**: Spark SQL's ``percentile`` aggregate, which keeps every distinct value of the group and
interpolates linearly between the two closest ranks (as numpy's default): p99 of n values is the value at rank
``0.99 x (n - 1)``. Exact is affordable here because the log has one record per entity per interval, so a group holds
at most one value per interval (8,640 a day at 10 s).

A rate is measured per interval: the interval's total (summed over the entity's records of that interval, from
every listener and connection) divided by its ``interval_s``. Percentiles are over the intervals in which the entity
appears in the log; intervals where it did nothing are not in the log and do not pull its percentiles down.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

COUNTS = ("requests", "request_bytes", "response_bytes", "throttle_ms", "shadow_throttle_ms", "partition_mutations",
          "new_producer_ids", "connections_opened")
SCHEMA = StructType(
    [StructField("time", DoubleType()), StructField("interval_s", DoubleType())]
    + [StructField(name, StringType()) for name in ("listener", "ip", "user", "client_id", "api")]
    + [StructField(name, LongType()) for name in COUNTS]
)
ALL_APIS = "*"  # the api of entity_stats rows that combine all of an entity's APIs
PERCENTILES = (0.5, 0.95, 0.99)
FILES = "*.jsonl{,.gz}"  # in a directory: the current file and rotated, gzipped ones


def read_usage(spark: SparkSession, path: str) -> DataFrame:
    """The usage log at ``path``: a directory of ``*.jsonl`` / ``*.jsonl.gz`` files, or one such file, on any Hadoop
    file system (local, hdfs://, s3a://, ...)."""
    return spark.read.schema(SCHEMA).option("pathGlobFilter", FILES).option("mode", "DROPMALFORMED").json(path)


def _sums() -> list[Column]:
    return [F.sum(c).alias(c) for c in COUNTS] + [F.max("interval_s").alias("interval_s")]


def entity_intervals(usage: DataFrame) -> DataFrame:
    """One row per (user, client_id, api, time), and per (user, client_id, time) with api ``*``: the totals of
    that interval and its rates per second."""
    requests = usage.where(F.col("api").isNotNull())
    per_api = requests.groupBy("user", "client_id", "api", "time").agg(*_sums())
    all_apis = (requests.groupBy("user", "client_id", "time").agg(*_sums())
                .withColumn("api", F.lit(ALL_APIS)).select(per_api.columns))
    return _with_rates(per_api.unionByName(all_apis))


def ip_intervals(usage: DataFrame) -> DataFrame:
    """One row per (ip, time) with connections opened: connections and connections per second."""
    conns = usage.where(F.col("ip").isNotNull() & (F.col("connections_opened") > 0))
    return (conns.groupBy("ip", "time").agg(F.sum("connections_opened").alias("connections"),
                                           F.max("interval_s").alias("interval_s"))
            .withColumn("connection_rate", F.col("connections") / F.col("interval_s")))


def user_intervals(usage: DataFrame) -> DataFrame:
    """One row per (user, time) in which the user appears (with or without new producer ids), over all the user's
    client ids: producer_ids_rate is per user (KIP-936)."""
    pids = usage.where(F.col("user").isNotNull())
    return (pids.groupBy("user", "time").agg(F.sum("new_producer_ids").alias("new_pids"),
                                             F.max("interval_s").alias("interval_s"))
            .withColumn("new_pid_rate", F.col("new_pids") / F.col("interval_s")))


def _with_rates(df: DataFrame) -> DataFrame:
    per_s = F.col("interval_s")
    return (df.withColumn("request_rate", F.col("request_bytes") / per_s)
            .withColumn("response_rate", F.col("response_bytes") / per_s)
            .withColumn("mutation_rate", F.col("partition_mutations") / per_s)
            .withColumn("new_pid_rate", F.col("new_producer_ids") / per_s))


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
        *_interval_bursts("partition_mutations", "mutations"),
        F.sum("new_producer_ids").alias("new_producer_ids"),
        F.expr("percentile(new_pid_rate, 0.99)").alias("new_pid_rate_p99"),
        F.max("new_pid_rate").alias("new_pid_rate_max"),
        *_interval_bursts("new_producer_ids", "new_pids"),
    )


def user_stats(users: DataFrame) -> DataFrame:
    """Per user: new producer ids per second (p50/p95/p99/max) and per interval (max, p99)."""
    return users.groupBy("user").agg(
        F.count(F.lit(1)).alias("intervals"), F.sum("new_pids").alias("new_producer_ids"),
        *_percentiles("new_pid_rate", "new_pid_rate"), *_interval_bursts("new_pids", "new_pids"))


def ip_stats(ips: DataFrame) -> DataFrame:
    """Per IP: connections opened per second (p50/p95/p99/max) and per interval (max, p99)."""
    return ips.groupBy("ip").agg(
        F.count(F.lit(1)).alias("intervals"), F.sum("connections").alias("connections"),
        *_percentiles("connection_rate", "connection_rate"), *_interval_bursts("connections", "connections"))
