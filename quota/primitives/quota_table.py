"""The immutable quota table: resolves a client's ``(user, client_id)`` to the quota of each key that applies to it,
through Kafka's eight levels (:mod:`quota.primitives.entity`) and the quota groups
(:mod:`quota.primitives.quota_groups`), and the sensor tags it is counted under. Pure.

Lookups are a bounded number of dict lookups whatever the table size: one per level configured for the key (at most
eight), and for quota groups one for the user's and one for the client id's (plus one per distinct client-id prefix
length configured).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from quota.primitives.chunked import EMPTY as EMPTY_MAP
from quota.primitives.chunked import REMOVED, Changing, ChunkedMap
from quota.primitives.entity import (
    DEFAULT,
    LEVELS,
    QUOTA_KEYS,
    QuotaEntity,
    QuotaEntry,
    QuotaTags,
    ResolvedQuota,
    precedence,
)
from quota.primitives.quota_groups import GROUP_MARK, NO_GROUPS, QuotaGroupEntry, QuotaGroups


class _Default:
    """Internal stand-in for ``<default>`` so that a client literally named "<default>" cannot match it."""

    __slots__ = ()

    def __repr__(self) -> str:
        return DEFAULT


_D = _Default()


# Kafka's levels with the quota groups' two steps between them; a step is (user part, client part, tags user from
# request?, tags client-id from request?, a quota group's step?). A group's tags are the group's own.
_STEPS: tuple[tuple[str | None, str | None, bool, bool, bool], ...] = (
    *((*level, False) for level in LEVELS[:3]),
    ("group", None, True, False, True),  # a quota group of users (and the tags of any group: a peer's usage)
    *((*level, False) for level in LEVELS[3:7]),
    (None, "group", False, True, True),  # a quota group of client ids
    *((*level, False) for level in LEVELS[7:]),
)
USER_GROUP_STEP, CLIENT_GROUP_STEP = 3, 8
_ANY_CLIENT = frozenset({(False, True)})  # the tags of a client no entry covers
_STEP_OF_LEVEL = tuple(step for step, found in enumerate(_STEPS) if not found[4])


def _step_of(entity: QuotaEntity) -> int:
    return _STEP_OF_LEVEL[precedence(entity) - 1]


def _internal_key(entity: QuotaEntity) -> tuple[object, object]:
    def part(name: str | None) -> object:
        return _D if name == DEFAULT else name

    return (part(entity.user), part(entity.client_id))


def _check_names(entity: QuotaEntity) -> QuotaEntity:
    """A user's or client id's entity: no name holds what marks a quota group's tags."""
    if GROUP_MARK in (entity.user or "") or GROUP_MARK in (entity.client_id or ""):
        raise ValueError(f"{entity.path!r}: a name cannot hold a NUL character")
    return entity


def _check_value(entity: QuotaEntity, key: str, value: Any) -> float:
    if key not in QUOTA_KEYS:
        raise ValueError(f"{entity.path}: unknown quota key {key!r}; expected one of {sorted(QUOTA_KEYS)}")
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value) or value < 0:
        raise ValueError(f"{entity.path}: {key} must be a number >= 0, got {value!r}")
    return float(value)


