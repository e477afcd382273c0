"""What entities pushed out of a full table still owe (issue 44): a decaying count-min sketch. Pure.

A quota's table of entities is bounded (``quota.max.tracked.entities``). Once it is full, room for a new entity is
made by evicting one (:meth:`quota.primitives.sensor_table.SensorTable.evict`); when what the evicted one had used
of its quota (its *debt*) will have been paid off at its limit is put here under its tags, and an entity made again
(or a new one whose tags collide) starts owing what is left of it then. So an entity gains nothing by being evicted
and coming back, and a flood of new entities cannot wash a tenant's debt away.

A count-min sketch (Cormode and Muthukrishnan) of times, keeping maxima rather than sums: :data:`DEPTH` rows of
:data:`WIDTH` counters, each tags hashed to one counter per row, each counter the latest pay-off time put there; an
estimate is the least of its counters, never before the time last put for those tags (a collision can only make it
later, to a colliding entity's own at most). Times, because a debt shrinks as time passes (a bucket refills, a
window's samples leave it): an entity evicted twice carries what it owed at the last eviction, and owes less the
later it comes back. It decays by generations, as the producer-id quota's bloom filters do (KIP-936): what is added goes to the
current one; every ``period_ms`` (a quota window span) the previous one is dropped and the current one becomes it;
an estimate reads both. A debt is thus remembered for one to two window spans, as long as the sampled rate it came
from would have held it. Memory is fixed: 2 x DEPTH x WIDTH doubles (1 MiB), whatever the flood.
"""

from __future__ import annotations

from array import array

DEPTH = 4
WIDTH = 1 << 14
_MASK = WIDTH - 1


class DebtSketch:
    __slots__ = ("period_ms", "_current", "_previous", "_started_ms")

    def __init__(self, period_ms: int) -> None:
        if period_ms < 1:
            raise ValueError(f"period_ms must be at least 1, got {period_ms}")
        self.period_ms = period_ms
        self._current = array("d", bytes(8 * DEPTH * WIDTH))
        self._previous = array("d", bytes(8 * DEPTH * WIDTH))
        self._started_ms: int | None = None

    def _rotate(self, now_ms: int) -> None:
        started = self._started_ms
        if started is None:
            self._started_ms = now_ms
            return
        if now_ms - started < self.period_ms:
            return
        if now_ms - started < 2 * self.period_ms:
            self._previous, self._current = self._current, self._previous
            self._current[:] = array("d", bytes(8 * DEPTH * WIDTH))
            self._started_ms = started + self.period_ms
        else:  # nothing added for two periods: both forgotten
            self._current[:] = array("d", bytes(8 * DEPTH * WIDTH))
            self._previous[:] = array("d", bytes(8 * DEPTH * WIDTH))
            self._started_ms = now_ms

    @staticmethod
    def _slots(key: object) -> list[int]:
        h1 = hash(key)
        h2 = hash((key, DEPTH)) | 1
        return [row * WIDTH + ((h1 + row * h2) & _MASK) for row in range(DEPTH)]

    def add(self, key: object, paid_off_ms: float, now_ms: int) -> None:
        """``key`` (hashable: an entity's tags, an IP) owes what its limit pays off at ``paid_off_ms``."""
        if paid_off_ms <= now_ms:
            return
        self._rotate(now_ms)
        current = self._current
        for slot in self._slots(key):
            if current[slot] < paid_off_ms:
                current[slot] = paid_off_ms

    def remaining_ms(self, key: object, now_ms: int) -> float:
        """How long ``key``'s limit still takes to pay off its debt: at least what was put for it in the last one
        to two periods, less the time since."""
        self._rotate(now_ms)
        current, previous = self._current, self._previous
        return max(0.0, min(max(current[slot], previous[slot]) for slot in self._slots(key)) - now_ms)
