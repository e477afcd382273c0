"""One quota state across processes: the usage a process records for itself, gathered between syncs (a
:class:`UsageTap`), and the usage of its peers recorded into its own managers as remote usage
(:func:`record_remote`). Pure: no clock, no transport; see :mod:`quota.sharing.usage_delta` for what travels.

An entity's usage travels under its quota tags, the parts of ``(user, client_id)`` its quota entry is keyed by
(``("alice", "")`` for every client of alice under ``/users/alice`` or ``/users/<default>``): every client counted
in that sensor is in it, and the receiver resolves the tags to the same entry, since an entry more specific than
the one that gave them would have matched the clients too (an entry naming the empty user or client id aside).
Under user quotas no client id is sent at all.

Each manager has a ``tap`` (:data:`NO_TAP` unless usage is shared, so a single process pays one no-op call per
record). Remote usage goes into the same rates and buckets as local usage, at the receiver's ``now_ms``, so the
receiver's next decision for one of its own clients sees the total; it never decides anything by itself, and it is
not added to the receiver's own totals (``value_total``, new producer ids counted), so per-process counters still
add up to what clients did. A receiver's view lags the others' by at most one sync interval plus the transport.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from itertools import chain
from operator import itemgetter
from typing import TYPE_CHECKING

from quota.primitives.entity import CONSUMER_BYTE_RATE, CONTROLLER_MUTATION_RATE, PRODUCER_BYTE_RATE, QuotaTags
from quota.primitives.overflow import DEFAULT_MAX_TRACKED_ENTITIES, OVERFLOW
from quota.primitives.usage_tap import NoTap
from quota.sharing.usage_delta import MAX_PRODUCER_IDS_PER_USER, Rows, UsageDelta, columns

if TYPE_CHECKING:
    from quota.managers.client_quota import ClientQuotaManager
    from quota.managers.connection import ConnectionQuotas
    from quota.managers.mutation import ControllerMutationQuotaManager
    from quota.managers.producer_ids import ProducerIdQuotaManager


EAGER_SHARE = 0.05
"""An entity's unsent usage past this share of its quota per second (50 ms of it) asks for a sync now: a tenant
flat out is then overshooting by about this much per worker, whatever its clients' speed, not by what they send
in a whole sync interval."""


class UsageTap(NoTap):
    """The usage recorded locally since the last :meth:`take`, per entity; memory bounded by the entities active in
    one sync interval (and :data:`~quota.sharing.usage_delta.MAX_PRODUCER_IDS_PER_USER` ids per user)."""

    __slots__ = ("_values", "_pids", "_listeners", "_ips", "_open", "_wake", "_woken", "max_entities")

    def __init__(
        self, wake: Callable[[], None] | None = None, max_entities: int = DEFAULT_MAX_TRACKED_ENTITIES
    ) -> None:
        """``wake``: called (once until the next :meth:`take`) when one entity's unsent usage passes
        :data:`EAGER_SHARE` of its quota per second, so the owner can sync before its interval is up."""
        self._values: dict[str, dict[QuotaTags, list]] = {}  # quota key -> tags -> [user, client_id, value, limit]
        self._pids: dict[str, list] = {}  # user -> [count, [ids]]
        self._listeners: dict[str, int] = {}
        self._ips: dict[str, int] = {}
        self._open: dict[tuple[str, str], int] = {}  # the latest open counts that changed: (kind, key) -> n
        self._wake = wake
        self._woken = False
        # Entities told per quota and interval; past it, new names are told as one <overflow> entity (issue 44)
        self.max_entities = max_entities

    def add(
        self, quota_key: str, tags: QuotaTags, user: str, client_id: str, value: float, limit: float = math.inf
    ) -> None:
        per_key = self._values.get(quota_key)
        if per_key is None:
            per_key = self._values[quota_key] = {}
        entry = per_key.get(tags)
        if entry is None and len(per_key) >= self.max_entities:  # a flood of names: told as one, bounded
            tags = QuotaTags(OVERFLOW if tags.user else "", OVERFLOW if tags.client_id else "")
            entry = per_key.get(tags)
        if entry is None:  # named by its tags: a receiver resolves them to the entry that gave them (see below)
            entry = per_key[tags] = [tags.user, tags.client_id, value, limit]
        else:
            entry[2] += value
        if entry[2] > limit * EAGER_SHARE and not self._woken and self._wake is not None:
            self._woken = True
            self._wake()

    def producer_id(self, user: str, pid: int) -> None:
        entry = self._pids.get(user)
        if entry is None:
            entry = self._pids[user] = [0, []]
        entry[0] += 1
        if len(entry[1]) < MAX_PRODUCER_IDS_PER_USER:
            entry[1].append(pid)

    def producer_id_held(self, user: str) -> None:
        """A new id held: its token is taken from the peers' buckets too, but it is not sent as known (issue 35: a
        peer told a held id is known would let it through once the client abandons the hold here)."""
        entry = self._pids.get(user)
        if entry is None:
            entry = self._pids[user] = [0, []]
        entry[0] += 1

    def producer_id_admitted(self, user: str, pid: int) -> None:
        """A held id reached the broker: sent as known now, its token already counted."""
        entry = self._pids.get(user)
        if entry is None:
            entry = self._pids[user] = [0, []]
        if len(entry[1]) < MAX_PRODUCER_IDS_PER_USER:
            entry[1].append(pid)

    def producer_id_released(self, user: str, pid: int) -> None:
        """A held new id whose clients left (:meth:`ProducerIdQuotaManager.abandon`): its token goes back to the
        peers' buckets too (a count of -1); it was never sent as known."""
        entry = self._pids.get(user)
        if entry is None:
            entry = self._pids[user] = [0, []]
        entry[0] -= 1

    def listener(self, listener: str, n: int) -> None:
        self._listeners[listener] = self._listeners.get(listener, 0) + n

    def ip(self, ip: str, n: int) -> None:
        self._ips[ip] = self._ips.get(ip, 0) + n

    def open(self, counts) -> None:
        """Open-connection counts now, ``(kind, key, n)`` (:mod:`quota.primitives.peer_connections`): the latest of each is sent."""
        for kind, key, n in counts:
            self._open[(kind, key)] = n

    def take(self, source: str, scope: str = "") -> UsageDelta:
        """Everything gathered since the last call, as one delta for ``scope`` (entries that came to nothing left
        out); the tap starts empty again."""
        return self.gather(source, scope).top()

    def gather(self, source: str, scope: str = "") -> Gathered:
        """Everything gathered since the last call, to be sent whole or in part (:meth:`Gathered.top`; what is not
        sent is :meth:`Gathered.leftover`, added to the next one with :meth:`Gathered.absorb`); the tap starts empty
        again."""
        values, self._values = self._values, {}
        self._woken = False
        pids, self._pids = self._pids, {}
        listeners, self._listeners = self._listeners, {}
        ips, self._ips = self._ips, {}
        opened, self._open = self._open, {}
        return Gathered(source, scope, values, pids, listeners, ips, opened)


