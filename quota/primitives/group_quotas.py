"""Request-rate quotas per consumer group: the ``{group: NAME}`` and ``{group: <default>}`` entities and their
immutable table. Pure.

A group quota is not a client's: every request of a listed API that names the group (a JoinGroup, SyncGroup,
OffsetCommit, TxnOffsetCommit or FindCoordinator for it) counts against the group's ``request_rate``, whichever
member, user, client id or connection sends it, so a group rebalancing in a loop is held however many members and
client ids it has. A group with its own entry has its own quota; every other group has the ``<default>`` entry's,
each group on its own (as a ``<default>`` user quota applies to each user separately); a group neither covers has
none, and nothing is kept for it.

The table answers as a client table does (:class:`~quota.primitives.quota_lookup.QuotaLookup`), so Kafka's sampled
rate and its bounded sensor table serve groups unchanged: a group is looked up as the client id of an anonymous
client, ``("", group)``, as a topic is (:mod:`quota.primitives.topic_quotas`). Group names a client makes up under
``<default>`` are bounded by ``quota.max.tracked.entities`` as ``<default>`` client ids are.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from quota.primitives.chunked import REMOVED, ChunkedMap
from quota.primitives.entity import DEFAULT, REQUEST_RATE, QuotaEntity, QuotaEntry, QuotaTags, ResolvedQuota

GROUP = "group"
"""The entity type, as the YAML writes it (``entity: {group: payments}``)."""

GROUP_KEYS = (REQUEST_RATE,)
"""The quota keys a group entity takes."""

GROUP_REQUEST_RATE = "group_request_rate"
"""The group quota's name where it stands beside the client quotas (throttles, shadow counts, ``explain``)."""


@dataclass(frozen=True, slots=True)
class GroupEntity(QuotaEntity):
    """A group entity: ``client_id`` holds the group id or :data:`DEFAULT` (how its sensor is looked up and tagged),
    ``user`` is always None. Never equal to a client entity."""

    @classmethod
    def of(cls, group: str) -> GroupEntity:
        return cls(user=None, client_id=group)

    @property
    def group(self) -> str:
        """The group id, or :data:`DEFAULT`."""
        return self.client_id or DEFAULT

    @property
    def path(self) -> str:
        return f"/groups/{self.group}"


_ANY_GROUP = frozenset({(False, True)})  # every group is found by its name alone (SensorKeeper's BY_CLIENT_ID)


def _checked(entry: QuotaEntry) -> str:
    """The group (or :data:`DEFAULT`) of a valid group entry; raises ValueError naming what is wrong."""
    entity = entry.entity
    if not isinstance(entity, GroupEntity):
        raise ValueError(f"{entity.path}: not a group entity")
    if set(entry.quotas) != {REQUEST_RATE}:
        raise ValueError(f"{entity.path}: a group entity takes {REQUEST_RATE} alone, got {sorted(entry.quotas)}")
    value = entry.quotas[REQUEST_RATE]
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
        raise ValueError(f"{entity.path}: {REQUEST_RATE} must be a rate > 0, got {value!r}")
    return entity.group


class GroupQuotaTable:
    """An immutable snapshot of the configured group quotas (``request_rate`` only); a change makes a new table
    (:meth:`with_changes`, work linear in the groups changed, as a config-topic record asks) and the whole table is
    swapped. Resolving costs two lookups at most."""

    __slots__ = ("_entries",)

    def __init__(self, entries: Iterable[QuotaEntry] = ()) -> None:
        listing: dict[str, QuotaEntry] = {}
        for entry in entries:
            group = _checked(entry)
            if group in listing:
                raise ValueError(f"{entry.entity.path}: configured more than once")
            listing[group] = entry
        self._entries = ChunkedMap(listing)

    def with_changes(self, changes: Mapping[str, QuotaEntry | None]) -> GroupQuotaTable:
        """A new table: this one with each group (or :data:`DEFAULT`) of ``changes`` set to its entry, or removed
        (None). This table is not changed (nor returned anew when ``changes`` is empty)."""
        if not changes:
            return self
        changing = self._entries.changing(len(changes))
        for group, entry in changes.items():
            if entry is not None and _checked(entry) != group:
                raise ValueError(f"/groups/{group}: the entry is {entry.entity.path}'s")
            changing[group] = REMOVED if entry is None else entry
        table = GroupQuotaTable.__new__(GroupQuotaTable)
        table._entries = changing.done()
        return table

    def entry(self, group: str) -> QuotaEntry | None:
        """The entry of one group (or :data:`DEFAULT`), if configured."""
        found: QuotaEntry | None = self._entries.get(group)
        return found

    @property
    def entries(self) -> tuple[QuotaEntry, ...]:
        return tuple(self._entries.values())

    def keys(self) -> frozenset[str]:
        return frozenset(GROUP_KEYS) if self._entries else frozenset()

    def resolve(self, key: str, user: str, client_id: str) -> ResolvedQuota:
        """As a client table resolves: ``client_id`` is the group (``user`` plays no part); its own entry's quota,
        else ``<default>``'s, else none."""
        matched = self.matches(key, client_id)
        return matched[0] if matched else ResolvedQuota(math.inf, QuotaTags("", client_id))

    def matches(self, key: str, group: str) -> list[ResolvedQuota]:
        """Every entry for ``key`` that matches ``group``: its own, then ``<default>``'s; the first is the one that
        applies (for explaining)."""
        if key != REQUEST_RATE:
            return []
        found = [self._entries.get(group) if group != DEFAULT else None, self._entries.get(DEFAULT)]
        tags = QuotaTags("", group)
        return [ResolvedQuota(float(e.quotas[key]), tags, e.entity, e.shadow) for e in found if e is not None]

    def tag_parts(self, key: str) -> frozenset[tuple[bool, bool]]:
        return _ANY_GROUP if key in self.keys() else frozenset()

    def changes_since(self, older: GroupQuotaTable) -> frozenset[QuotaEntity] | None:
        return None  # every sensor is looked at again (at most quota.max.tracked.entities of <default> groups)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"GroupQuotaTable({len(self._entries)} entries)"


def group_table(values: Mapping[str, float], shadow: Iterable[str] = ()) -> GroupQuotaTable:
    """From plain values, for tests and tools: ``{"payments": 5, "<default>": 2}`` (requests per second); the groups
    in ``shadow`` are shadow entries."""
    shadowed = set(shadow)
    return GroupQuotaTable(
        QuotaEntry(GroupEntity.of(group), {REQUEST_RATE: rate}, group in shadowed) for group, rate in values.items()
    )


EMPTY_GROUP_TABLE = GroupQuotaTable()