class QuotaTable:
    """An immutable snapshot of configured quotas; swap a whole new table to change anything.

    :meth:`with_changes` makes the next table from this one in time linear in the entities changed (the maps
    underneath are :class:`quota.primitives.chunked.ChunkedMap`: the new table shares every part the change does not touch),
    and remembers what changed, so a manager given it can refresh only the sensors those entities reach
    (:meth:`changes_since`). ``groups``: the quota groups, which only a new table changes.
    """

    __slots__ = (
        "_entries",
        "_by_key",
        "_level_counts",
        "_levels_by_key",
        "_listing",
        "_version",
        "_changes",
        "_groups",
        "_tag_parts",
    )

    def __init__(self, entries: Iterable[QuotaEntry] = (), groups: QuotaGroups = NO_GROUPS) -> None:
        listing: tuple[QuotaEntry, ...] = tuple(entries)
        self._groups = groups
        by_entity: dict[QuotaEntity, QuotaEntry] = {}
        # key -> {(user part, client part): (limit, entry)}; parts are names, _D, or None.
        by_key: dict[str, dict[tuple[object, object], tuple[float, QuotaEntry]]] = {}
        counts: dict[str, list[int]] = {}
        for entry in listing:
            if entry.entity in by_entity:
                raise ValueError(f"{entry.entity.path}: configured more than once")
            by_entity[entry.entity] = entry
            internal, level = _internal_key(_check_names(entry.entity)), _step_of(entry.entity)
            for key, value in entry.quotas.items():
                by_key.setdefault(key, {})[internal] = (_check_value(entry.entity, key, value), entry)
                counts.setdefault(key, [0] * len(_STEPS))[level] += 1
        for group in groups.entries:
            for key, value in group.quotas.items():
                _check_value(group.entity, key, value)
                by_key.setdefault(key, {})
                key_counts = counts.setdefault(key, [0] * len(_STEPS))
                key_counts[USER_GROUP_STEP] += 1  # a member user, or the group's own tags
                key_counts[CLIENT_GROUP_STEP] += not group.by_user
        self._entries = ChunkedMap(by_entity)
        self._by_key = {key: ChunkedMap(found) for key, found in by_key.items()}
        self._set_levels(counts)
        self._listing: tuple[QuotaEntry, ...] | None = listing  # in the order given
        self._version = object()
        self._changes: tuple[object, frozenset[QuotaEntity]] | None = None

    def _set_levels(self, counts: dict[str, list[int]]) -> None:
        self._level_counts = counts
        # Only the levels configured for a key are looked at (Kafka's quotaTypesEnabled optimisation).
        self._levels_by_key = {key: tuple(level for level, n in enumerate(found) if n) for key, found in counts.items()}
        # A group's sensor is never found by a member's names (its tags are the group's): its steps take no part;
        # a key only groups set counts everyone else under ("", client_id), unlimited.
        self._tag_parts = {
            key: frozenset(_STEPS[level][2:4] for level in levels if not _STEPS[level][4]) or _ANY_CLIENT
            for key, levels in self._levels_by_key.items()
        }

    @classmethod
    def from_values(cls, values: Iterable[tuple[Any, ...]]) -> QuotaTable:
        """From plain values: ``[({"user": "alice"}, {"producer_byte_rate": 1048576}), ...]``.

        A third item, if present, is the entry's ``shadow`` flag.
        """
        entries = []
        for item in values:
            entity, quotas, *rest = item
            if len(rest) > 1:
                raise ValueError(f"expected (entity, quotas[, shadow]), got {item!r}")
            shadow = bool(rest[0]) if rest else False
            entries.append(QuotaEntry(QuotaEntity.from_dict(entity), dict(quotas), shadow))
        return cls(entries)

    def with_changes(self, changes: Mapping[QuotaEntity, QuotaEntry | None]) -> QuotaTable:
        """A new table: this one with each entity of ``changes`` set to its entry, or removed (``None``). Cost:
        linear in ``len(changes)``, whatever the size of the table. Raises ValueError for a bad value."""
        changing = self.changing()
        changing.apply(changes)
        return changing.done()

    def changing(self, expected: int = 0) -> TableChanging:
        """The next table, made in as many parts as wanted (each part of ``k`` entities costs ``O(k)``, and each
        chunk of the maps underneath is copied once for the whole); this table is never changed. ``expected``: how
        many entities may be added (see :meth:`ChunkedMap.changing`)."""
        return TableChanging(self, expected)

    def changes_since(self, older: QuotaTable) -> frozenset[QuotaEntity] | None:
        """The entities whose entries differ between ``older`` and this table, when this table was made from it by
        :meth:`with_changes`; None when that is not known (any entity may differ)."""
        if self._changes is not None and self._changes[0] is older._version:
            return self._changes[1]
        return None

    @property
    def entries(self) -> tuple[QuotaEntry, ...]:
        """Every entry (linear in the table's size: for describing it, not for the request path)."""
        listing = self._listing
        if listing is None:
            listing = self._listing = tuple(self._entries.values())
        return listing

    def entry(self, entity: QuotaEntity) -> QuotaEntry | None:
        """The entry of one entity, if configured."""
        found: QuotaEntry | None = self._entries.get(entity)
        return found

    def keys(self) -> frozenset[str]:
        """The quota keys configured for at least one entity."""
        return frozenset(self._by_key)

    def resolve(self, key: str, user: str, client_id: str) -> ResolvedQuota:
        """The quota for ``key`` that applies to ``(user, client_id)``, with the tags of the sensor to count it in."""
        configured = self._by_key.get(key)
        if configured is not None:
            chunks, mask = configured.chunks_and_mask  # ChunkedMap.get, inlined: this is the request path
            for level in self._levels_by_key[key]:
                user_kind, client_kind, tag_user, tag_client, grouped = _STEPS[level]
                if grouped:
                    group = self._group(level, user, client_id)
                    if group is not None and key in group.quotas:
                        return ResolvedQuota(float(group.quotas[key]), group.tags, group.entity, group.shadow)
                    continue
                user_part = None if user_kind is None else (user if user_kind == "name" else _D)
                client_part = None if client_kind is None else (client_id if client_kind == "name" else _D)
                internal = (user_part, client_part)
                found = chunks[hash(internal) & mask].get(internal)
                if found is not None:
                    limit, entry = found
                    tags = QuotaTags(user if tag_user else "", client_id if tag_client else "")
                    return ResolvedQuota(limit, tags, entry.entity, entry.shadow)
        return ResolvedQuota(math.inf, QuotaTags("", client_id))

    def matches(self, key: str, user: str, client_id: str) -> list[ResolvedQuota]:
        """Every entry configured for ``key`` that matches ``(user, client_id)``, in precedence order: the first is
        what :meth:`resolve` returns, the others are what it shadows (for explaining, not the request path)."""
        found: list[ResolvedQuota] = []
        configured = self._by_key.get(key, EMPTY_MAP)
        for level in self._levels_by_key.get(key, ()):
            user_kind, client_kind, tag_user, tag_client, grouped = _STEPS[level]
            if grouped:
                group = self._group(level, user, client_id)
                if group is not None and key in group.quotas:
                    found.append(ResolvedQuota(float(group.quotas[key]), group.tags, group.entity, group.shadow))
                continue
            user_part = None if user_kind is None else (user if user_kind == "name" else _D)
            client_part = None if client_kind is None else (client_id if client_kind == "name" else _D)
            hit = configured.get((user_part, client_part))
            if hit is not None:
                limit, entry = hit
                tags = QuotaTags(user if tag_user else "", client_id if tag_client else "")
                found.append(ResolvedQuota(limit, tags, entry.entity, entry.shadow))
        return found

    def limit(self, key: str, user: str, client_id: str) -> float:
        """Just the limit (``math.inf`` when unconfigured)."""
        return self.resolve(key, user, client_id).limit

    def tag_parts(self, key: str) -> frozenset[tuple[bool, bool]]:
        """Which of a client's names the tags of each configured level of ``key`` carry, as (user, client-id)
        pairs: ``(True, True)`` for an entity with a user and a client-id part, ``(True, False)`` for a user alone,
        ``(False, True)`` for a client-id alone (also the tags of a client no entry covers). What a manager needs to
        know whether a client's sensor can be found from its names alone (``SensorKeeper.known``)."""
        return self._tag_parts.get(key, frozenset())

    def _group(self, step: int, user: str, client_id: str) -> QuotaGroupEntry | None:
        """The quota group a group ``step`` finds for the client: of its user, or of its client id."""
        return self._groups.of_user(user) if step == USER_GROUP_STEP else self._groups.of_client(client_id)

    @property
    def groups(self) -> QuotaGroups:
        """The quota groups (:mod:`quota.primitives.quota_groups`)."""
        return self._groups

    def with_groups(self, groups: QuotaGroups) -> QuotaTable:
        """This table's entries with ``groups`` instead of its own (a new table: every sensor may be reached)."""
        return QuotaTable(self.entries, groups)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"QuotaTable({len(self._entries)} entries, keys={sorted(self._by_key)})"


