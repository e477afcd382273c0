"""The HTML report and its SVG charts, from values the job has already collected. No Spark here.

Charts are SVG files drawn with matplotlib (no display needed), their x axis the log's span (:mod:`analytics.timeaxis`); without matplotlib the report is written with
its tables and says the charts are missing.
"""

from __future__ import annotations

import html
import os
from collections.abc import Mapping, Sequence

from analytics import recommend
from analytics.changeset import MOSTLY_HELD, ChangeSet, origin_text
from analytics.outliers import Outlier, entity_flag
from analytics.recommend import entity_id
from analytics.replay import members as replay_members
from analytics.timeaxis import TimeAxis
from quota.primitives.quota_groups import MEMBER_KEYS

CHART_DPI = 90


def entity_label(row: Mapping) -> str:
    if "ip" in row and row.get("ip") is not None and "user" not in row:
        return str(row["ip"])
    if row.get("quota_group") is not None:  # a replay row of a quota group's members
        members = ", ".join(entity_label({"user": u, "client_id": c}) for u, c in replay_members(row))
        return f"quota-group={row['quota_group']} ({members})"
    user = row.get("user")
    client = row.get("client_id")
    if client is None:
        return f"user={user}"
    return f"user={user} client-id={client}" if user is not None else f"client-id={client}"


def draw_chart(
    path: str, title: str, unit: str, series: Mapping[str, Sequence[tuple[float, float]]], axis: TimeAxis
) -> bool:
    """An SVG line chart of ``{label: [(epoch_s, value), ...]}`` over the log's span (``axis``); False if
    matplotlib is not installed. Text stays text (``svg.fonttype: none``): selectable, and readable by tests."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    with plt.rc_context({"svg.fonttype": "none", "svg.hashsalt": "report"}):
        fig, ax = plt.subplots(figsize=(9, 3.6))
        ax.patch.set_gid("plot-area")
        for i, (label, points) in enumerate(series.items()):
            points = sorted(points)
            # Markers: an entity is in the log only in intervals where it did something, so a line alone would
            # bridge the gaps between sparse bursts; a lone point (no line) is drawn larger. Not clipped: the last
            # interval's point is on the axis's end.
            (line,) = ax.plot(
                [axis.x(t) for t, _ in points],
                [v for _, v in points],
                label=label,
                linewidth=1.0,
                marker=".",
                markersize=3 if len(points) > 1 else 8,
                clip_on=False,
            )
            line.set_gid(f"series-{i}")
        positive = [v for points in series.values() for _, v in points if v > 0]
        if positive and max(positive) > 100 * min(positive):  # one tenant far above the rest: a log scale shows both
            ax.set_yscale("symlog", linthresh=min(positive))
        else:
            ax.set_ylim(bottom=0)
        ax.set_xlim(0, axis.span)
        ticks = axis.ticks()
        ax.set_xticks(ticks, [axis.tick_label(v) for v in ticks])
        ax.set_title(title)
        ax.set_ylabel(unit)
        ax.set_xlabel(axis.label())
        ax.grid(True, alpha=0.3)
        if series:
            ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
        fig.tight_layout()
        fig.savefig(path, dpi=CHART_DPI, format="svg", metadata={"Date": None})
        plt.close(fig)
    return True


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:,.3f}" if abs(v) < 100 else f"{v:,.0f}"
    if isinstance(v, int):
        return f"{v:,}"
    return "" if v is None else str(v)


def _members(item: Mapping) -> str:
    """A quota group's members, as its entry names them: `` (users: alice, bob)``; "" for any other entity."""
    named = "; ".join(f"{k}: {', '.join(v) if isinstance(v, list) else v}" for k, v in item.items() if k in MEMBER_KEYS)
    return f" ({named})" if named else ""


