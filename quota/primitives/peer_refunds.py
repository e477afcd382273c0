"""What a peer may give back: at most what it charged (issue 44, T8). Pure: ``now_ms`` is passed in.

Two kinds of shared usage are signed: controller mutations (net of KIP-599's refunds: a peer that charged a
CreateTopics at admission gives back the topics the broker did not create) and new producer ids (a held id whose
clients left is given back). Both are given back soon after they were charged: a refund follows the broker's answer,
an abandoned hold ends within ``producer.id.quota.max.hold.ms``; and both travel a sync or two later. A record
written straight to the usage topic with a large negative value, from a made-up peer or a real one, would otherwise
hand a tenant that many tokens: its ``controller_mutation_rate`` or ``producer_ids_rate`` passed at will.

So each receiver keeps, per peer and entity, what that peer charged within the refund's reach (:data:`REFUND_REACH_MS`
to twice that: two generations, the older dropped every reach, as :mod:`quota.primitives.debt_sketch` decays), and a
refund is taken only up to what is left of it; the rest is refused and counted (:attr:`PeerRefunds.refused` tokens,
:attr:`PeerRefunds.refused_records` entries). A refund that comes later than the reach is refused: stricter, never
looser (the bucket refills at its rate meanwhile anyway). The entries are bounded (``max_entries`` per generation):
past them a charge is not remembered, and a refund of it is refused.
"""

from __future__ import annotations

from collections.abc import Hashable

REFUND_REACH_MS = 60_000
"""How long after a peer's charge its refund is taken (at least; at most twice): a CreateTopics' answer (a client's
``request.timeout.ms``, 30 s by default) or a hold's end (10 s by default), plus the syncs it travels."""

DEFAULT_MAX_ENTRIES = 100_000
"""Charges remembered per generation (``(peer, entity)`` pairs: about 20 MiB at most for both)."""


class PeerRefunds:
    """Per ``(peer, entity)``, what the peer charged in the last one to two reaches, less what it gave back."""

    __slots__ = ("reach_ms", "max_entries", "refused", "refused_records", "_current", "_previous", "_started_ms")

    def __init__(self, reach_ms: int = REFUND_REACH_MS, max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        if reach_ms < 1:
            raise ValueError(f"reach_ms must be at least 1, got {reach_ms}")
        self.reach_ms, self.max_entries = reach_ms, max_entries
        self.refused = 0.0  # tokens peers tried to give back beyond what they charged
        self.refused_records = 0  # peer entries whose refund was cut (to what they charged, or to nothing)
        self._current: dict[tuple[str, Hashable], float] = {}
        self._previous: dict[tuple[str, Hashable], float] = {}
        self._started_ms: int | None = None

    def judge(self, peer: str, entity: Hashable, value: float, now_ms: int) -> float:
        """``peer``'s net usage ``value`` of ``entity``: a charge (``value`` >= 0) is remembered and returned as it
        is; a refund is returned cut to what ``peer`` charged ``entity`` within the reach and has not given back."""
        self._rotate(now_ms)
        key = (peer, entity)
        current = self._current
        if value >= 0:
            if value > 0 and (key in current or len(current) < self.max_entries):
                current[key] = current.get(key, 0.0) + value
            return value
        wanted = -value
        given = 0.0
        for generation in (self._previous, current):  # the oldest charges first: they leave the reach first
            left = generation.get(key, 0.0)
            if left <= 0:
                continue
            part = min(left, wanted - given)
            given += part
            if part >= left:
                del generation[key]
            else:
                generation[key] = left - part
            if given >= wanted:
                break
        if given < wanted:
            self.refused += wanted - given
            self.refused_records += 1
        return -given

    def _rotate(self, now_ms: int) -> None:
        started = self._started_ms
        if started is None:
            self._started_ms = now_ms
        elif now_ms - started >= 2 * self.reach_ms:  # nothing for two reaches: both forgotten
            self._current, self._previous, self._started_ms = {}, {}, now_ms
        elif now_ms - started >= self.reach_ms:
            self._previous, self._current = self._current, {}
            self._started_ms = started + self.reach_ms

    def __len__(self) -> int:
        return len(self._current) + len(self._previous)
