"""The report's top offenders: the tenants each dimension ranks highest, on the rows the job has already collected
(no Spark query), and the per-interval series of the charts drawn for them, read in one query per frame."""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Mapping, Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from analytics import dimensions, report

CHART_N = 5  # tenants drawn per chart
KEYS = {"entity": ["user", "client_id"], "user": ["user"], "ip": ["ip"]}  # each dimension table's key columns


def top_rows(rows: Sequence[Mapping], api: str | None, metric: str, n: int, order: Sequence[str]) -> list[Mapping]:
    """The ``n`` rows of ``api`` (any: None) with ``metric`` above 0, highest first, ties by the ``order`` columns
    (the table's first two); on rows already collected, the order Spark's ``where(metric > 0).orderBy(metric desc,
    *order).limit(n)`` gives them: NaN above every number, a null key first."""

    def key(row: Mapping) -> tuple:
        value = row[metric]
        return (
            not math.isnan(value),
            -value if not math.isnan(value) else 0.0,
            *((row[c] is not None, row[c] if row[c] is not None else "") for c in order),
        )

    chosen = [r for r in rows if (api is None or r["api"] == api) and r[metric] is not None and not r[metric] <= 0]
    return sorted(chosen, key=key)[:n]


def chart_series(frame: DataFrame, keys: list[str], charts: Sequence[tuple]) -> list[dict[str, list]]:
    """For each chart ``(rate, api, top)`` (api None: the frame has none), the per-interval rate of each of the
    ``top`` entities, as ``{label: [(time, rate), ...]}``: the charts of one frame read in one query."""
    wanted = [
        functools.reduce(
            operator.and_,
            [F.col(k).eqNullSafe(F.lit(row[k])) for k in keys] + ([F.col("api") == api] if api is not None else []),
        )
        for _, api, top in charts
        for row in top
    ]
    rows = []
    if wanted:
        apis = ["api"] if any(api is not None for _, api, _ in charts) else []
        rates = sorted({rate for rate, _, _ in charts})
        rows = frame.where(functools.reduce(operator.or_, wanted)).select(*keys, *apis, "time", *rates).collect()
    out = []
    for rate, api, top in charts:
        series: dict[str, list] = {report.entity_label({k: row[k] for k in keys}): [] for row in top}
        chosen = {tuple(row[k] for k in keys) for row in top}
        for r in rows:
            if (api is None or r["api"] == api) and tuple(r[k] for k in keys) in chosen:
                series[report.entity_label({k: r[k] for k in keys})].append((r["time"], r[rate]))
        out.append(series)
    return out


def rank(
    tables: Mapping[str, DataFrame],
    frames: Mapping[str, DataFrame],
    collected: Mapping[str, Sequence[Mapping]],
    chosen,
    top_n: int,
    *,
    charts: bool,
    axis,
    local_dir: str,
) -> tuple[dict, dict]:
    """(each dimension's title, metric, unit, columns and top tenants; each chart's file, relative, or None) for the
    report: ``collected`` the rows of the dimensions' ``tables``, ``frames`` the per-interval tables the charts read,
    ``chosen`` the quota.scope's figures (its titles), ``axis`` the charts' time axis (None: no chart drawn)."""
    offenders, chart_paths = {}, {}
    drawn: dict[str, tuple] = {}  # the charts: title, unit, frame, rate, api, their tenants
    for name, (title, table, api, metric, unit, cols) in dimensions.DIMENSIONS.items():
        title = dimensions.title(name, title, chosen)
        top = top_rows(collected[table], api, metric, top_n, tables[table].columns[:2])
        offenders[name] = {
            "title": title,
            "metric": metric,
            "unit": unit,
            "columns": cols,
            "top": [{**{k: r[k] for k in KEYS[table]}, "value": r[metric], **{c: r[c] for c in cols}} for r in top],
        }
        series_of = dimensions.SERIES[name]
        if charts and series_of is not None:
            drawn[name] = (title, unit, *series_of, api, top[:CHART_N])
    by_frame: dict[str, list[str]] = {}  # the charts of each frame, read in one query
    for name, (_, _, frame_name, _, _, _) in drawn.items():
        by_frame.setdefault(frame_name, []).append(name)
    drawn_series: dict[str, dict[str, list]] = {}
    for frame_name, names in by_frame.items():
        wanted = [drawn[n][3:] for n in names]
        drawn_series.update(zip(names, chart_series(frames[frame_name], KEYS[frame_name], wanted)))
    for name, (title, unit, *_) in drawn.items():
        series = drawn_series[name]
        if not series or axis is None:
            continue
        rel, path = report.chart_file(local_dir, name)
        chart_paths[name] = rel if report.draw_chart(path, f"{title}: top {len(series)}", unit, series, axis) else None
    return offenders, chart_paths
