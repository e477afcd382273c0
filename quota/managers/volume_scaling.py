"""The produce quotas volume usage scales (THROTTLE): every ``producer_byte_rate`` times the cluster's factor, and a
base rate times the factor for clients no entry covers. Pure.

:class:`ScaledProduceQuotas` is what a produce :class:`~quota.managers.client_quota.ClientQuotaManager` resolves through
while volume usage throttles: a view of the configured table (nothing copied, so a new table or factor costs
nothing to take). :func:`scaled_produce_table` is the same as a whole table, the reference the view must equal.

A shadow entry stays shadow: scaled, computed and metered, never applied (``mode: shadow`` says the entry's quotas
are never applied, and volume scaling does not change that). Clients no entry covers get the base rate, enforced.
"""

from __future__ import annotations

from dataclasses import replace

from quota.primitives.entity import DEFAULT, PRODUCER_BYTE_RATE, QuotaEntity, ResolvedQuota
from quota.primitives.quota_groups import QuotaGroups
from quota.primitives.quota_table import QuotaTable

CLIENT_DEFAULT = QuotaEntity(client_id=DEFAULT)
"""The entity the base rate stands for: ``{client-id: <default>}``, the last level of Kafka's precedence."""


class ScaledProduceQuotas:
    """What :func:`scaled_produce_table` gives, as a view of ``table``: each ``producer_byte_rate`` scaled by
    ``factor`` (its entry's shadow flag kept), ``base_rate * factor`` for clients no entry covers. Resolves as the
    table does, for ``producer_byte_rate`` only."""

    __slots__ = ("table", "factor", "base_rate")

    def __init__(self, table: QuotaTable, factor: float, base_rate: float) -> None:
        self.table, self.factor, self.base_rate = table, factor, base_rate

    def resolve(self, key: str, user: str, client_id: str) -> ResolvedQuota:
        resolved = self.table.resolve(PRODUCER_BYTE_RATE, user, client_id)
        if resolved.unlimited:  # the base rate, as a {client-id: <default>} entry
            return ResolvedQuota(self.base_rate * self.factor, resolved.tags, CLIENT_DEFAULT)
        return ResolvedQuota(resolved.limit * self.factor, resolved.tags, resolved.entity, resolved.shadow)

    def limit(self, key: str, user: str, client_id: str) -> float:
        return self.resolve(key, user, client_id).limit

    def keys(self) -> frozenset[str]:
        return frozenset((PRODUCER_BYTE_RATE,))

    def tag_parts(self, key: str) -> frozenset[tuple[bool, bool]]:
        return self.table.tag_parts(PRODUCER_BYTE_RATE) | {(False, True)}  # the base rate: {client-id: <default>}

    def changes_since(self, older: object) -> frozenset[QuotaEntity] | None:
        """The entities changed since ``older`` (the same factor and base rate over an older table), else None."""
        if not isinstance(older, ScaledProduceQuotas) or (older.factor, older.base_rate) != (
            self.factor,
            self.base_rate,
        ):
            return None
        return frozenset() if older.table is self.table else self.table.changes_since(older.table)


def scaled_produce_table(quotas: QuotaTable, factor: float, base_rate: float) -> QuotaTable:
    """Every ``producer_byte_rate`` entry scaled by ``factor`` (shadow entries stay shadow), and ``base_rate *
    factor`` for clients no entry covers (a ``{client-id: <default>}`` entry, unless one is configured)."""
    values = []
    has_default_client = False
    for entry in quotas.entries:
        if PRODUCER_BYTE_RATE not in entry.quotas:
            continue
        entity = {
            k: v for k, v in (("user", entry.entity.user), ("client-id", entry.entity.client_id)) if v is not None
        }
        has_default_client |= entity == {"client-id": DEFAULT}
        values.append((entity, {PRODUCER_BYTE_RATE: entry.quotas[PRODUCER_BYTE_RATE] * factor}, entry.shadow))
    if not has_default_client:
        values.append(({"client-id": DEFAULT}, {PRODUCER_BYTE_RATE: base_rate * factor}, False))
    groups = [  # a quota group's producer_byte_rate is scaled as an entity's is
        replace(group, quotas={PRODUCER_BYTE_RATE: group.quotas[PRODUCER_BYTE_RATE] * factor})
        for group in quotas.groups.entries
        if PRODUCER_BYTE_RATE in group.quotas
    ]
    return QuotaTable(QuotaTable.from_values(values).entries, QuotaGroups(groups))
