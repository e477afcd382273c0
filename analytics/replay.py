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

**Quota groups.** The members a table resolves to a quota group (:mod:`analytics.group_table`) share its one
sensor: they are replayed as one client, their demands added up per interval, under the group's quota. A tenant is
replayed with its group's members (one row, ``quota_group`` its name, ``members`` theirs, JSON) when the candidate
resolves it to a group, else when today does (the table in force; without one, the group its records name, whose
quota they logged). Under a table that does not resolve every member of the unit to that group, each member is
replayed alone under its own quota and the row has their figures added up.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence

from analytics import demand, group_table
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
    "quota_group",
    "members",
)
MEMBER = ("user", "client_id", "quota_rate", "log_group", "series")  # a unit's member (:func:`run`)


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
    """The byte-rate quotas of ``items`` as the proxy's :class:`quota.primitives.quota_table.QuotaTable`, with the
    quota groups that name their members (IP, topic and consumer-group entities and other keys play no part in a
    byte-rate replay of the client quotas)."""
    from quota.primitives.quota_table import QuotaTable

    byte_rates = ("producer_byte_rate", "consumer_byte_rate")
    values = []
    for item in items:
        entity = item["entity"]
        if not set(entity) <= {"user", "client-id"}:
            continue
        quotas = {k: v for k, v in item.items() if k in byte_rates}
        if quotas:
            values.append((entity, quotas, item.get("mode") == "shadow"))
    return group_table.with_groups(QuotaTable.from_values(values), items, byte_rates)


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
    """A Spark task: each row one unit's API (a tenant, or a quota group's members: :data:`MEMBER` each; a row
    without ``members`` is one tenant's) with their interval ``series``; yields :data:`RESULT` tuples. Today is the
    quota logged, or with ``today_items`` (the table in force) the quota that table gives the unit."""
    table = byte_rate_table(items)
    today_table = None if today_items is None else byte_rate_table(today_items)
    window = QuotaWindow(window_num, window_s)
    for row in rows:
        row = row.asDict() if hasattr(row, "asDict") else row
        key = KEYS[row["api"]][0]
        found = [m.asDict() if hasattr(m, "asDict") else dict(m) for m in row.get("members", [row])]  # or a tenant
        members = [_Member(m, step_s) for m in sorted(found, key=lambda m: (str(m["user"]), str(m["client_id"])))]
        group = row.get("quota_group")
        today = _replayed(members, key, group, today_table, window)
        candidate = _replayed(members, key, group, table, window)
        first = members[0].row if group is None else {"user": None, "client_id": None}
        yield (
            first["user"],
            first["client_id"],
            row["api"],
            today[0],
            candidate[0],
            round(sum(m.logged_s for m in members), 1),
            *today[1:],
            *candidate[1:],
            max(len(m.series) for m in members),
            group,
            json.dumps([[m.row["user"], m.row["client_id"]] for m in members]) if group is not None else None,
        )


class _Member:
    """A tenant's API in the replay: its series in time order, its estimated demand and what it wanted per
    interval (:func:`interval_demands`), the replay's client for it."""

    def __init__(self, row: dict, step_s: float) -> None:
        self.row = row
        self.series = sorted(
            (s.asDict() if hasattr(s, "asDict") else s for s in row["series"]), key=lambda s: s["time"]
        )
        quota = row["quota_rate"]
        estimate = demand.demand_rate(
            ((s["interval_s"], s["bytes"], s["requests"], s["held_requests"], s["held_ms"]) for s in self.series), quota
        )
        self.wanted = interval_demands(self.series, estimate, quota)
        self.client = demand.Client(step_s=step_s, request_bytes=request_bytes(self.series, self.wanted))
        self.logged_s = sum(min(s["held_ms"], s["interval_s"] * 1000) for s in self.series) / 1000


def _replayed(members: Sequence[_Member], key: str, group: str | None, table, window: QuotaWindow) -> tuple:
    """``(quota, held intervals, throttles, held seconds)`` of the unit under ``table`` (None: the quota logged):
    one client, the members' demands added up, where the table (the log) puts every member in ``group``; else
    each member alone, their figures added up (the quota: the members' highest)."""
    quotas = [_quota(m.row, key, table) for m in members]
    if group is not None and all(q[1] == group for q in quotas):
        wanted = _added_up([m.wanted for m in members])
        request = max(m.client.request_bytes for m in members)
        client = demand.Client(step_s=members[0].client.step_s, request_bytes=request)
        quota = max((q[0] for q in quotas if q[0] is not None), default=None)
        got = demand.summary(demand.replay(wanted, quota, window, client=client))
        return quota, got["held_intervals"], got["throttles"], got["held_s"]
    alone = [demand.summary(demand.replay(m.wanted, q[0], window, client=m.client)) for m, q in zip(members, quotas)]
    quota = max((q[0] for q in quotas if q[0] is not None), default=None)
    return (
        quota,
        *(sum(a[c] for a in alone) for c in ("held_intervals", "throttles")),
        sum(a["held_s"] for a in alone),
    )


