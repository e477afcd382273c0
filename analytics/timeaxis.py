"""The log's time span and the charts' time axis. Pure Python: no Spark, no matplotlib.

The log covers ``[start, end]``: from the start of its earliest interval (``min(time - interval_s)``) to the end of
its latest (``max(time)``). Every chart's x axis is exactly that span, whatever the points drawn on it, so a chart
whose entities appear in a single interval still shows the log's seconds, not years around one point. The axis
counts time since the log's start, in a unit that fits the span (seconds up to 3 minutes, minutes up to 3 hours,
hours up to 3 days, days beyond), with ticks at round steps of that unit.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from dataclasses import dataclass

# (unit, seconds in it, use it for spans up to this many seconds, tick steps in the unit)
UNITS = (
    ("s", 1.0, 180.0, (0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 20, 30)),
    ("min", 60.0, 3 * 3600.0, (1, 2, 5, 10, 15, 20, 30)),
    ("h", 3600.0, 3 * 86400.0, (1, 2, 3, 4, 6, 12)),
    ("d", 86400.0, math.inf, (1, 2, 5, 7, 14)),
)
MAX_STEPS = 8  # at most this many steps between ticks
MIN_SPAN_S = 1.0  # a log of zero length (or none) still gets a one-second axis


def utc(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def duration(seconds: float) -> str:
    """``59.6 s``, ``1 min 0 s``, ``2 h 5 min``, ``3 d 4 h``: a length of time in the two units that fit it."""
    if seconds < 120:
        return f"{seconds:.1f} s" if seconds != int(seconds) else f"{int(seconds)} s"
    s = round(seconds)
    if s < 2 * 3600:
        return f"{s // 60} min {s % 60} s"
    if s < 2 * 86400:
        return f"{s // 3600} h {s % 3600 // 60} min"
    return f"{s // 86400} d {s % 86400 // 3600} h"


@dataclass(frozen=True)
class TimeAxis:
    """The x axis of every chart: ``0`` is the log's start, ``span`` its end, both in ``unit``."""

    start: float  # epoch seconds
    end: float
    unit: str
    unit_s: float
    step: float  # between ticks, in the unit

    @classmethod
    def for_span(cls, start: float, end: float) -> TimeAxis:
        end = max(end, start + MIN_SPAN_S)
        length = end - start
        for unit, unit_s, up_to, steps in UNITS:  # noqa: B007 (the match is read after the loop)
            if length <= up_to:
                break
        span = length / unit_s
        step = next((s for s in steps if span / s <= MAX_STEPS), None)
        if step is None:  # beyond the unit's steps (only for days): a round power of ten
            step = 10 ** math.ceil(math.log10(span / MAX_STEPS))
        return cls(start, end, unit, unit_s, step)

    @property
    def span(self) -> float:
        return (self.end - self.start) / self.unit_s

    def x(self, t: float) -> float:
        """An epoch time on the axis."""
        return (t - self.start) / self.unit_s

    def ticks(self) -> list[float]:
        n = math.floor(self.span / self.step + 1e-9)
        return [round(k * self.step, 6) for k in range(n + 1)]

    def tick_label(self, value: float) -> str:
        return f"{value:g} {self.unit}"

    def label(self) -> str:
        return f"time since the log's start, {utc(self.start)} UTC (a point is an interval, at its end)"


def grid_s(log: Mapping) -> float:
    """The log's interval on the time grid (its longest, rounded to two significant digits as the grid rounds)."""
    longest = log.get("longest") or 0.0
    return float(f"{longest:.2g}") if longest > 0 else 0.0


def log_rows(log: Mapping) -> dict:
    """The summary's lines about the log. Its span is end minus start, the x range of every chart; the job's own
    run time is a separate line of the job's summary."""
    if log["start"] is None:
        return {"log": "empty"}
    shortest, longest = duration(log["shortest"]), duration(log["longest"])
    return {
        "log start (UTC)": utc(log["start"]),
        "log end (UTC)": utc(log["end"]),
        "log span": duration(log["end"] - log["start"]),
        "intervals": log["intervals"],
        "interval length": shortest if shortest == longest else f"{shortest} to {longest}",
    }
