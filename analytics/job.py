"""The quota planner: a PySpark job that reads the proxy's usage log and recommends quotas.

    run(input_path, output_dir, master=None)

reads the usage log (a directory of ``*.jsonl`` and rotated ``*.jsonl.gz`` files, or one such file, on any
Hadoop-compatible file system) with ``spark.read.json`` and writes to ``output_dir``:

- ``entity_stats/`` (Parquet): per (user, client_id, api), and per (user, client_id) over all APIs (api ``*``):
  p50/p95/p99/max of request and response bytes per second (on the quota's window) and per-interval bursts,
  held share, throttle seconds and the demand a throttle hid (analytics.demand), partition
  mutations per second (p99, max) and per interval, new producer ids per second (p99, max) and per interval.
- ``user_stats/`` (Parquet): per user, new producer ids per second (p50/p95/p99/max) and per interval.
- ``ip_stats/`` (Parquet): per IP, connections opened per second (p50/p95/p99/max) and per interval.
- ``named_stats/`` (Parquet): per topic, partition, group and client entity, the topics' and partitions' byte rates
  and the request rates (analytics.named_stats).
- ``top_offenders.json``: the top entities per dimension (byte rates, share of time held, partition mutations, new
  producer ids, connection rate).
- ``recommended-quotas.yaml`` (a ``quotas:`` block in the proxy's config format) and ``recommended-commands.txt``
  (the same as ``kafka-quota-proxy configs --alter`` commands), by the rule in :mod:`analytics.recommend`:
  p99 rate x headroom (1.5), rounded up to two significant digits; the token-bucket keys also hold the largest
  one-interval burst (KIP-599: ``rate >= max_burst / (samples x window)``, 11 x 1 s); offenders held to their
  fleet's figure, and a ``<default>`` per entity type and key (:mod:`analytics.fleet`).
- ``report.html`` with SVG charts of the top entities' rates over the log's span.

Every output says which ``quota.scope`` its figures are for (:mod:`analytics.scope`): ``scope`` (``--scope``) when
given, else the one the log records (broker for logs that record none); under ``broker`` a rate is the busiest
broker's, under ``cluster`` the sum over the cluster. A log recording both scopes is refused unless one is given.

Percentiles are exact (Spark SQL ``percentile``, linear interpolation between closest ranks), see
:mod:`analytics.stats`. With no master given the job runs on ``local[*]``, unless it was started by spark-submit,
whose ``--master`` then applies. The Parquet tables go wherever ``output_dir`` points (any Hadoop path); the small
files are written by the driver, to ``local_dir`` (default: ``output_dir``, which must then be a local path).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from typing import TextIO

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from analytics import capacity as capacity_mod
from analytics import (
    changeset,
    concurrency,
    fleet,
    group_stats,
    named_stats,
    outliers,
    recommend,
    report,
    shipping,
    stats,
    timeaxis,
)
from analytics import offenders as offenders_mod
from analytics import replay as replay_mod
from analytics.in_force import InForce
from analytics.progress import Progress
from analytics.scope import CLUSTER, choose

TOP_N = 10
RECOMMENDED = "recommended"  # run(replay=...): replay under the recommended table

JOB_TIME = "planner run time"  # the job's own wall-clock time, not the log's
KEYS = offenders_mod.KEYS  # each dimension table's key columns


def spark_session(
    master: str | None = None, app_name: str = "kafka-quota-proxy-analyze", console_progress: bool = False
) -> SparkSession:
    """A session on ``master``; by default ``local[*]``, unless spark-submit started us with its own master."""
    builder = SparkSession.builder.appName(app_name)
    master, settings = session_settings(master, console_progress, "PYSPARK_GATEWAY_PORT" in os.environ)
    if master:
        builder = builder.master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def session_settings(master: str | None, console_progress: bool, submitted: bool) -> tuple[str | None, dict[str, str]]:
    """The master (``local[*]`` unless given or ``submitted`` by spark-submit) and the session's settings: Spark's
    console progress bar (drawn on standard error) only when ``console_progress`` (the command's standard error is a
    terminal: in a log file its carriage returns make lines unreadable); fewer shuffle partitions on one machine."""
    if not master and not submitted:
        master = "local[*]"
    settings = {"spark.ui.showConsoleProgress": "true" if console_progress else "false"}
    if master and master.startswith("local"):
        # The aggregates are small (one row per entity): 200 shuffle partitions on one machine is mostly overhead.
        settings["spark.sql.shuffle.partitions"] = str(2 * (os.cpu_count() or 2))
    return master, settings


def _rows(df: DataFrame) -> list[dict]:
    return [r.asDict() for r in df.collect()]


def run(
    input_path: str,
    output_dir: str,
    master: str | None = None,
    *,
    rules: recommend.Rules | None = None,
    headroom: float | None = None,
    spark: SparkSession | None = None,
    local_dir: str | None = None,
    top_n: int = TOP_N,
    charts: bool = True,
    scope: str | None = None,
    replay: str | None = None,
    progress: TextIO | None = None,
    fleet_default: float | None = fleet.DEFAULT_PERCENTILE,
    legitimate: Sequence[Mapping[str, str]] = (),
    sources: Mapping[str, str] | None = None,
    in_force: InForce | None = None,
    capacity: Mapping[str, float] | None = None,
    capacity_fit: str = "flag",
    console_progress: bool = False,
) -> dict:
    """Run the planner; returns a summary (records read, entities, quota items, seconds, output paths). ``scope``:
    broker or cluster, default the one the log records (:func:`analytics.scope.choose`; raises
    :class:`analytics.scope.ScopeError` for a log recording both when none is given). ``replay``: a quotas YAML to
    replay the logged demand under (:mod:`analytics.replay`), or ``"recommended"`` for the recommended table; None: no
    replay (raises :class:`analytics.replay.ReplayError` for a file that cannot be used, before any Spark work).
    ``progress``: where each step and Spark's work are said while it runs (:mod:`analytics.progress`), or nowhere.
    ``fleet_default``: a percentile (90 by default): the table is a ``<default>`` entry per entity type and key and
    the tenants above it (:mod:`analytics.fleet`); None: one entry per tenant. Offenders are held to their fleet's figure
    (:mod:`analytics.outliers`) but the ``legitimate`` entities (``{"user": ..., "client-id": ...}``). ``sources``:
    where each window setting came from (:func:`analytics.in_force.window_sources`), said in the report.
    ``in_force``: the table in force; with it the commands file is the change set (:mod:`analytics.changeset`) and
    the replay runs it: today's table against the table after the change (``replay`` must then be None or
    ``"recommended"``). ``capacity``: the brokers' (:mod:`analytics.capacity`): what the table commits at once is
    said against it, and with ``capacity_fit="scale"`` an oversubscribed key is scaled down to fit.
    ``console_progress``: Spark's console progress bar on, in a session the job starts."""
    candidate = None if replay in (None, RECOMMENDED) else replay_mod.load_table(replay)
    if in_force is not None and candidate is not None:
        raise replay_mod.ReplayError(
            f"--replay {replay}: with the table in force (--proxy-config, --bootstrap) the replay is of the change "
            "set, today's table against the table after it: give --replay without a file, or no table in force"
        )
    if in_force is not None:
        replay = RECOMMENDED
    rules = rules or recommend.Rules()
    if headroom is not None:
        rules = recommend.Rules(**{**rules.__dict__, "headroom": headroom})
    local_dir = local_dir or output_dir
    os.makedirs(local_dir, exist_ok=True)
    own_session = spark is None and SparkSession.getActiveSession() is None  # stop only a session we started
    spark = spark or spark_session(master, console_progress=console_progress)
    started = time.monotonic()
    cached: list[DataFrame] = []
    steps = Progress(spark, 6 if replay is not None else 5, progress)
    try:
        steps.start()
        steps.step("reading the usage log")
        usage = stats.read_usage(spark, input_path).cache()
        cached.append(usage)
        chosen = choose(stats.sources(usage), scope)  # first: a log mixing scopes is refused before any work
        log = _log_extent(usage, rules.request_rate_apis)
        axis = timeaxis.TimeAxis.for_span(log["start"], log["end"]) if log["start"] is not None else None
        grid = stats.on_grid(usage)
        combine = chosen.scope if chosen.budgets > 1 else CLUSTER  # one budget: busiest = sum, one aggregation
        ports = chosen.budgets > chosen.proxies  # a proxy with several broker ports (cluster mode)
        frames = {
            "entity": stats.entity_intervals(grid, combine, ports),
            "user": stats.user_intervals(grid, combine),
            "ip": stats.ip_intervals(grid, by_proxy=chosen.proxies > 1),
        }
        for name, computed in frames.items():  # read again for the charts: computed once
            frames[name] = computed.cache()
            cached.append(frames[name])
        grid_s = timeaxis.grid_s(log)
        k = stats.window_intervals(rules.quota_window_num * rules.quota_window_s, grid_s)
        tables = {
            "entity": stats.entity_stats(frames["entity"], k, grid_s),
            "user": stats.user_stats(frames["user"]),
            "ip": stats.ip_stats(frames["ip"]),
            "named": named_stats.named_stats(named_stats.named_intervals(grid, rules.request_rate_apis), k, grid_s),
        }
        tenants = group_stats.tenant_groups(grid) if log["grouped"] else []  # a log with quota groups
        if tenants:
            by_scope = (combine, ports, k, grid_s, rules.request_rate_apis)
            tables["group"] = group_stats.group_stats(grid, frames["entity"], tenants, *by_scope)
        if log["named_held"]:  # holds of request rates or topics: what they hid
            named = named_stats.named_demand(grid, rules.request_rate_apis)
            tables["named"] = named_stats.with_demand(tables["named"], named)
        steps.step("per-interval totals and the statistics per tenant, user and IP")
        for name, stats_table in tables.items():
            stats_table = stats_table.cache()
            cached.append(stats_table)
            tables[name] = stats_table
            stats_table.write.mode("overwrite").parquet(_join(output_dir, f"{name}_stats"))
        entity_rows = _rows(tables["entity"].where(F.col("api").isin("Produce", "Fetch", stats.ALL_APIS)))
        user_rows, ip_rows, named_rows = _rows(tables["user"]), _rows(tables["ip"]), _rows(tables["named"])
        group_rows = _rows(tables["group"]) if "group" in tables else []
        collected = {"entity": entity_rows, "user": user_rows, "ip": ip_rows}  # the dimensions' tables, ranked here

        steps.step("top offenders" + (" and their charts" if charts else ""))
        offenders, chart_paths = offenders_mod.rank(
            tables, frames, collected, chosen, top_n, charts=charts, axis=axis, local_dir=local_dir
        )

        steps.step("recommendations")
        planned = fleet.plan(
            entity_rows, user_rows, ip_rows, rules, fleet_default, legitimate, named_rows, group_rows, tenants
        )
        items, basis = planned.items, planned.basis
        scope_lines = [chosen.figures(), *chosen.notes(), *planned.notes]
        commitments = []
        if capacity is not None:
            per_tenant, per_ip = concurrency.limits(
                items,
                {(r["user"], r["client_id"], r["api"]) for r in entity_rows},
                [r["ip"] for r in ip_rows if r["ip"] is not None],
            )
            busy = concurrency.committed(spark, frames["entity"], frames["ip"], per_tenant, per_ip)
            commitments = capacity_mod.assess(busy, concurrency.every_entry(per_tenant, per_ip), capacity)
            scope_lines += [c.line() for c in commitments]
            if capacity_fit == "scale":
                items = capacity_mod.scaled(items, commitments)
                scope_lines += capacity_mod.scaled_note(commitments)
        changes = None
        if in_force is not None:
            seen = [
                (recommend.entity_id(e), key)
                for (_, key), found in outliers.fleets(entity_rows, user_rows, ip_rows).items()
                for e in found
            ]
            held = [(recommend.entity_id(o.entity), o.key) for o in planned.outliers if not o.legitimate]
            changes = changeset.plan(in_force, items, basis, seen, held)
        _write(
            local_dir,
            "recommended-quotas.yaml",
            recommend.to_yaml(items, rules, source=input_path, scope_lines=scope_lines, basis=basis),
        )
        replayed = None
        if replay is not None:
            steps.step("replay of the logged demand under today's quotas and the candidate")
            with shipping.code_shipped(spark, session_ends_with_job=own_session):
                table = replay_mod.run(
                    spark,
                    frames["entity"],
                    changes.after if changes is not None else items if candidate is None else candidate,
                    rules.quota_window_num,
                    rules.quota_window_s,
                    replay_mod.step_for(grid_s, rules.quota_window_s),
                    today_items=None if changes is None else changes.in_force.replayed(),
                    tenants=tenants or [(r["user"], r["client_id"], None) for r in entity_rows],
                )
                table.write.mode("overwrite").parquet(_join(output_dir, "replay"))
            rows = _rows(spark.read.parquet(_join(output_dir, "replay")))
            replayed = {
                "candidate": "the recommended table" if candidate is None else replay,
                "rows": replay_mod.changed(rows),
                "unseen": changeset.unseen_demand(entity_rows),  # tenants held nearly all the time
            }
            if changes is not None:
                changes = changeset.with_replay(changes, rows, entity_rows)
                replayed.update(candidate="the table after the change set", today=changes.in_force.source)
        steps.step("report")
        commands = (
            recommend.to_commands(items, scope_lines, basis)
            if changes is None
            else changeset.to_commands(changes, scope_lines)
        )
        _write(local_dir, "recommended-commands.txt", commands)
        _write(local_dir, "top_offenders.json", json.dumps(offenders, indent=2) + "\n")
        summary = {
            "input": input_path,
            "records": log["records"],
            "entities (user, client-id)": len({(r["user"], r["client_id"]) for r in entity_rows}),
            "users": len(user_rows),
            "ips": len(ip_rows),
            **timeaxis.log_rows(log),
            **chosen.summary(),
            "headroom": rules.headroom,
            report.OFFENDER_MADS: rules.offender_mads,
            "quota items": len(items),
            **{
                setting: f"{getattr(rules, name)} ({said})"
                for name, setting in recommend.WINDOWS.items()
                if (said := (sources or {}).get(setting))
            },
            "quotas in force": "not given: no change set"
            if changes is None
            else f"{changes.in_force.source}: {len(changes.in_force.items)} entities",
            **({} if changes is None else {"change set": changes.counts()}),
        }
        seconds = round(time.monotonic() - started, 1)
        summary[JOB_TIME] = timeaxis.duration(seconds)
        report.write_report(
            os.path.join(local_dir, "report.html"),
            summary,
            offenders,
            chart_paths,
            items,
            scope_lines,
            basis,
            replayed,
            planned.outliers,
            planned.under_default,
            changes,
        )
        return {
            **summary,
            "basis": basis,
            "replay": replayed,
            "records": log["records"],
            "log": log,
            "seconds": seconds,
            "output_dir": output_dir,
            "local_dir": local_dir,
            "offenders": offenders,
            "outliers": planned.outliers,
            "quotas": items,
            "changes": changes,
            "capacity": commitments,
            "scope": chosen.scope,
            "scope_lines": scope_lines,
        }
    finally:
        steps.stop()
        for df in cached:
            df.unpersist()
        if own_session:
            spark.stop()


def _log_extent(usage: DataFrame, apis: Sequence[str]) -> dict:
    """Records; the log's start (its earliest interval's start) and end (its latest interval's end), epoch s;
    its intervals (distinct end times) and their shortest and longest length; how many records name a quota
    group, and how many were held sending requests a request rate counts (``apis``) or bytes of topic quotas."""
    row = usage.agg(
        F.count(F.lit(1)).alias("records"),
        F.min(F.col("time") - F.col("interval_s")).alias("start"),
        F.max("time").alias("end"),
        F.countDistinct("time").alias("intervals"),
        F.count("quota_group").alias("grouped"),  # records of a quota group's member
        F.count(F.when(named_stats.held(apis), 1)).alias("named_held"),
        F.min("interval_s").alias("shortest"),
        F.max("interval_s").alias("longest"),
    ).first()
    assert row is not None  # an aggregation without grouping has one row, also over no records
    return row.asDict()


def _join(base: str, name: str) -> str:
    return base.rstrip("/") + "/" + name


def _write(directory: str, name: str, text: str) -> None:
    with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
        f.write(text)
