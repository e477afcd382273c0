"""The demand a throttle hid from what several members share: a quota group's members, a topic's producers and
consumers, or one client's requests (a member of its own). Spark; the Python twin is
:func:`analytics.demand.summed_demand_rate` (one member: :func:`analytics.demand.demand_rate`), and the tests compare
the two.

The input has one row per (owner, member, interval): ``time``, ``interval_s``, ``requests``, ``held_requests``,
``held_ms``, ``quota_rate`` (the owner's quota where the log says it, else null) and a ``{side}_rate`` per side
(per second: bytes, or requests for a request rate's demand).
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from analytics import stats


def summed_demand(parts: DataFrame, owner: Sequence[str], member: Sequence[str], sides: Sequence[str]) -> DataFrame:
    """``(*owner, held_intervals, {side}_demand ...)``: each owner's intervals in which a member was held, and its
    estimated demand, null where no interval tells it."""
    held = F.col("held_ms") > 0
    after_hold = F.coalesce(F.col("_after_hold"), F.lit(False))
    in_time = Window.partitionBy(*owner, *member).orderBy("time")
    parts = parts.withColumn("_after_hold", F.lag(stats._held_through(), 1).over(in_time))
    for side in sides:
        d = stats._interval_demand(side)
        parts = parts.withColumn(f"_d_{side}", F.when(held, d).otherwise(F.col(f"{side}_rate")))
    per_interval = parts.groupBy(*owner, "time").agg(
        F.max("interval_s").alias("interval_s"),
        F.max(F.least(F.col("held_ms"), F.col("interval_s") * 1000)).alias("held"),
        F.bool_or(held).alias("is_held"),
        # a held member tells where its d does; one not held, unless it just came out of a hold it was held through
        F.bool_and(F.when(held, F.col(f"_d_{sides[0]}").isNotNull()).otherwise(~after_hold)).alias("tells"),
        F.max("quota_rate").alias("quota_rate"),
        *[F.sum(F.coalesce(f"_d_{side}", F.lit(0.0))).alias(f"_d_{side}") for side in sides],
    )
    quota = per_interval.withColumn("_quota", F.max("quota_rate").over(Window.partitionBy(*owner)))
    told = F.col("is_held") & F.col("tells")
    free = F.when(told, F.col("interval_s") - F.col("held") / 1000)  # null: the interval does not tell
    return quota.groupBy(*owner).agg(
        F.count(F.when(F.col("is_held"), 1)).alias("held_intervals"), *[_pooled(side, free) for side in sides]
    )


def _pooled(side: str, free: Column) -> Column:
    """Pooled over the free time (null where the interval does not tell), over the intervals above the quota, else
    over all that tell (as :func:`analytics.demand.demand_rate` pools)."""
    d = F.col(f"_d_{side}")
    above = d > F.col("_quota")
    pooled_above = F.sum(F.when(above, d * free)) / F.sum(F.when(above, free))
    return F.coalesce(pooled_above, F.sum(d * free) / F.sum(free)).alias(f"{side}_demand")
