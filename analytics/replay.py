"""``analyze --replay``: the logged demand run through the proxy's own byte-rate quota, under today's quotas and a
candidate table, in Spark tasks.

Per (user, client-id) and API (Produce: ``producer_byte_rate``, Fetch: ``consumer_byte_rate``) the tenant's demand
in each interval is what it sent when it was not held, and what the throttle hid when it was
(:func:`interval_demands`); a task replays it (:func:`analytics.demand.replay`: a producer that queues what a hold
keeps back, through the pure ``quota/`` core, Kafka's sampled window, on a manual clock) under the quota in force in the log (``quota_rate``, none when no byte-rate
throttle was logged) and under the candidate's quota for the tenant (resolved as the proxy resolves it, Kafka's
eight levels), and says how often (intervals held, throttles) and how long (seconds held) it would have been
throttled. The executors are given the ``quota`` and ``analytics`` packages by the driver (:mod:`analytics.shipping`,
around :func:`run`'s job), so the replay runs unchanged on ``local[*]`` and on a cluster whose Python has neither.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence

from analytics import demand
from quota.primitives.rate import QuotaWindow

KEYS = {"Produce": ("producer_byte_rate", "request"), "Fetch": ("consumer_byte_rate", "response")}
SERIES = ("time", "interval_s", "bytes", "requests", "held_requests", "held_ms")
RESULT = (
    "user",
    "client_id",
    "api",
    "quota_today",
    "quota_candidate",
    "logged_held_s",
    "today_held_intervals",
    "today_throttles",
    "today_held_s",
    "candidate_held_intervals",
    "candidate_throttles",
    "candidate_held_s",
    "intervals",
)


class ReplayError(ValueError):
    """A candidate table that cannot be used: the message names the file and the reason."""


def load_table(path: str) -> list[dict]:
    """The ``quotas:`` list of a YAML file (a proxy configuration or a ``quotas:`` block, as the planner writes)."""
    import yaml  # the driver's: executors import this module without it

    try:
        with open(path, encoding="utf-8") as f:
            doc = yaml.safe_load(f)
    except OSError as exc:
        raise ReplayError(f"--replay {path}: cannot read it: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise ReplayError(f"--replay {path}: not YAML: {exc}") from None
    items = doc.get("quotas") if isinstance(doc, dict) else None
    if not isinstance(items, list):
        raise ReplayError(
            f"--replay {path}: no 'quotas:' list (a proxy configuration or the planner's recommended-quotas.yaml)"
        )
    try:
        byte_rate_table(items)
    except (ValueError, TypeError, KeyError) as exc:
        raise ReplayError(f"--replay {path}: {exc}") from None
    return items


def byte_rate_table(items: Sequence[Mapping]):
    """The byte-rate quotas of ``items`` as the proxy's :class:`quota.primitives.quota_table.QuotaTable` (IP, topic and group
    entities and other keys play no part in a byte-rate replay of the client quotas)."""
    from quota.primitives.quota_table import QuotaTable

    values = []
    for item in items:
        entity = item["entity"]
        if not set(entity) <= {"user", "client-id"}:
            continue
        quotas = {k: v for k, v in item.items() if k in ("producer_byte_rate", "consumer_byte_rate")}
        if quotas:
            values.append((entity, quotas, item.get("mode") == "shadow"))
    return QuotaTable.from_values(values)


def interval_demands(series: Sequence[Mapping], estimate: float | None, quota: float | None) -> list[tuple]:
    """``(end_s, interval_s, rate)`` per interval: the rate sent where the tenant was not held; where it was, the
    interval's own estimate (:func:`analytics.demand.interval_demand`) at most the tenant's (an interval's own is
    high where its client sent what it queued while held), else the tenant's, else the quota it was held to (its
    demand was at least that). Never less than what it sent."""
    out = []
    for r in series:
        rate = r["bytes"] / r["interval_s"]
        if r["held_ms"] > 0:
            d = demand.interval_demand(r["interval_s"], r["bytes"], r["requests"], r["held_requests"], r["held_ms"])
            tenant = estimate or quota or rate
            rate = max(rate, tenant if d is None else min(d, tenant))
        out.append((r["time"], r["interval_s"], rate))
    return out


MOST_REQUESTS_PER_S = 10
"""What bounds the replay's work: its client's requests carry at least a tenth of a second of the tenant's highest
demand, so a held tenant costs at most about ten quota decisions a second of log, whatever its own requests were."""


def request_bytes(series: Sequence[Mapping], wanted: Sequence[tuple] = ()) -> float:
    """The replay's client's largest request: the tenant's mean request in the intervals it was held (where its
    client had a queue and filled its requests), else in all, at most :data:`analytics.demand.MAX_REQUEST_BYTES`;
    at least ``1 / MOST_REQUESTS_PER_S`` of the highest rate of ``wanted`` (:func:`interval_demands`)."""
    held = [r for r in series if r["held_ms"] > 0] or list(series)
    requests = sum(r["requests"] for r in held)
    mean = sum(r["bytes"] for r in held) / requests if requests else demand.MAX_REQUEST_BYTES
    floor = max((rate for _, _, rate in wanted), default=0.0) / MOST_REQUESTS_PER_S
    return min(demand.MAX_REQUEST_BYTES, max(mean, floor))


def replay_tenants(
    rows: Iterable,
    items: Sequence[Mapping],
    window_num: int,
    window_s: int,
    step_s: float,
    today_items: Sequence[Mapping] | None = None,
) -> Iterator[tuple]:
    """A Spark task: each row one tenant's API with its interval ``series``; yields :data:`RESULT` tuples. Today is
    the quota logged, or with ``today_items`` (the table in force) the quota that table gives the tenant."""
    table = byte_rate_table(items)
    today_table = None if today_items is None else byte_rate_table(today_items)
    window = QuotaWindow(window_num, window_s)
    for row in rows:
        key, side = KEYS[row["api"]]
        series = sorted((s.asDict() if hasattr(s, "asDict") else s for s in row["series"]), key=lambda s: s["time"])
        quota_today = row["quota_rate"]
        estimate = demand.demand_rate(
            ((s["interval_s"], s["bytes"], s["requests"], s["held_requests"], s["held_ms"]) for s in series),
            quota_today,
        )
        wanted = interval_demands(series, estimate, quota_today)
        resolved = table.resolve(key, row["user"] or "", row["client_id"] or "")
        quota_candidate = None if resolved.unlimited else resolved.limit
        if today_table is not None:
            in_force = today_table.resolve(key, row["user"] or "", row["client_id"] or "")
            quota_today = None if in_force.unlimited or in_force.shadow else in_force.limit  # shadow: holds nobody
        client = demand.Client(step_s=step_s, request_bytes=request_bytes(series, wanted))
        today = demand.summary(demand.replay(wanted, quota_today, window, client=client))
        candidate = demand.summary(demand.replay(wanted, quota_candidate, window, client=client))
        logged = sum(min(s["held_ms"], s["interval_s"] * 1000) for s in series) / 1000
        yield (
            row["user"],
            row["client_id"],
            row["api"],
            quota_today,
            quota_candidate,
            round(logged, 1),
            today["held_intervals"],
            today["throttles"],
            today["held_s"],
            candidate["held_intervals"],
            candidate["throttles"],
            candidate["held_s"],
            len(series),
        )


def step_for(interval_s: float, window_s: int) -> float:
    """How often the replay's tenant sends: twice an interval of the log, never more often than once a sample of
    the quota's window (each send is the demand of that time)."""
    return max(float(window_s), interval_s / 2) if interval_s > 0 else float(window_s)


