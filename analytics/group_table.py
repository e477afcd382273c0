"""The quota groups of a ``quotas:`` list in the proxy's own table, so that the planner resolves a member to its
group's one budget as the proxy does (Kafka's eight levels, a group just below the name it matches). Pure: it needs
only the ``quota`` package, which the replay's executors are given (:mod:`analytics.shipping`).

An item ``{entity: {quota-group: NAME}, users: [...] | client-ids: [...] | client-id-prefix: ..., KEY: VALUE}``
(the planner's ``recommended-quotas.yaml`` writes them so, and a proxy configuration holds them so) becomes a
:class:`quota.primitives.quota_groups.QuotaGroupEntry`; a group without members (as DescribeClientQuotas never lists
groups, and a table read back without them) is nobody's budget and is left out.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

from quota.primitives.entity import ResolvedQuota
from quota.primitives.quota_groups import (
    CLIENT_ID_PREFIX,
    CLIENT_IDS,
    MEMBER_KEYS,
    QUOTA_GROUP,
    USERS,
    QuotaGroupEntity,
    QuotaGroups,
    quota_group,
)
from quota.primitives.quota_table import QuotaTable


def with_groups(table: QuotaTable, items: Iterable[Mapping], keys: Collection[str] | None = None) -> QuotaTable:
    """``table`` with the quota groups of ``items`` (their ``keys``, every key when None); ``table`` itself when
    ``items`` has none."""
    entries = []
    for item in items:
        if QUOTA_GROUP not in item["entity"] or not any(item.get(k) for k in MEMBER_KEYS):
            continue
        quotas = {
            k: float(v)
            for k, v in item.items()
            if k not in ("entity", "mode", *MEMBER_KEYS) and (keys is None or k in keys)
        }
        entries.append(
            quota_group(
                item["entity"][QUOTA_GROUP],
                quotas,
                users=item.get(USERS) or (),
                client_ids=item.get(CLIENT_IDS) or (),
                client_id_prefix=item.get(CLIENT_ID_PREFIX),
                shadow=item.get("mode") == "shadow",
            )
        )
    return table.with_groups(QuotaGroups(entries)) if entries else table


def group_of(resolved: ResolvedQuota) -> str | None:
    """The quota group a resolved quota (:meth:`QuotaTable.resolve`) is the budget of, or None for a client's own."""
    return resolved.entity.name if isinstance(resolved.entity, QuotaGroupEntity) else None
