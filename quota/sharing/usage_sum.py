"""Several processes' usage added up into one delta: what a proxy running ``workers: N`` publishes to the usage
topic as its own under ``quota.scope: cluster`` (issue 26). Pure.

The parent receives every worker's :class:`~quota.sharing.usage_delta.UsageDelta` (each one sync of that worker's own
clients' usage) and, once per ``quota.cluster.sync.ms``, publishes their sum as the proxy's one record. Only what
the cluster shares is summed: the byte rates, mutation tokens and producer ids of the proxy's own quota set and its
topic quotas' byte rates (scope ``""``); the connection counts and rates stay per proxy, as Kafka's are per broker, and the volume throttle's scaled
rate (scope ``volume``) and the per-broker sets of ``quota.scope: broker`` are not shared between proxies.
Entities are keyed by ``(user, client_id)`` as they travel: the receivers resolve each against their own quota
table, so two clients of one sensor stay two entries and add up there. Memory is bounded by the entities active in
one sync interval, and :data:`~quota.sharing.usage_delta.MAX_PRODUCER_IDS_PER_USER` ids per user.
"""

from __future__ import annotations

from quota.primitives.entity import QuotaTags
from quota.sharing.usage_delta import MAX_PRODUCER_IDS_PER_USER, UsageDelta
from quota.sharing.usage_gathered import KINDS, Gathered, PidEntry, Values


class UsageSum:
    """The deltas :meth:`add` ed since the last :meth:`gather`, summed per entity, kept as a
    :class:`~quota.sharing.usage_gathered.Gathered` keeps them (so a sync takes them as they are, not as a delta rebuilt into
    tables: at 10^5 entities a second pass over every entity on the parent's loop)."""

    __slots__ = ("_values", "_pids")

    def __init__(self) -> None:
        self._values: Values = {}  # quota key -> tags -> [user, client_id, value, None]
        self._pids: dict[str, PidEntry] = {}  # user -> [new ids counted, [ids]]

    def add(self, delta: UsageDelta) -> None:
        """One process's delta: its shared part (scope ``""``) counts; any other scope is ignored."""
        if delta.scope:
            return
        for kind, quota_key in KINDS:
            rows = getattr(delta, kind)
            if not rows:
                continue
            per_entity = self._values.get(quota_key)
            if per_entity is None:
                per_entity = self._values[quota_key] = {}
            for user, client_id, value in rows:
                tags = QuotaTags(user, client_id)
                entry = per_entity.get(tags)
                if entry is None:
                    per_entity[tags] = [user, client_id, value, None]  # its quota unknown here
                else:
                    entry[2] += value
        for user, count, ids in delta.producer_ids:
            entry = self._pids.get(user)
            if entry is None:
                entry = self._pids[user] = [0, []]
            entry[0] += count
            room = MAX_PRODUCER_IDS_PER_USER - len(entry[1])
            if room > 0:
                entry[1].extend(ids[:room])

    def gather(self, source: str) -> Gathered:
        """The sum since the last call, as what :func:`quota.sharing.usage_record.fit` sends whole or in part (the workers'
        deltas carry no quotas: entities that do not all fit rank by their usage alone); the sum starts empty
        again."""
        values, self._values = self._values, {}
        pids, self._pids = self._pids, {}
        return Gathered(source, "", values, pids, {}, {}, {})

    def take(self, source: str) -> UsageDelta:
        """:meth:`gather` as one delta of ``source`` (entries that came to nothing left out)."""
        return self.gather(source).top()