def run(
    spark,
    intervals,
    items: Sequence[Mapping],
    window_num: int = 11,
    window_s: int = 1,
    step_s: float = 1.0,
    today_items: Sequence[Mapping] | None = None,
):
    """The replay as a DataFrame (:data:`RESULT` columns), one row per tenant and API with a byte rate, from the
    per-interval frame of :func:`analytics.stats.entity_intervals`; the tenant sends every ``step_s``
    (:func:`step_for`); today is the quota logged, or ``today_items``' (the table in force). Its tasks need the
    project's code: compute it inside :func:`analytics.shipping.code_shipped`."""
    from pyspark.sql import functions as F

    frame = intervals.where(F.col("api").isin(*KEYS)).withColumn(
        "bytes",
        F.when(F.col("api") == "Produce", F.col("request_rate")).otherwise(F.col("response_rate"))
        * F.col("interval_s"),
    )
    grouped = frame.groupBy("user", "client_id", "api").agg(
        F.max("quota_rate").alias("quota_rate"), F.collect_list(F.struct(*SERIES)).alias("series")
    )
    items = [dict(it) for it in items]
    today = None if today_items is None else [dict(it) for it in today_items]
    rdd = grouped.rdd.mapPartitions(lambda rows: replay_tenants(rows, items, window_num, window_s, step_s, today))
    return spark.createDataFrame(rdd, schema=_schema())


def _schema():
    from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

    kinds = {"user": StringType(), "client_id": StringType(), "api": StringType()}
    return StructType(
        [
            StructField(c, kinds.get(c, LongType() if c.endswith(("intervals", "throttles")) else DoubleType()))
            for c in RESULT
        ]
    )


def changed(rows: Iterable[Mapping]) -> list[dict]:
    """The tenants a candidate changes or that are held under either table, most held under the candidate first."""
    out = [
        dict(r)
        for r in rows
        if r["today_held_s"] or r["candidate_held_s"] or not _same(r["quota_today"], r["quota_candidate"])
    ]
    out.sort(key=lambda r: (-r["candidate_held_s"], -r["today_held_s"], str(r["user"]), str(r["client_id"])))
    return out


def _same(a: float | None, b: float | None) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and math.isclose(a, b))
