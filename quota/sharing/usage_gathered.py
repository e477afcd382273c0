"""What a process gathered of its own usage over one sync (:class:`Gathered`), sent whole or, when a record has no
room for all of it, the entries that matter most first, the rest carried to the next sync (:class:`Leftover`):
usage is delayed this way, never dropped. Pure.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from itertools import chain
from operator import itemgetter
from typing import Any

from quota.primitives.entity import (
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_RATE,
    QuotaTags,
)
from quota.primitives.topic_quotas import (
    PARTITION_CONSUMER_BYTE_RATE,
    PARTITION_PRODUCER_BYTE_RATE,
    TOPIC_CONSUMER_BYTE_RATE,
    TOPIC_PRODUCER_BYTE_RATE,
)
from quota.sharing.usage_delta import MAX_PRODUCER_IDS_PER_USER, Rows, UsageDelta

KINDS = (
    ("produce", PRODUCER_BYTE_RATE),
    ("fetch", CONSUMER_BYTE_RATE),
    ("mutations", CONTROLLER_MUTATION_RATE),
    ("requests", REQUEST_RATE),
    ("topic_produce", TOPIC_PRODUCER_BYTE_RATE),
    ("topic_fetch", TOPIC_CONSUMER_BYTE_RATE),
    ("partition_produce", PARTITION_PRODUCER_BYTE_RATE),
    ("partition_fetch", PARTITION_CONSUMER_BYTE_RATE),
)
"""Each per-entity list of a :class:`UsageDelta` and the key its entries are gathered under (a tap's quota key; the
topic and partition quotas' are told under their own names: :class:`~quota.sharing.usage_share.TopicTap`)."""

Entry = list[Any]  # an entity's usage as gathered: [user, client_id, value, its quota's limit (None: unknown)]
PidEntry = list[Any]  # a user's new producer ids: [count (tokens), [ids]]
Values = dict[str, dict[QuotaTags, Entry]]  # quota key -> quota tags -> entry
Ranked = tuple[Any, Any, list[Any]]  # (quota key, tags, entry), or (None, user, pid entry) for producer ids
LeftoverRow = tuple[Any, Any, list[Any], float]  # a ranked entry and the value still to send


class Gathered:
    """What a tap gathered over one sync, with what ranks its entries when not all of them can be sent: new producer
    ids and mutation tokens first (token buckets: every token counts; few entities have them), by count; then byte
    rates by their usage as a share of their quota. An entry left out grows with every sync it waits, so it ranks
    higher and is sent in a later one."""

    __slots__ = ("source", "scope", "values", "pids", "listeners", "ips", "opened", "residuals", "_ranked")

    def __init__(
        self,
        source: str,
        scope: str,
        values: Values,
        pids: dict[str, PidEntry],
        listeners: dict[str, int],
        ips: dict[str, int],
        opened: dict[tuple[str, str], int],
    ) -> None:
        self.source, self.scope = source, scope
        self.values, self.pids = values, pids  # as the tap keeps them
        self.listeners, self.ips, self.opened = listeners, ips, opened
        self.residuals = Leftover()  # (quota key, tags, entry, what rounding took off) of the last top()
        self._ranked: list[Ranked] | None = None

    @classmethod
    def from_delta(cls, delta: UsageDelta) -> Gathered:
        """A delta as gathered usage, its quotas unknown (its byte rates then rank by their bytes)."""
        values: Values = {}
        for kind, quota_key in KINDS:
            rows = getattr(delta, kind)
            if rows:
                values[quota_key] = {
                    QuotaTags(user, client_id): [user, client_id, value, None] for user, client_id, value in rows
                }
        pids = {user: [count, list(ids)] for user, count, ids in delta.producer_ids}
        return cls(
            delta.source,
            delta.scope,
            values,
            pids,
            dict(delta.listeners),
            dict(delta.ips),
            {(kind, key): n for kind, key, n in delta.open_connections},
        )

    def leftover(self, sent: int) -> Leftover:
        """What the next sync is to send of this one's usage (:meth:`absorb`), once its first ``sent`` ranked entries
        were sent: the rest, and what rounding took off those sent; ``(quota key, tags, entry, value)``, with
        ``(None, user, [count, ids], 0)`` for producer ids. Usage is delayed this way, never dropped."""
        out = Leftover()
        if sent < self.entities:
            for key, tags, entry in self.ranked()[sent:]:
                out.add(key, tags, entry, entry[2] if key else 0)
        out.extend(self.residuals)
        return out

    def absorb(self, leftover: Iterable[LeftoverRow]) -> None:
        """Add an earlier sync's :meth:`leftover` to this one (a gathered value belongs to no tap: a thread may do
        it while the tap takes new usage)."""
        last_key: str | None = None
        per_key: dict[QuotaTags, Entry] = {}
        for quota_key, tags, entry, value in leftover:
            if quota_key is None:
                mine = self.pids.get(tags)
                if mine is None:
                    self.pids[tags] = [entry[0], list(entry[1])]
                else:
                    mine[0] += entry[0]
                    mine[1].extend(entry[1][: MAX_PRODUCER_IDS_PER_USER - len(mine[1])])
                continue
            if quota_key != last_key:
                last_key, per_key = quota_key, self.values.setdefault(quota_key, {})
            mine = per_key.get(tags)
            if mine is None:
                per_key[tags] = [entry[0], entry[1], value, entry[3]]
            else:
                mine[2] += value
        self._ranked = None

    def drop(self, quota_keys: Iterable[str]) -> None:
        """Leave the usage gathered under ``quota_keys`` out (a topic's, while a peer cannot read it): not sent,
        now or later."""
        for key in quota_keys:
            self.values.pop(key, None)
        self._ranked = None

    @property
    def entities(self) -> int:
        """The entries that :meth:`top` ranks (connection counts are always sent: few, and per process)."""
        return sum(len(per_key) for per_key in self.values.values()) + len(self.pids)

    def ranked(self) -> list[Ranked]:
        """Every entry as ``(quota key, tags, entry)`` (``(None, user, [count, ids])`` for producer ids), most
        wanted first."""
        if self._ranked is None:
            tokens: list[tuple[float, str | None, Any, list[Any]]] = [
                (max(abs(entry[0]), len(entry[1])), None, user, entry) for user, entry in self.pids.items()
            ]
            rates: list[tuple[float, str | None, Any, list[Any]]] = []
            for quota_key, per_key in self.values.items():
                if quota_key == CONTROLLER_MUTATION_RATE:
                    tokens += [(abs(e[2]), quota_key, tags, e) for tags, e in per_key.items()]
                else:
                    rates += [(_share(e), quota_key, tags, e) for tags, e in per_key.items()]
            tokens.sort(key=itemgetter(0), reverse=True)
            rates.sort(key=itemgetter(0), reverse=True)
            self._ranked = [item[1:] for item in chain(tokens, rates)]
        return self._ranked

    def top(self, n: int | None = None, coarse: bool = False) -> UsageDelta:
        """The first ``n`` ranked entries as a delta (all of them when ``n`` is None or not below
        :attr:`entities`), with every connection count; entries that came to nothing are left out. ``coarse``: byte
        counts cut to their two or three leading digits (what the rest compresses to is about half), what was cut
        kept in :attr:`residuals` for :meth:`leftover` (a fraction of a byte is dropped)."""
        chosen: Mapping[str, Iterable[tuple[QuotaTags, Entry]]]
        if n is None or n >= self.entities:
            chosen = {key: per_key.items() for key, per_key in self.values.items()}
            pids = self.pids
        else:
            picked: dict[str, list[tuple[QuotaTags, Entry]]] = {}
            chosen, pids = picked, {}
            for quota_key, tags, entry in self.ranked()[:n]:
                if quota_key is None:
                    pids[tags] = entry
                else:
                    picked.setdefault(quota_key, []).append((tags, entry))
        self.residuals = Leftover()
        rows = {}
        for quota_key, items in chosen.items():
            if coarse and quota_key != CONTROLLER_MUTATION_RATE:
                rows[quota_key] = self._coarse(quota_key, items)
            else:
                entries = [e for _, e in items if e[2]]
                rows[quota_key] = Rows([e[0] for e in entries], [e[1] for e in entries], [e[2] for e in entries])
        return UsageDelta(
            self.source,
            self.scope,
            produce=rows.get(PRODUCER_BYTE_RATE, ()),
            fetch=rows.get(CONSUMER_BYTE_RATE, ()),
            mutations=rows.get(CONTROLLER_MUTATION_RATE, ()),
            requests=rows.get(REQUEST_RATE, ()),
            topic_produce=rows.get(TOPIC_PRODUCER_BYTE_RATE, ()),
            topic_fetch=rows.get(TOPIC_CONSUMER_BYTE_RATE, ()),
            partition_produce=rows.get(PARTITION_PRODUCER_BYTE_RATE, ()),
            partition_fetch=rows.get(PARTITION_CONSUMER_BYTE_RATE, ()),
            producer_ids=tuple((user, count, tuple(ids)) for user, (count, ids) in pids.items() if count or ids),
            listeners=tuple((name, n) for name, n in self.listeners.items() if n),
            ips=tuple((ip, n) for ip, n in self.ips.items() if n),
            open_connections=tuple((kind, key, n) for (kind, key), n in self.opened.items()),
        )

    def _coarse(self, quota_key: str, items: Iterable[tuple[QuotaTags, Entry]]) -> Rows:
        """Byte counts cut to their two or three leading digits (an integer; others rounded to two significant
        digits): sent up to a tenth low, what was cut kept in :attr:`residuals` for the next sync. As columns, as
        the residuals are: no object per row (the garbage collector would walk 10^5 of them)."""
        users, client_ids, values = [], [], []
        residual = self.residuals.add
        for tags, e in items:
            value = e[2]
            if type(value) is int:
                cut = value % _STEPS[value.bit_length()] if value > 0 else 0
            elif -100 < value < 100:
                cut = 0
            else:
                cut = value - round(value, 2 - len(str(int(abs(value)))))
                if abs(cut) < 1:  # a fraction of a byte
                    cut, value = 0, value - cut
            if cut:
                residual(quota_key, tags, e, cut)
                value -= cut
            if value:
                users.append(e[0])
                client_ids.append(e[1])
                values.append(value)
        return Rows(users, client_ids, values)


class Leftover:
    """Usage a sync did not send, for the next one (:meth:`Gathered.leftover`, :meth:`Gathered.absorb`): rows of
    ``(quota key, tags, entry, value)`` kept as four columns, so that 10^5 of them (what rounding took off each
    byte count sent) are four lists, not 10^5 tuples for the garbage collector to walk. Iterates as its rows."""

    __slots__ = ("keys", "tags", "entries", "values")

    def __init__(self) -> None:
        self.keys: list[str | None] = []
        self.tags: list[Any] = []  # quota tags, or a user's name (producer ids)
        self.entries: list[list[Any]] = []
        self.values: list[float] = []

    def add(self, quota_key: str | None, tags: Any, entry: list[Any], value: float) -> None:
        self.keys.append(quota_key)
        self.tags.append(tags)
        self.entries.append(entry)
        self.values.append(value)

    def without(self, quota_keys: Iterable[str]) -> Leftover:
        """The rows not of ``quota_keys``."""
        dropped = frozenset(quota_keys)
        out = Leftover()
        for row in self:
            if row[0] not in dropped:
                out.add(*row)
        return out

    def extend(self, other: Leftover) -> None:
        self.keys += other.keys
        self.tags += other.tags
        self.entries += other.entries
        self.values += other.values

    @property
    def columns(self) -> tuple[list[str | None], list[Any], list[list[Any]], list[float]]:
        return self.keys, self.tags, self.entries, self.values

    def __iter__(self) -> Iterator[LeftoverRow]:
        return zip(self.keys, self.tags, self.entries, self.values)

    def __len__(self) -> int:
        return len(self.keys)


_STEPS = [10 ** max(0, int((bits - 1) * math.log10(2)) - 1) for bits in range(65)] + [1] * 1000
"""For a positive integer of n bits, the power of ten that leaves it its two or three leading digits (10 to 199)
once the rest is cut; above 64 bits nothing is cut."""


def _share(entry: Entry) -> float:
    """What ranks a byte-rate entry: its usage as a share of its quota (by its bytes when the quota is unknown)."""
    limit: float | None = entry[3]
    value: float = entry[2]
    if limit is None:
        return abs(value)
    return abs(value) / limit if limit else math.inf
