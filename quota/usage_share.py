"""One quota state across processes: the usage a process records for itself, gathered between syncs (a
:class:`UsageTap`), and the usage of its peers recorded into its own managers as remote usage
(:func:`record_remote`). Pure: no clock, no transport; see :mod:`quota.usage_delta` for what travels.

Each manager has a ``tap`` (:data:`NO_TAP` unless usage is shared, so a single process pays one no-op call per
record). Remote usage goes into the same rates and buckets as local usage, at the receiver's ``now_ms``, so the
receiver's next decision for one of its own clients sees the total; it never decides anything by itself, and it is
not added to the receiver's own totals (``value_total``, new producer ids counted), so per-process counters still
add up to what clients did. A receiver's view lags the others' by at most one sync interval plus the transport.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from quota.entity import CONSUMER_BYTE_RATE, CONTROLLER_MUTATION_RATE, PRODUCER_BYTE_RATE, QuotaTags
from quota.usage_delta import MAX_PRODUCER_IDS_PER_USER, UsageDelta
from quota.usage_tap import NoTap

if TYPE_CHECKING:
    from quota.client_quota import ClientQuotaManager
    from quota.connection import ConnectionQuotas
    from quota.mutation import ControllerMutationQuotaManager
    from quota.producer_ids import ProducerIdQuotaManager



EAGER_SHARE = 0.05
"""An entity's unsent usage past this share of its quota per second (50 ms of it) asks for a sync now: a tenant
flat out is then overshooting by about this much per worker, whatever its clients' speed, not by what they send
in a whole sync interval."""


class UsageTap(NoTap):
    """The usage recorded locally since the last :meth:`take`, per entity; memory bounded by the entities active in
    one sync interval (and :data:`~quota.usage_delta.MAX_PRODUCER_IDS_PER_USER` ids per user)."""

    __slots__ = ("_values", "_pids", "_listeners", "_ips", "_open", "_wake", "_woken")

    def __init__(self, wake: Callable[[], None] | None = None) -> None:
        """``wake``: called (once until the next :meth:`take`) when one entity's unsent usage passes
        :data:`EAGER_SHARE` of its quota per second, so the owner can sync before its interval is up."""
        self._values: dict[str, dict[QuotaTags, list]] = {}  # quota key -> tags -> [user, client_id, value]
        self._pids: dict[str, list] = {}  # user -> [count, [ids]]
        self._listeners: dict[str, int] = {}
        self._ips: dict[str, int] = {}
        self._open: dict[tuple[str, str], int] = {}  # the latest open counts that changed: (kind, key) -> n
        self._wake = wake
        self._woken = False

    def add(self, quota_key: str, tags: QuotaTags, user: str, client_id: str, value: float,
            limit: float = math.inf) -> None:
        per_key = self._values.get(quota_key)
        if per_key is None:
            per_key = self._values[quota_key] = {}
        entry = per_key.get(tags)
        if entry is None:
            entry = per_key[tags] = [user, client_id, value]
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

    def producer_id_released(self, user: str, pid: int) -> None:
        """A held new id whose clients left (:meth:`ProducerIdQuotaManager.abandon`): its token goes back to the
        peers' buckets too (a count of -1), and it is not sent as known if it has not been yet."""
        entry = self._pids.get(user)
        if entry is None:
            entry = self._pids[user] = [0, []]
        entry[0] -= 1
        if pid in entry[1]:
            entry[1].remove(pid)

    def listener(self, listener: str, n: int) -> None:
        self._listeners[listener] = self._listeners.get(listener, 0) + n

    def ip(self, ip: str, n: int) -> None:
        self._ips[ip] = self._ips.get(ip, 0) + n

    def open(self, counts) -> None:
        """Open-connection counts now, ``(kind, key, n)`` (:mod:`quota.peer_connections`): the latest of each is sent."""
        for kind, key, n in counts:
            self._open[(kind, key)] = n

    def take(self, source: str, scope: str = "") -> UsageDelta:
        """Everything gathered since the last call, as one delta for ``scope`` (entries that came to nothing left
        out); the tap starts empty again."""
        values, self._values = self._values, {}
        self._woken = False
        pids, self._pids = self._pids, {}
        listeners, self._listeners = self._listeners, {}
        ips, self._ips = self._ips, {}
        opened, self._open = self._open, {}

        def entities(key: str) -> tuple:
            return tuple((u, c, v) for u, c, v in values.get(key, {}).values() if v)

        return UsageDelta(
            source=source,
            scope=scope,
            produce=entities(PRODUCER_BYTE_RATE),
            fetch=entities(CONSUMER_BYTE_RATE),
            mutations=entities(CONTROLLER_MUTATION_RATE),
            producer_ids=tuple((user, count, tuple(ids)) for user, (count, ids) in pids.items() if count),
            listeners=tuple((name, n) for name, n in listeners.items() if n),
            ips=tuple((ip, n) for ip, n in ips.items() if n),
            open_connections=tuple((kind, key, n) for (kind, key), n in opened.items()),
        )


def record_remote(delta: UsageDelta, now_ms: int, *, produce: "ClientQuotaManager", fetch: "ClientQuotaManager",
                  mutations: "ControllerMutationQuotaManager", producer_ids: "ProducerIdQuotaManager",
                  connections: "ConnectionQuotas") -> None:
    """Record a peer's ``delta`` into this process's managers at ``now_ms`` (see the module docstring)."""
    for user, client_id, value in delta.produce:
        produce.record_remote(user, client_id, value, now_ms)
    for user, client_id, value in delta.fetch:
        fetch.record_remote(user, client_id, value, now_ms)
    for user, client_id, value in delta.mutations:
        mutations.record_remote(user, client_id, value, now_ms)
    for user, count, ids in delta.producer_ids:
        producer_ids.record_remote(user, count, ids, now_ms)
    if delta.listeners or delta.ips:
        connections.record_remote(delta.listeners, delta.ips, now_ms)
    if delta.open_connections:
        connections.peers.update(delta.source, delta.open_connections)
