"""The report's time axes and summary fit the log they show (issue 22): a one-minute log's charts run over its
60 seconds with ticks in seconds, a day's over 24 hours with ticks in hours, a log of one interval over that
interval (not two years around one point), and the summary's log span agrees with its start, end and intervals,
apart from the planner's own run time.

The job runs on logs from :mod:`analytics.generate`; the checks read report.html and the SVG charts it links.
"""

import re
import xml.etree.ElementTree as ET

import pytest

pytest.importorskip("pyspark", reason="the analytics extra (pip install kafka-quota-proxy[analytics]) is not installed")

from analytics import job  # noqa: E402
from analytics.generate import START_TIME, Options, write_log
from analytics.timeaxis import TimeAxis

# Each test runs the planner once: 25-30 s on a busy 2-core machine, past the suite's 120 s on a saturated one (a
# CI-like `make test` cut the day-long log's job at 120 s, and the shared session with it). As in test_job.py.
pytestmark = pytest.mark.timeout(600)

SVG = "{http://www.w3.org/2000/svg}"
XLINK = "{http://www.w3.org/1999/xlink}href"


def run_job(spark, tmp_path, options):
    write_log(str(tmp_path / "usage"), options)
    out = tmp_path / "plan"
    job.run(str(tmp_path / "usage"), str(out), spark=spark)
    return out


def summary(out) -> dict:
    """The report's first table, as {row name: text}."""
    html = (out / "report.html").read_text()
    table = re.search(r"<table>(.*?)</table>", html).group(1)
    return dict(re.findall(r"<tr><td>(.*?)</td><td>(.*?)</td></tr>", table))


def charts(out) -> list:
    html = (out / "report.html").read_text()
    names = re.findall(r"<img src='(chart-[\w-]+\.svg)'", html)
    assert len(names) == 5, names
    return [ET.parse(out / name).getroot() for name in names]


def group(root, gid):
    found = root.find(f".//{SVG}g[@id='{gid}']")
    assert found is not None, gid
    return found


def path_xs(d: str) -> list[float]:
    return [float(x) for x in re.findall(r"[ML] ([-\d.]+) [-\d.]+", d)]


def x_axis(root):
    """(left, right) of the plot area in SVG units, and the x ticks as [(svg x, label)]."""
    xs = path_xs(group(root, "plot-area").find(f"{SVG}path").get("d"))
    ticks = []
    for g in root.iter(f"{SVG}g"):
        if re.fullmatch(r"xtick_\d+", g.get("id", "")):
            text = g.find(f".//{SVG}text")
            x = text.get("x") or re.match(r"translate\(([-\d.]+)", text.get("transform")).group(1)
            ticks.append((float(x), text.text))
    return (min(xs), max(xs)), sorted(ticks)


def points_x(root) -> list[float]:
    """The x of every point drawn (the markers of every series)."""
    xs = []
    for g in root.iter(f"{SVG}g"):
        if re.fullmatch(r"series-\d+", g.get("id", "")):
            xs += [float(u.get("x")) for u in g.iter(f"{SVG}use")]
    assert xs
    return xs


def axis_range(root, unit):
    """The values at the plot area's left and right edges, from the ticks' positions and labels in ``unit``
    (every tick label must be ``<number> <unit>``), the ticks' values, and the points' values."""
    (left, right), ticks = x_axis(root)
    values = []
    for x, label in ticks:
        number, tick_unit = label.split(" ")
        assert tick_unit == unit, label
        values.append((x, float(number)))
    (x0, v0), (x1, v1) = values[0], values[-1]
    per_px = (v1 - v0) / (x1 - x0)
    at = lambda x: round(v0 + (x - x0) * per_px, 6)  # noqa: E731
    return at(left), at(right), [v for _, v in values], {at(x) for x in points_x(root)}


@pytest.mark.parametrize(
    "span_s, unit, ticks",
    [
        (1, "s", [0, 0.2, 0.4, 0.6, 0.8, 1]),
        (60, "s", [0, 10, 20, 30, 40, 50, 60]),
        (3600, "min", [0, 10, 20, 30, 40, 50, 60]),
        (86400, "h", [0, 3, 6, 9, 12, 15, 18, 21, 24]),
        (7 * 86400, "d", [0, 1, 2, 3, 4, 5, 6, 7]),
        (0, "s", [0, 0.2, 0.4, 0.6, 0.8, 1]),
    ],
)
def test_the_axis_unit_and_ticks_fit_the_span(span_s, unit, ticks):
    axis = TimeAxis.for_span(START_TIME, START_TIME + span_s)
    assert (axis.unit, axis.ticks()) == (unit, ticks)
    assert axis.x(START_TIME) == 0 and axis.span == ticks[-1]


def test_a_one_minute_log(spark, tmp_path):
    out = run_job(spark, tmp_path, Options(entities=4, intervals=6, interval_s=10.0, seed=3))
    rows = summary(out)
    assert (rows["log start (UTC)"], rows["log end (UTC)"]) == ("2026-01-01 00:00:00", "2026-01-01 00:01:00")
    assert (rows["log span"], rows["intervals"], rows["interval length"]) == ("60 s", "6", "10 s")
    assert re.fullmatch(r"[\d.]+ s|\d+ min \d+ s", rows[job.JOB_TIME])
    assert "seconds" not in rows and "time span (UTC)" not in rows
    drawn = set()
    for root in charts(out):
        start, end, ticks, points = axis_range(root, "s")
        assert (start, end, ticks) == (0, 60, [0, 10, 20, 30, 40, 50, 60])
        drawn |= points
    assert drawn == {10, 20, 30, 40, 50, 60}  # each interval at its end: the last one on the axis's end


def test_a_log_of_one_interval(spark, tmp_path):
    """Every entity in one 60 s interval, so every chart's points share one time: the axis is still that minute."""
    out = run_job(spark, tmp_path, Options(entities=2, intervals=1, interval_s=60.0, seed=3))
    rows = summary(out)
    assert (rows["log span"], rows["intervals"], rows["interval length"]) == ("60 s", "1", "60 s")
    for root in charts(out):
        start, end, ticks, points = axis_range(root, "s")
        assert (start, end, ticks[-1], points) == (0, 60, 60, {60})


def test_a_day_long_log(spark, tmp_path):
    # without the generator's throttled tenants, whose day of requests it simulates through the quota one by one
    # (a million of them: 39 of the test's 49 CPU-seconds, for axes they do not change)
    out = run_job(spark, tmp_path, Options(entities=1, intervals=1440, interval_s=60.0, seed=3, throttled=False))
    rows = summary(out)
    assert (rows["log start (UTC)"], rows["log end (UTC)"]) == ("2026-01-01 00:00:00", "2026-01-02 00:00:00")
    assert (rows["log span"], rows["intervals"], rows["interval length"]) == ("24 h 0 min", "1,440", "60 s")
    drawn = set()
    for root in charts(out):
        start, end, ticks, points = axis_range(root, "h")
        assert (start, end, ticks) == (0, 24, [0, 3, 6, 9, 12, 15, 18, 21, 24])
        drawn |= points
    assert min(drawn) == pytest.approx(1 / 60, abs=1e-3) and max(drawn) == 24