def _quota(member: Mapping, key: str, table) -> tuple[float | None, str | None]:
    """The quota a member is held to under ``table`` and the quota group whose budget it is (None: its own); with
    no table, the quota its records logged and the group they name."""
    if table is None:
        return member["quota_rate"], member.get("log_group")
    resolved = table.resolve(key, member["user"] or "", member["client_id"] or "")
    quota = None if resolved.unlimited or resolved.shadow else resolved.limit  # shadow: holds nobody
    return quota, group_table.group_of(resolved)


def _added_up(wanted: Sequence[Sequence[tuple]]) -> list[tuple]:
    """Several members' ``(end_s, interval_s, rate)`` per interval added up per interval, in time order."""
    per_time: dict[float, list] = {}
    for series in wanted:
        for end, interval_s, rate in series:
            slot = per_time.setdefault(end, [interval_s, 0.0])
            slot[1] += rate
    return [(end, interval_s, rate) for end, (interval_s, rate) in sorted(per_time.items())]


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
    tenants: Sequence[tuple[str | None, str | None, str | None]] = (),
):
    """The replay as a DataFrame (:data:`RESULT` columns), one row per unit (a tenant, or a quota group's members)
    and API with a byte rate, from the per-interval frame of :func:`analytics.stats.entity_intervals`; the tenant
    sends every ``step_s`` (:func:`step_for`); today is the quota logged, or ``today_items``' (the table in force).
    ``tenants``: ``(user, client_id, quota group)`` of each tenant, the group its records name. Its tasks need the
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
    units = unit_rows(items, today, tenants)
    replayed = grouped.rdd  # a tenant alone: a row without members
    if units:  # the tenants in a quota group: one row per group, its members together (only theirs regrouped)
        found = spark.createDataFrame(units, "user string, client_id string, api string, unit string, log_group string")
        on = [grouped[c].eqNullSafe(found[c]) for c in ("user", "client_id", "api")]
        member = F.struct(grouped["user"], grouped["client_id"], "quota_rate", "log_group", "series")
        together = (
            grouped.join(F.broadcast(found), on)
            .groupBy(grouped["api"], found["unit"].alias("quota_group"))
            .agg(F.collect_list(member).alias("members"))
        )
        replayed = grouped.join(F.broadcast(found), on, "left_anti").rdd.union(together.rdd)
    rdd = replayed.mapPartitions(lambda rows: replay_tenants(rows, items, window_num, window_s, step_s, today))
    return spark.createDataFrame(rdd, schema=_schema())


def unit_rows(
    items: Sequence[Mapping],
    today_items: Sequence[Mapping] | None,
    tenants: Sequence[tuple[str | None, str | None, str | None]],
) -> list[tuple]:
    """``(user, client_id, api, unit, log group)`` of each tenant replayed in a quota group: the group the
    candidate (``items``) resolves it to, else today's (``today_items``, else the group its records name)."""
    tables = [byte_rate_table(items)] + ([] if today_items is None else [byte_rate_table(today_items)])
    out = []
    for user, client_id, log_group in sorted(set(tenants), key=str):  # each tenant once
        for api, (key, _) in KEYS.items():
            found = [group_table.group_of(t.resolve(key, user or "", client_id or "")) for t in tables]
            unit = next((g for g in found if g is not None), log_group if today_items is None else None)
            if unit is not None:
                out.append((user, client_id, api, unit, log_group))
    return out


def _schema():
    from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

    kinds = {c: StringType() for c in ("user", "client_id", "api", "quota_group", "members")}
    return StructType(
        [
            StructField(c, kinds.get(c, LongType() if c.endswith(("intervals", "throttles")) else DoubleType()))
            for c in RESULT
        ]
    )


def members(row: Mapping) -> list[tuple[str | None, str | None]]:
    """``(user, client_id)`` of each tenant a replay row stands for: a quota group's members, or the tenant."""
    if row.get("quota_group") is None:
        return [(row["user"], row["client_id"])]
    return [(user, client_id) for user, client_id in json.loads(row["members"])]


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