def _table(headers: Sequence[str], rows: Sequence[Sequence]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_fmt(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


STYLE = """body{font-family:sans-serif;margin:2em;max-width:70em} table{border-collapse:collapse;margin:.5em 0 1.5em}
td,th{border:1px solid #ccc;padding:.2em .6em;text-align:right} th{background:#eee} td:first-child{text-align:left}
img{max-width:100%;border:1px solid #ddd} code{background:#f4f4f4}"""


def write_report(
    path: str,
    summary: Mapping,
    offenders: Mapping[str, Mapping],
    charts: Mapping[str, str | None],
    quota_items: Sequence[Mapping],
    scope_lines: Sequence[str] = (),
    basis: Mapping[tuple, Mapping[str, str]] | None = None,
    replayed: Mapping | None = None,
    outliers: Sequence[Outlier] = (),
    under_default: Sequence[Mapping] = (),
    changes: ChangeSet | None = None,
) -> None:
    """``report.html``: what was read, which quota.scope the figures are for (``scope_lines``: the first says what a
    rate is, the rest are notes), the offenders judged against their fleet (``outliers``), the top entities per
    dimension with their chart, the recommendations with what each rests on (``basis``,
    :func:`analytics.recommend.bases`) and the tenants left to a default with their own (``under_default``,
    :func:`analytics.fleet.under_default`), the change set against the table in force (``changes``,
    :mod:`analytics.changeset`) and the replay (``replayed``), if one was run."""
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>Usage report</title><style>{STYLE}</style>"
        "</head><body><h1>kafka-quota-proxy usage report</h1>"
    ]
    parts.append(_table(["", ""], [[k, v if isinstance(v, int) else str(v)] for k, v in summary.items()]))
    parts.append(
        "<p>The log spans from the start of its earliest interval to the end of its latest; every chart's "
        "time axis is that span, and each point is one interval, drawn at its end. The planner run time "
        "is how long this job took, not the log.</p>"
    )
    parts.append(
        "<p>Byte rates are on the quota's own clock (over Kafka's sampled window, quota.window.num x "
        "quota.window.size.seconds, in whole log intervals), so a stop-and-go tenant's rate is what it was "
        "let through; its one-interval bursts are the <code>*_burst_*</code> columns. Other rates are per "
        "interval of the log. Percentiles are exact, over the intervals in which the entity appears. "
        "<code>held_share</code> is the share of wall time the entity was held by a throttle (0-1), "
        "<code>throttle_seconds</code> the throttle time summed over its connections and requests; "
        "<code>*_demand</code> is the demand a throttle hid, estimated (analytics/README.md). Files: "
        "<a href='recommended-quotas.yaml'>recommended-quotas.yaml</a>, "
        "<a href='recommended-commands.txt'>recommended-commands.txt</a>, "
        "<a href='top_offenders.json'>top_offenders.json</a>, Parquet tables <code>entity_stats/</code>, "
        "<code>user_stats/</code>, <code>ip_stats/</code>.</p>"
    )
    parts += [
        f"<p class='scope'><strong>{html.escape(line)}</strong></p>"
        if i == 0
        else f"<p class='scope'>{html.escape(line)}</p>"
        for i, line in enumerate(scope_lines)
    ]
    parts.append(_outliers_section(outliers, summary.get(OFFENDER_MADS)))
    for name, dim in offenders.items():
        parts.append(f"<h2>{html.escape(dim['title'])}</h2>")
        parts.append(f"<p>Ranked by <code>{html.escape(dim['metric'])}</code> ({html.escape(dim['unit'])}).</p>")
        cols = dim["columns"]
        if not dim["top"]:
            parts.append("<p>None in this log.</p>")
            continue
        parts.append(_table(["entity"] + cols, [[entity_label(r)] + [r.get(c) for c in cols] for r in dim["top"]]))
        chart = charts.get(name)
        if chart:
            parts.append(
                f"<p><a href='{html.escape(chart)}'><img src='{html.escape(chart)}' "
                f"alt='{html.escape(dim['title'])} over time'></a></p>"
            )
        elif name in charts:
            parts.append(
                "<p><em>No chart: matplotlib is not installed (the analytics extra: pip install "
                "'.[analytics]' in a checkout, or the wheel with [analytics]).</em></p>"
            )
    scope = summary.get("quota scope")
    parts.append(
        f"<h2>Recommended quotas ({len(quota_items)} entities"
        f"{f', for quota.scope {html.escape(str(scope))}' if scope else ''})</h2>"
    )
    keys = sorted({k for it in quota_items for k in it if k not in ("entity", *MEMBER_KEYS)})
    said = basis or {}

    def rests_on(it: Mapping) -> str:
        found = said.get(entity_id(it["entity"]), {})
        return "; ".join(f"{k}: {text}" for k, text in found.items() if k in it)

    rows = [
        [" ".join(f"{k}={v}" for k, v in it["entity"].items()) + _members(it)]
        + [it.get(k) for k in keys]
        + [rests_on(it)]
        for it in quota_items
    ]
    parts.append(_table(["entity"] + keys + ["rests on"], rows))
    if under_default:
        parts.append(
            f"<h2>Under a fleet default ({len(under_default)} keys)</h2><p>Tenants whose own recommendation is at or "
            "below the <code>&lt;default&gt;</code> entry of their type: no entry of their own, so the default applies "
            "(<code>--no-fleet-default</code> writes their own).</p>"
        )
        cells = ("key", "own", "default", "rests_on")
        table = [[" ".join(f"{k}={v}" for k, v in r["entity"].items()), *(r[c] for c in cells)] for r in under_default]
        parts.append(_table(["entity", "key", "its own", "the default", "its own rests on"], table))
    if changes is not None:
        parts.append(_changes_section(changes))
    if replayed is not None:
        parts.append(_replay_section(replayed))
    parts.append("</body></html>\n")
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(parts))


