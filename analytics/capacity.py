"""How much of the brokers' capacity the recommended table could commit at once. Pure Python, no Spark.

``--capacity bytes_in=...,bytes_out=...,partitions=...,connections=...`` names what the brokers take:

- ``bytes_in``, ``bytes_out``: bytes per second in (Produce) and out (Fetch), against ``producer_byte_rate`` and
  ``consumer_byte_rate``. Under quota.scope broker these quotas are per broker, so the capacity is one broker's;
  under cluster, the cluster's.
- ``partitions``: partition mutations per second the controller takes, against ``controller_mutation_rate``.
- ``connections``: new connections per second, against ``connection_creation_rate`` (per IP).

A table commits, in one interval of the log, the sum of the limits (as the proxy resolves them, Kafka's eight levels)
of the tenants active in that interval: that is the log's own concurrency, not the sum of every entry (which counts
tenants never active together, and counts a ``<default>`` once however many tenants it covers). The figure is the
busiest interval's (:func:`assess`). Above the capacity the table oversubscribes it: said, and with ``scale`` every
limit of that key is scaled by ``capacity / committed``, rounded down to two significant digits (:func:`scaled`),
so the busiest interval then fits.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_FLOOR, Decimal

from analytics.recommend import MIN_RATE, figure_text

# capacity name -> (the log's activity it is committed by, the quota key, unit)
DIMENSIONS = {
    "bytes_in": ("Produce", "producer_byte_rate", "B/s"),
    "bytes_out": ("Fetch", "consumer_byte_rate", "B/s"),
    "partitions": ("*", "controller_mutation_rate", "partition mutations/s"),
    "connections": ("ip", "connection_creation_rate", "new connections/s"),
}
Interval = tuple[float, float, int, int]  # (end time, committed, tenants active, of them with no quota of the key)


def parse_capacity(text: str) -> dict[str, float]:
    """``bytes_in=500e6,connections=200``: each name of :data:`DIMENSIONS` at most once, a positive number. Raises
    ValueError saying what is wrong."""
    out: dict[str, float] = {}
    for part in text.split(","):
        name, sep, value = part.strip().partition("=")
        if not sep or name not in DIMENSIONS:
            raise ValueError(f"{part.strip()!r}: a capacity is NAME=NUMBER, NAME one of {', '.join(DIMENSIONS)}")
        if name in out:
            raise ValueError(f"{name} given twice")
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if not 0 < number < math.inf:
            raise ValueError(f"{name}={value!r}: a positive number")
        out[name] = number
    return out


@dataclass(frozen=True)
class Commitment:
    name: str  # a key of DIMENSIONS
    capacity: float | None
    committed: float  # the busiest interval's sum of the active tenants' limits (math.inf: one had none)
    at: float | None  # that interval's end (epoch s)
    active: int  # tenants active in it
    unbounded: int  # of them, with no quota of the key
    every_entry: float  # each tenant seen counted once, active together or not: the naive sum

    @property
    def share(self) -> float | None:
        return None if self.capacity is None else self.committed / self.capacity

    @property
    def oversubscribed(self) -> bool:
        return self.capacity is not None and self.committed > self.capacity

    @property
    def factor(self) -> float | None:
        """``capacity / committed`` when oversubscribed by bounded limits, else None."""
        if not self.oversubscribed or math.isinf(self.committed) or self.capacity is None:
            return None
        return self.capacity / self.committed

    def line(self) -> str:
        _, key, unit = DIMENSIONS[self.name]
        if self.at is None:
            return f"capacity {self.name}: no tenant active with {key} in the log"
        if self.unbounded:
            said = (
                f"capacity {self.name}: unbounded: {self.unbounded} of the {self.active} tenants active at once have "
                f"no {key} (add a <default>)"
            )
        else:
            every = (
                f"{figure_text(self.every_entry)} summed over every tenant"
                if math.isfinite(self.every_entry)
                else f"tenants with no {key} seen at other times"
            )
            tenants = f"{self.active} tenant{'s' if self.active > 1 else ''}"
            said = (
                f"capacity {self.name}: the table commits {figure_text(self.committed)} {unit} at once "
                f"({tenants} active in the busiest interval; {every})"
            )
        if self.capacity is None:
            return said
        said += f" of {figure_text(self.capacity)}"
        if not self.unbounded:
            said += f": {self.share:.0%}"
        return said + (": OVERSUBSCRIBED" if self.oversubscribed else "")


def assess(
    intervals: Mapping[str, Sequence[Interval]], every_entry: Mapping[str, float], capacity: Mapping[str, float]
) -> list[Commitment]:
    """Per capacity dimension (those given, or every one the log has activity for): the busiest interval's
    commitment (``intervals``: per dimension, one :data:`Interval` each, from the job)."""
    out = []
    for name in DIMENSIONS:
        rows = intervals.get(name, ())
        if name not in capacity and not rows:
            continue
        worst = max(rows, key=lambda r: (math.inf if r[3] else r[1], -r[0]), default=None)
        if worst is None:
            out.append(Commitment(name, capacity.get(name), 0.0, None, 0, 0, 0.0))
            continue
        committed = math.inf if worst[3] else worst[1]
        out.append(
            Commitment(name, capacity.get(name), committed, worst[0], worst[2], worst[3], every_entry.get(name, 0.0))
        )
    return out


def round_down(x: float, digits: int = 2) -> float:
    """``x`` rounded down to ``digits`` significant digits: 1,234,567 -> 1,200,000."""
    if not x > 0:
        return 0.0
    exact = Decimal(f"{x:.12g}")
    step = Decimal(1).scaleb(exact.adjusted() - (digits - 1))
    return float((exact / step).to_integral_value(rounding=ROUND_FLOOR) * step)


def scaled(items: Iterable[Mapping], commitments: Iterable[Commitment]) -> list[dict]:
    """``items`` with every limit of each oversubscribed key scaled down by its factor (byte rates stay whole)."""
    factors = {DIMENSIONS[c.name][1]: c.factor for c in commitments if c.factor is not None}
    out = []
    for item in items:
        new = dict(item)
        for key, factor in factors.items():
            if key in new:
                value = round_down(new[key] * factor)
                new[key] = max(1, int(value)) if isinstance(item[key], int) else max(MIN_RATE, value)
        out.append(new)
    return out


def scaled_note(commitments: Iterable[Commitment]) -> list[str]:
    """One line per key scaled, for the outputs' notes."""
    return [
        f"{DIMENSIONS[c.name][1]} scaled by {c.factor:.3f} (--capacity {c.name}={figure_text(c.capacity or 0)}, "
        f"committed {figure_text(c.committed)} at once): each limit x the factor, rounded down"
        for c in commitments
        if c.factor is not None
    ]
