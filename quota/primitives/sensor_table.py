"""The live sensors of one quota manager, by their tags, ordered so that idle ones are found first. Pure.

Kafka drops a quota sensor after an hour without a record (``INACTIVE_SENSOR_EXPIRATION_TIME_SECONDS``), from a task
that runs every 30 s, so a sensor goes between one hour and one hour and 30 s after its last record. Here the table
is kept roughly oldest-first so expiry looks at the front only: a sensor goes to the back when it is made, and when
a record finds that it was last moved :attr:`SensorTable.step_ms` ago or more (the expiration / :data:`MOVE_STEPS`,
30 s of the hour). Most records move nothing: moving a sensor relinks it between two neighbours of its own, which
at a million tenants are two more places in memory a decision would touch (each a cache miss).

What the order guarantees: the sensors' move times only grow from front to back, and each one's last record is less
than a step after its move time. So when the front sensor was moved within the expiration, no sensor is idle past
it and expiry stops there; a front sensor moved longer ago but recorded since is passed over (it expires within a
step, or moves at its next record). Expiry is exact (a sensor idle for more than the expiration is dropped, no other)
except when :data:`SKIP_MAX` or more such sensors are ahead of an idle one in a call given a ``limit``: then the
idle one goes in a later call, at most a step late, as with Kafka's 30 s task.

A dict never gives back the room of entries deleted from it: once the table holds a sixteenth of the most it held
(:data:`COMPACT_BELOW`), it is copied into one of its size.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, TypeVar

from quota.primitives.entity import QuotaTags
from quota.primitives.reach import Reach
from quota.primitives.sensor import ClientSensors

COMPACT_BELOW = 16
"""A sensor table is compacted when it holds no more than 1/COMPACT_BELOW of the most it held."""

MOVE_STEPS = 120
"""A record moves its sensor to the back at most once per ``expiration / MOVE_STEPS`` (30 s of an hour)."""

SKIP_MAX = 16
"""Sensors recorded since their last move that one expiry call with a ``limit`` passes over before it gives up."""

NEVER = float("inf")
S = TypeVar("S", bound=ClientSensors)  # the sensors kept: ClientSensors, or a subclass


class SensorTable(Generic[S]):
    """``sensors``: tags -> sensors (their ``tags``, ``representative``, ``last_record_ms`` and ``moved_ms`` read
    here), in the order above; ``reach``: what a changed quota entity can reach (:mod:`quota.primitives.reach`)."""

    __slots__ = ("sensors", "reach", "expiration_ms", "step_ms", "due_ms", "_high")

    def __init__(self, expiration_ms: int) -> None:
        self.sensors: OrderedDict[QuotaTags, S] = OrderedDict()
        self.reach = Reach()  # the sensors by their representative
        self.expiration_ms = expiration_ms
        self.step_ms = max(1, expiration_ms // MOVE_STEPS)
        self.due_ms: float = NEVER  # no sensor can be idle past the expiration at or before this time
        self._high = 0  # the most sensors held since the table was last compacted

    def add(self, sensors: S, now_ms: int) -> None:
        """A new sensor, at the back."""
        sensors.moved_ms = now_ms
        if not self.sensors:
            self.due_ms = now_ms + self.expiration_ms
        self.sensors[sensors.tags] = sensors
        self.reach.add(sensors.representative, sensors.tags)
        if len(self.sensors) > self._high:
            self._high = len(self.sensors)

    def touch(self, sensors: S, now_ms: int) -> None:
        """A record of ``sensors`` at ``now_ms`` is coming: to the back if it was last moved a step ago or more."""
        if now_ms - sensors.moved_ms >= self.step_ms:
            self.sensors.move_to_end(sensors.tags)
            sensors.moved_ms = now_ms

    def represent(self, sensors: S, representative: tuple[str, str]) -> None:
        """``representative`` is counted in ``sensors`` now (their quota is re-resolved through it)."""
        if sensors.representative != representative:
            self.reach.remove(sensors.representative, sensors.tags)
            sensors.representative = sensors.tags if representative == sensors.tags else representative
            self.reach.add(sensors.representative, sensors.tags)

    def expire(self, now_ms: int, limit: int | None = None) -> int:
        """Drop the sensors with no record for longer than the expiration (at most ``limit``, from the front);
        returns how many were dropped."""
        cutoff = now_ms - self.expiration_ms  # idle past the expiration: last record before this
        idle: list[S] = []
        skipped = 0
        due = NEVER  # the earliest last record or move time of what is left, as far as this call can tell
        for sensors in self.sensors.values():
            if sensors.moved_ms >= cutoff:  # and so is every one behind it: none of them idle
                due = min(due, sensors.moved_ms)
                break
            if limit is not None and (len(idle) >= limit or skipped >= SKIP_MAX):
                due = -NEVER  # more to look at in the next call
                break
            if sensors.last_record_ms < cutoff:
                idle.append(sensors)
            else:  # recorded since it was moved: expires within a step, or moves at its next record
                skipped += 1
                due = min(due, sensors.last_record_ms)
        for sensors in idle:
            del self.sensors[sensors.tags]
            self.reach.remove(sensors.representative, sensors.tags)
        if idle and len(self.sensors) <= self._high // COMPACT_BELOW:
            self._compact()
        self.due_ms = due + self.expiration_ms
        return len(idle)

    def evict(self, now_ms: int, scan: int) -> S | None:
        """Room for one more in a full table: the first of the front ``scan`` sensors with no record since it was
        last moved (made and never used again, or idle) is dropped, and returned; those before it, recorded since,
        go to the back (a second chance, as the CLOCK algorithm gives). None of them: the front one goes."""
        sensors = self.sensors
        if not sensors:
            return None
        for _ in range(min(scan, len(sensors))):
            tags, front = next(iter(sensors.items()))
            if front.last_record_ms <= front.moved_ms:
                break
            sensors.move_to_end(tags)
            front.moved_ms = now_ms
        else:
            tags, front = next(iter(sensors.items()))
        del sensors[tags]
        self.reach.remove(front.representative, tags)
        return front

    def _compact(self) -> None:
        """A copy of at most 1/16 of the highest: the tables of a million expired tenants, about 110 MiB, are
        returned."""
        self.sensors = OrderedDict(self.sensors)  # one reference swapped: a scrape's snapshot reads either
        self.reach.compact()
        self._high = len(self.sensors)

    def __len__(self) -> int:
        return len(self.sensors)