class TableChanging:
    """The next :class:`QuotaTable` being made from one (see :meth:`QuotaTable.changing`)."""

    __slots__ = ("_origin", "_entries", "_by_key", "_counts", "_changed", "_expected")

    def __init__(self, origin: QuotaTable, expected: int = 0) -> None:
        self._origin = origin
        self._expected = expected
        self._entries = origin._entries.changing(expected)
        self._by_key: dict[str, Changing] = {}  # the keys changed so far
        self._counts = {key: list(found) for key, found in origin._level_counts.items()}
        self._changed: set[QuotaEntity] = set()

    def _key(self, key: str) -> Changing:
        changing = self._by_key.get(key)
        if changing is None:
            changing = self._by_key[key] = self._origin._by_key.get(key, EMPTY_MAP).changing(self._expected)
        return changing

    def apply(self, changes: Mapping[QuotaEntity, QuotaEntry | None]) -> None:
        """Set each entity of ``changes`` to its entry, or remove it (``None``); raises ValueError for a bad value
        (the entities before it in ``changes`` are changed, it and those after are not)."""
        for entity, entry in changes.items():
            self.set(entity, entry)

    def set(self, entity: QuotaEntity, entry: QuotaEntry | None) -> None:
        """One entity set to its entry, or removed (``None``); raises ValueError for a bad value (nothing changed)."""
        if entry is not None:
            if entry.entity != entity:
                raise ValueError(f"{entity.path}: given the entry of {entry.entity.path}")
            limits = [(key, _check_value(entity, key, value)) for key, value in entry.quotas.items()]
        internal, level = _internal_key(_check_names(entity)), _step_of(entity)
        old = self._entries.get(entity)
        if old is not None:
            for key in old.quotas:
                self._key(key)[internal] = REMOVED
                self._counts[key][level] -= 1
        if entry is not None:
            for key, limit in limits:
                self._key(key)[internal] = (limit, entry)
                self._counts.setdefault(key, [0] * len(_STEPS))[level] += 1
        self._entries[entity] = REMOVED if entry is None else entry
        self._changed.add(entity)

    @property
    def copied(self) -> int:
        """Entries of the maps underneath copied so far (the work; tests count it)."""
        return self._entries.copied + sum(changing.copied for changing in self._by_key.values())

    def done(self) -> QuotaTable:
        """The new table; it knows it was made from the original with these entities changed."""
        origin = self._origin
        new = QuotaTable.__new__(QuotaTable)
        new._entries = self._entries.done()
        by_key = dict(origin._by_key)
        for key, changing in self._by_key.items():
            by_key[key] = changing.done()
            if not by_key[key] and not self._counts[key][USER_GROUP_STEP]:  # no entry sets it, nor a quota group
                del by_key[key]
        new._by_key = by_key
        new._set_levels({key: found for key, found in self._counts.items() if key in by_key})
        new._groups = origin._groups
        new._listing = None
        new._version = object()
        new._changes = (origin._version, frozenset(self._changed))
        return new


EMPTY_QUOTA_TABLE = QuotaTable()
