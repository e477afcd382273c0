"""What a byte-rate manager needs of a quota table: :class:`QuotaLookup`. Pure.

A :class:`~quota.primitives.quota_table.QuotaTable` is one; a view that resolves through a table without copying it
(:class:`quota.managers.volume_scaling.ScaledProduceQuotas`) is another. The sensor keeper and the client quota
manager take this, not the table, so such a view is checked as what it stands for.
"""

from __future__ import annotations

from typing import Protocol, Self

from quota.primitives.entity import QuotaEntity, ResolvedQuota


class QuotaLookup(Protocol):
    """The quotas a manager resolves through: which keys are configured, the quota and tags that apply to a client,
    which tag shapes a key's levels have, and what changed since an older lookup of the same kind."""

    def keys(self) -> frozenset[str]: ...

    def resolve(self, key: str, user: str, client_id: str) -> ResolvedQuota: ...

    def tag_parts(self, key: str) -> frozenset[tuple[bool, bool]]: ...

    def changes_since(self, older: Self) -> frozenset[QuotaEntity] | None: ...
