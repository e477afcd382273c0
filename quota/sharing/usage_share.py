"""One quota state across processes, the sending half: the usage a process records for itself, gathered between
syncs (a :class:`UsageTap`, what :mod:`quota.sharing.usage_delta` carries to its peers; their half is
:mod:`quota.sharing.remote_usage`). Pure: no clock, no transport.

An entity's usage travels under its quota tags, the parts of ``(user, client_id)`` its quota entry is keyed by
(``("alice", "")`` for every client of alice under ``/users/alice`` or ``/users/<default>``): every client counted
in that sensor is in it, and the receiver resolves the tags to the same entry, since an entry more specific than
the one that gave them would have matched the clients too (an entry naming the empty user or client id aside).
Under user quotas no client id is sent at all.

Each manager has a ``tap`` (:data:`~quota.primitives.usage_tap.NO_TAP` unless usage is shared, so a single process
pays one no-op call per record); a process sharing its usage gives its managers a :class:`UsageTap`, and its topic
quota managers a :class:`TopicTap` of the same one (a topic's usage travels beside the client usage, issue 47).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping

from quota.primitives.entity import QuotaTags
from quota.primitives.overflow import DEFAULT_MAX_TRACKED_ENTITIES, OVERFLOW
from quota.primitives.peer_connections import OpenCount
from quota.primitives.topic_quotas import NAMES as TOPIC_NAMES
from quota.primitives.topic_quotas import PARTITION_NAMES
from quota.primitives.usage_tap import NoTap
from quota.sharing.usage_delta import MAX_PRODUCER_IDS_PER_USER, UsageDelta
from quota.sharing.usage_gathered import Gathered, PidEntry, Values

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
        self._values: Values = {}  # quota key -> tags -> [user, client_id, value, limit]
        self._pids: dict[str, PidEntry] = {}  # user -> [count, [ids]]
        self._listeners: dict[str, int] = {}
        self._ips: dict[str, int] = {}
        self._open: dict[tuple[str, str], int] = {}  # the latest open counts that changed: (kind, key) -> n
        self._wake = wake
        self._woken = False
        # Entities told per quota and interval; past it, new names are told as one <overflow> entity (issue 44)
        self.max_entities = max_entities

    def add(
        self,
        quota_key: str,
        tags: QuotaTags,
        user: str,
        client_id: str,
        value: float,
        limit: float = math.inf,
        *,
        keep_user: bool = False,
    ) -> None:
        """``keep_user``: past ``max_entities`` the entity is told as its user's ``<overflow>`` client (a partition
        quota's: the topic's ``<overflow>`` partition, counted under the topic's ``partition: <default>``)."""
        per_key = self._values.get(quota_key)
        if per_key is None:
            per_key = self._values[quota_key] = {}
        entry = per_key.get(tags)
        if entry is None and len(per_key) >= self.max_entities:  # a flood of names: told as one, bounded
            user_part = tags.user if keep_user else (OVERFLOW if tags.user else "")
            tags = QuotaTags(user_part, OVERFLOW if tags.client_id else "")
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

    def open(self, counts: Iterable[OpenCount]) -> None:
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


class TopicTap(NoTap):
    """A topic (or partition) quota manager's tap: what it records goes into ``tap`` under the quota's own name
    (``names``: ``topic_producer_byte_rate``, ``topic_consumer_byte_rate``; ``partition_...`` for a partition
    quota's), apart from the client quotas' entries of the same key; bounded there as they are (``max_entities`` per
    quota, then one ``<overflow>`` entity)."""

    __slots__ = ("tap", "names", "keep_user")

    def __init__(self, tap: UsageTap, names: Mapping[str, str] = TOPIC_NAMES, keep_user: bool = False) -> None:
        self.tap = tap
        self.names = names
        self.keep_user = keep_user  # past the bound, told as its user's <overflow> (a partition: its topic's)

    def add(
        self, quota_key: str, tags: QuotaTags, user: str, client_id: str, value: float, limit: float = math.inf
    ) -> None:
        self.tap.add(self.names[quota_key], tags, user, client_id, value, limit, keep_user=self.keep_user)


def partition_tap(tap: UsageTap) -> TopicTap:
    """A partition quota manager's tap: told under ``partition_producer_byte_rate`` and
    ``partition_consumer_byte_rate``, as ``(topic, partition)``; past the bound, as the topic's ``<overflow>``
    partition."""
    return TopicTap(tap, PARTITION_NAMES, keep_user=True)
