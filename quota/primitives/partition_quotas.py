"""The partition entries of a topic quota table, as a byte-rate manager resolves them. Pure.

``{topic: orders, partition: 3}`` holds partition 3 of ``orders`` to its own rate; ``{topic: orders, partition:
<default>}`` gives each partition of ``orders`` a budget of its own at that rate (a hot partition cannot take a cold
one's). They live in the :class:`~quota.primitives.topic_quotas.TopicQuotaTable` beside the topic entries; this view
lets the byte-rate machinery (:class:`~quota.managers.client_quota.ClientQuotaManager`, its sensor keeper, its
bounded table and eviction) count a partition as the client ``(topic, partition)``: tagged so, found by both names,
always tracked when its own entry names it, bounded by ``quota.max.tracked.entities`` under ``partition:
<default>`` (its entity's client id is :data:`~quota.primitives.entity.DEFAULT`, as a ``<default>`` client id's is).
"""

from __future__ import annotations

from quota.primitives.entity import QuotaEntity, ResolvedQuota
from quota.primitives.topic_quotas import TopicQuotaTable

_BY_BOTH_NAMES = frozenset({(True, True)})  # a partition's sensor is found by (topic, partition)


class PartitionQuotaView:
    """The partition entries of ``table`` as a :class:`~quota.primitives.quota_lookup.QuotaLookup`: ``user`` is
    the topic, ``client_id`` the partition's index as a string."""

    __slots__ = ("table",)

    def __init__(self, table: TopicQuotaTable) -> None:
        self.table = table

    def keys(self) -> frozenset[str]:
        return self.table.partition_keys()

    def resolve(self, key: str, user: str, client_id: str) -> ResolvedQuota:
        return self.table.resolve_partition(key, user, client_id)

    def tag_parts(self, key: str) -> frozenset[tuple[bool, bool]]:
        return _BY_BOTH_NAMES if key in self.table.partition_keys() else frozenset()

    def changes_since(self, older: PartitionQuotaView) -> frozenset[QuotaEntity] | None:
        return None  # every sensor is looked at again (at most quota.max.tracked.entities under <default>)

    def rejects(self, topic: str, partition: str) -> bool:
        return self.table.partition_rejects(topic, partition)

    def __repr__(self) -> str:
        return f"PartitionQuotaView({self.table!r})"