class Gathered:
    """What a tap gathered over one sync, with what ranks its entries when not all of them can be sent: new producer
    ids and mutation tokens first (token buckets: every token counts; few entities have them), by count; then byte
    rates by their usage as a share of their quota. An entry left out grows with every sync it waits, so it ranks
    higher and is sent in a later one."""

    __slots__ = ("source", "scope", "values", "pids", "listeners", "ips", "opened", "residuals", "_ranked")

    def __init__(self, source, scope, values, pids, listeners, ips, opened) -> None:
        self.source, self.scope = source, scope
        self.values, self.pids = values, pids  # as the tap keeps them
        self.listeners, self.ips, self.opened = listeners, ips, opened
        self.residuals = Leftover()  # (quota key, tags, entry, what rounding took off) of the last top()
        self._ranked: list | None = None

    @classmethod
    def from_delta(cls, delta: UsageDelta) -> Gathered:
        """A delta as gathered usage, its quotas unknown (its byte rates then rank by their bytes)."""
        values = {}
        for quota_key, rows in (
            (PRODUCER_BYTE_RATE, delta.produce),
            (CONSUMER_BYTE_RATE, delta.fetch),
            (CONTROLLER_MUTATION_RATE, delta.mutations),
        ):
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

    def absorb(self, leftover: Iterable[tuple]) -> None:
        """Add an earlier sync's :meth:`leftover` to this one (a gathered value belongs to no tap: a thread may do
        it while the tap takes new usage)."""
        last_key = per_key = None
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

    @property
    def entities(self) -> int:
        """The entries that :meth:`top` ranks (connection counts are always sent: few, and per process)."""
        return sum(len(per_key) for per_key in self.values.values()) + len(self.pids)

    def ranked(self) -> list[tuple]:
        """Every entry as ``(quota key, tags, entry)`` (``(None, user, [count, ids])`` for producer ids), most
        wanted first."""
        if self._ranked is None:
            tokens = [(max(abs(entry[0]), len(entry[1])), None, user, entry) for user, entry in self.pids.items()]
            rates = []
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
        if n is None or n >= self.entities:
            chosen = {key: per_key.items() for key, per_key in self.values.items()}
            pids = self.pids
        else:
            chosen, pids = {}, {}
            for quota_key, tags, entry in self.ranked()[:n]:
                if quota_key is None:
                    pids[tags] = entry
                else:
                    chosen.setdefault(quota_key, []).append((tags, entry))
        self.residuals = Leftover()
        rows = {}
        for quota_key, items in chosen.items():
            if coarse and quota_key != CONTROLLER_MUTATION_RATE:
                rows[quota_key] = self._coarse(quota_key, items)
            else:
                entries = [e for _, e in items if e[2]]
                rows[quota_key] = Rows([e[0] for e in entries], [e[1] for e in entries], [e[2] for e in entries])
        empty = ()
        return UsageDelta(
            source=self.source,
            scope=self.scope,
            produce=rows.get(PRODUCER_BYTE_RATE, empty),
            fetch=rows.get(CONSUMER_BYTE_RATE, empty),
            mutations=rows.get(CONTROLLER_MUTATION_RATE, empty),
            producer_ids=tuple((user, count, tuple(ids)) for user, (count, ids) in pids.items() if count or ids),
            listeners=tuple((name, n) for name, n in self.listeners.items() if n),
            ips=tuple((ip, n) for ip, n in self.ips.items() if n),
            open_connections=tuple((kind, key, n) for (kind, key), n in self.opened.items()),
        )

    def _coarse(self, quota_key: str, items) -> Rows:
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
        self.keys: list = []
        self.tags: list = []
        self.entries: list = []
        self.values: list = []

    def add(self, quota_key: str | None, tags, entry: list, value: float) -> None:
        self.keys.append(quota_key)
        self.tags.append(tags)
        self.entries.append(entry)
        self.values.append(value)

    def extend(self, other: Leftover) -> None:
        self.keys += other.keys
        self.tags += other.tags
        self.entries += other.entries
        self.values += other.values

    @property
    def columns(self) -> tuple[list, list, list, list]:
        return self.keys, self.tags, self.entries, self.values

    def __iter__(self) -> Iterator[tuple]:
        return zip(self.keys, self.tags, self.entries, self.values)

    def __len__(self) -> int:
        return len(self.keys)