OFFENDER_MADS = "offender fence (MADs)"  # the summary's row: Rules.offender_mads


def _outliers_section(outliers: Sequence[Outlier], fence: float | None) -> str:
    fence = recommend.Rules.offender_mads if fence is None else fence
    head = (
        f"<h2>Offenders: far from their fleet ({len(outliers)})</h2><p>Per quota key, each entity's own "
        f"recommendation (its figure) against its fleet's: more than {fence:g} MADs above the fleet's median on the log "
        "scale is an offender, held to the fleet's figure, not its own; <code>--legitimate ENTITY</code> keeps an "
        'entity\'s own figure where its heavy use is legitimate (analytics/README.md, "Offenders").</p>'
    )
    if not outliers:
        return head + "<p>None in this log.</p>"
    rows = [
        [entity_flag(o.entity), o.key, o.figure, o.median, round(o.figure / o.median), round(o.mads, 1), o.fleet]
        + [o.recommended, "kept: --legitimate" if o.legitimate else "held to the fleet's figure"]
        for o in outliers
    ]
    columns = ["its figure", "fleet median", "x median", "MADs", "fleet", "recommended", ""]
    return head + _table(["entity", "key", *columns], rows)


REPLAY_COLUMNS = (
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


def _changes_section(changes: ChangeSet) -> str:
    head = (
        f"<h2>Change set against the table in force ({html.escape(changes.counts())})</h2><p>The table in force: "
        f"{html.escape(changes.in_force.source)}. What to change to reach the recommended table; "
        "<code>recommended-commands.txt</code> applies exactly these. Held seconds: the replay of the logged demand "
        "under the table in force (today) and the table after the change, summed over the tenants each line's entry "
        f"governs under either (byte rates only). A tenant held {MOSTLY_HELD:.0%} of the log or more was free too "
        "little for its demand to show: the held time after the change is then a lower bound (the last column).</p>"
    )
    rows = [
        [
            c.action,
            " ".join(f"{k}={v}" for k, v in c.entity.items()),
            c.key,
            c.before,
            c.after,
            c.held_today_s,
            c.held_after_s,
            c.tenants if c.held_today_s is not None else None,
            origin_text(c.origin),
            c.rests_on,
            "; ".join(u.text() for u in c.unseen),
        ]
        for c in changes.changes
    ]
    columns = [
        "in force",
        "recommended",
        "held today (s)",
        "held after (s)",
        "tenants",
        "set in",
        "rests on",
        "demand the log cannot show",
    ]
    table = _table(["change", "entity", "key", *columns], rows) if rows else "<p>Nothing to change.</p>"
    kept = [[" ".join(f"{k}={v}" for k, v in e.items()), key, value, why] for e, key, value, why in changes.kept]
    if kept:
        table += f"<h3>Kept as they are ({len(kept)})</h3>" + _table(["entity", "key", "in force", "why"], kept)
    return head + table


def _replay_section(replayed: Mapping) -> str:
    rows = replayed["rows"]
    today = f"the table in force ({replayed['today']})" if replayed.get("today") else "the quota in force in the log"
    head = (
        f"<h2>Replay under {html.escape(str(replayed['candidate']))}</h2><p>The logged demand (what each tenant "
        "sent, and where it was held, the demand the throttle hid) run through the proxy's own byte-rate quota "
        f"under {html.escape(today)} (today) and under the candidate: how many intervals each tenant "
        f"would have been held in, how many throttles, how many seconds held. {len(rows)} tenants held under "
        f"either table or whose quota changes. A tenant held {MOSTLY_HELD:.0%} of the log or more was free too little "
        "for its demand to show: its figures under a higher quota are lower bounds (the last column).</p>"
    )
    unseen = replayed.get("unseen", {})
    cells = [
        [entity_label(r), r["api"], *(r[c] for c in REPLAY_COLUMNS)]
        + ["; ".join(u.said() for m in replay_members(r) if (u := unseen.get((*m, r["api"]))) is not None)]
        for r in rows
    ]
    return head + _table(["entity", "api", *REPLAY_COLUMNS, "demand the log cannot show"], cells)


def chart_file(out_dir: str, name: str) -> tuple[str, str]:
    rel = f"chart-{name}.svg"
    return rel, os.path.join(out_dir, rel)


SUMMARY_HELD_N = 5  # the command's output names this many recommendations constrained by the current quota
SUMMARY_CHANGES_N = 10  # ... and this many changes of the change set
SUMMARY_OUTLIERS_N = 10  # ... and this many outliers, the farthest from their fleet first


def summary_lines(result: Mapping) -> list[str]:
    lines = [
        f"read {result['records']:,} records; {result['quota items']} quota recommendations in {result['seconds']} s",
        *result["scope_lines"],
    ]
    held = [
        (entity, key, text)
        for entity, said in result.get("basis", {}).items()
        for key, text in said.items()
        if text.startswith("constrained")
    ]
    for entity, key, text in sorted(held, key=str)[:SUMMARY_HELD_N]:
        item: dict = next((it for it in result["quotas"] if recommend.entity_id(it["entity"]) == entity), {})
        named = {name.replace("-", "_"): value for name, value in entity}
        lines.append(f"{entity_label(named)} {key} {item.get(key)}: {text}")
    if len(held) > SUMMARY_HELD_N:
        lines.append(
            f"... {len(held) - SUMMARY_HELD_N} more recommendations constrained by the current quota (report.html)"
        )
    found = sorted(result.get("outliers", ()), key=lambda o: -o.mads)  # the farthest first
    for o in found[:SUMMARY_OUTLIERS_N]:
        verdict = "kept at its own: --legitimate" if o.legitimate else "held to the fleet's figure"
        lines.append(f"{'outlier' if o.legitimate else 'offender'} {entity_flag(o.entity)} {o.key}: {o.evidence()}")
        lines[-1] += f"; recommended {recommend.figure_text(o.recommended)}, {verdict}"
    if len(found) > SUMMARY_OUTLIERS_N:
        lines.append(f'... {len(found) - SUMMARY_OUTLIERS_N} more outliers (report.html, "Offenders")')
    changes = result.get("changes")
    if changes is not None:
        lines.append(f"change set against {changes.in_force.source}: {changes.counts()}")
        lines += [c.line() for c in changes.changes[:SUMMARY_CHANGES_N]]
        if len(changes.changes) > SUMMARY_CHANGES_N:
            lines.append(f"... {len(changes.changes) - SUMMARY_CHANGES_N} more changes (report.html)")
    replayed = result.get("replay")
    if replayed is not None:
        rows = replayed["rows"]
        today = [r for r in rows if r["today_held_s"]]
        candidate = [r for r in rows if r["candidate_held_s"]]
        lines.append(
            f"replay under {replayed['candidate']}: {len(today)} tenant APIs held under today's quotas "
            f"({sum(r['today_held_s'] for r in today):,.0f} s), {len(candidate)} under the candidate "
            f"({sum(r['candidate_held_s'] for r in candidate):,.0f} s); per tenant in report.html"
        )
    return lines + [
        f"wrote {result['local_dir']}/report.html, recommended-quotas.yaml, "
        f"recommended-commands.txt, top_offenders.json; tables under {result['output_dir']}"
    ]