_STEPS = [10 ** max(0, int((bits - 1) * math.log10(2)) - 1) for bits in range(65)] + [1] * 1000
"""For a positive integer of n bits, the power of ten that leaves it its two or three leading digits (10 to 199)
once the rest is cut; above 64 bits nothing is cut."""


def _share(entry: list) -> float:
    """What ranks a byte-rate entry: its usage as a share of its quota (by its bytes when the quota is unknown)."""
    limit = entry[3]
    if limit is None:
        return abs(entry[2])
    return abs(entry[2]) / limit if limit else math.inf


RECORD_STEP = 500
"""Remote entries recorded between two yields of :func:`record_remote_steps` (a few milliseconds of work)."""


def record_remote(
    delta: UsageDelta,
    now_ms: int,
    *,
    produce: ClientQuotaManager,
    fetch: ClientQuotaManager,
    mutations: ControllerMutationQuotaManager,
    producer_ids: ProducerIdQuotaManager,
    connections: ConnectionQuotas,
) -> None:
    """Record a peer's ``delta`` into this process's managers at ``now_ms`` (see the module docstring)."""
    for _ in record_remote_steps(
        delta,
        lambda: now_ms,
        produce=produce,
        fetch=fetch,
        mutations=mutations,
        producer_ids=producer_ids,
        connections=connections,
        step=None,
    ):
        pass


def record_remote_steps(
    delta: UsageDelta,
    now_ms: Callable[[], int],
    *,
    produce: ClientQuotaManager,
    fetch: ClientQuotaManager,
    mutations: ControllerMutationQuotaManager,
    producer_ids: ProducerIdQuotaManager,
    connections: ConnectionQuotas,
    step: int | None = RECORD_STEP,
) -> Iterator[int]:
    """:func:`record_remote` in steps of ``step`` entries, yielding the entries recorded so far after each, so the
    caller can let other work run in between (10^5 entities take about a second); ``now_ms`` is read at every step.
    ``step`` None: all at once."""
    done = 0
    now = now_ms()
    for entries, record in _pieces(delta, step, produce, fetch, mutations, producer_ids):
        record(now)
        done += entries
        if step is not None and done % step == 0:
            yield done
            now = now_ms()
    if delta.listeners or delta.ips:
        connections.record_remote(delta.listeners, delta.ips, now)
    if delta.open_connections:
        connections.peers.update(delta.source, delta.open_connections)
    yield done


def _pieces(
    delta: UsageDelta, step: int | None, produce, fetch, mutations, producer_ids
) -> Iterator[tuple[int, Callable[[int], None]]]:
    """The per-entity part of ``delta`` as ``(entries, record(now_ms))`` in order, none across a multiple of ``step``
    entries: byte-rate rows in runs of a peer's columns (sliced only at a step), each mutation row and producer-id user
    alone. Made as taken, so a slice is made only when its step comes."""
    done = 0
    for manager, rows in ((produce, delta.produce), (fetch, delta.fetch)):
        if not rows:
            continue
        users, client_ids, values = columns(rows)  # a decoded record's own columns
        at, n = 0, len(values)
        while at < n:
            end = n if step is None else min(n, at + step - done % step)
            if at == 0 and end == n:
                yield n, partial(manager.record_remote_rows, users, client_ids, values)
            else:
                yield end - at, partial(manager.record_remote_rows, users[at:end], client_ids[at:end], values[at:end])
            done += end - at
            at = end
    for user, client_id, value in delta.mutations:
        yield 1, partial(mutations.record_remote, user, client_id, value)
    for user, count, ids in delta.producer_ids:
        yield 1, partial(producer_ids.record_remote, user, count, ids)
