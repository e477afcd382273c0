"""Quota entities (KIP-55) and the immutable quota table with Kafka's eight-level precedence.

An entity is a ``user``, a ``client-id``, or a ``(user, client-id)`` pair; each part is a name or the
``<default>`` marker. For a connection's ``(user, client_id)`` the most specific configured entity wins, per quota
key, in this order (``ClientQuotaManager`` in apache/kafka)::

    /users/<user>/clients/<client-id>      tags (user, client-id)
    /users/<user>/clients/<default>        tags (user, client-id)
    /users/<user>                          tags (user, "")
    /users/<default>/clients/<client-id>   tags (user, client-id)
    /users/<default>/clients/<default>     tags (user, client-id)
    /users/<default>                       tags (user, "")
    /clients/<client-id>                   tags ("", client-id)
    /clients/<default>                     tags ("", client-id)
    (nothing)                              tags ("", client-id), unlimited

The tags (Kafka's ``quotaMetricTags``) name the sensor, so they decide who shares a quota: a ``<default>`` user
quota is applied to each user separately (tags ``(alice, "")``, ``(bob, "")``), and all clients of one user that
resolve to ``(alice, "")`` share it. The user is whatever principal name the proxy knows (``ANONYMOUS`` before SASL);
nothing here depends on it. Lookups are a bounded number of dict lookups (at most eight), whatever the table size.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from quota.primitives.chunked import EMPTY as EMPTY_MAP
from quota.primitives.chunked import REMOVED, Changing, ChunkedMap

DEFAULT = "<default>"
"""The default-entity marker, as Kafka writes it (``ClientQuotaManager.DEFAULT_NAME``)."""

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
PRODUCER_IDS_RATE = "producer_ids_rate"
REQUEST_RATE = "request_rate"  # the proxy's own: requests per second of the APIs quota.request.rate.apis lists
_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE, CONTROLLER_MUTATION_RATE, PRODUCER_IDS_RATE)
QUOTA_KEYS = frozenset({*_KEYS, REQUEST_RATE})
"""Quota keys a ``user``/``client-id`` entity may carry (Kafka's ``QuotaConfig.*_OVERRIDE_CONFIG`` names)."""

USER = "user"
CLIENT_ID = "client-id"


class QuotaTags(NamedTuple):
    """The metric tags of a quota sensor; clients with equal tags share one quota. ``""`` means "not part of it"."""

    user: str
    client_id: str

    def as_metric_tags(self) -> dict[str, str]:
        """As Kafka tags its ``byte-rate``/``throttle-time`` metrics: ``{"user": ..., "client-id": ...}``."""
        return {USER: self.user, CLIENT_ID: self.client_id}


@dataclass(frozen=True, slots=True)
class QuotaEntity:
    """A configured entity: ``user`` and/or ``client_id``, each a name, :data:`DEFAULT`, or ``None`` (absent)."""

    user: str | None = None
    client_id: str | None = None

    def __post_init__(self) -> None:
        if self.user is None and self.client_id is None:
            raise ValueError("a quota entity needs a user, a client-id, or both")
        for part in (self.user, self.client_id):
            if part is not None and not isinstance(part, str):
                raise ValueError(f"quota entity names must be strings, got {part!r}")

    @classmethod
    def from_dict(cls, entity: Mapping[str, Any]) -> QuotaEntity:
        """From ``{"user": "alice", "client-id": "etl"}``; a value of ``None`` or ``"<default>"`` is the default."""
        unknown = set(entity) - {USER, CLIENT_ID}
        if unknown:
            raise ValueError(f"unknown quota entity type(s) {sorted(unknown)}; expected {USER!r} and/or {CLIENT_ID!r}")
        if not entity:
            raise ValueError("a quota entity needs a user, a client-id, or both")
        user = (entity[USER] if entity[USER] is not None else DEFAULT) if USER in entity else None
        client_id = (entity[CLIENT_ID] if entity[CLIENT_ID] is not None else DEFAULT) if CLIENT_ID in entity else None
        return cls(user=user, client_id=client_id)

    @property
    def path(self) -> str:
        """Kafka's config path for this entity, e.g. ``/users/<default>/clients/etl``."""
        parts = []
        if self.user is not None:
            parts.append(f"/users/{self.user}")
        if self.client_id is not None:
            parts.append(f"/clients/{self.client_id}")
        return "".join(parts)

    def __str__(self) -> str:
        return self.path


@dataclass(frozen=True, slots=True)
class QuotaEntry:
    """One configured entity with its quota values; ``shadow`` marks a quota computed and metered but not applied."""

    entity: QuotaEntity
    quotas: Mapping[str, float]
    shadow: bool = False


@dataclass(frozen=True, slots=True)
class ResolvedQuota:
    """The quota that applies to one ``(user, client_id)`` for one key, and the sensor it is counted in.

    ``entity is None`` means no entity matched: the limit is infinite and nothing is ever throttled.
    """

    limit: float
    tags: QuotaTags
    entity: QuotaEntity | None = None
    shadow: bool = False

    @property
    def unlimited(self) -> bool:
        return self.entity is None


class _Default:
    """Internal stand-in for ``<default>`` so that a client literally named "<default>" cannot match it."""

    __slots__ = ()

    def __repr__(self) -> str:
        return DEFAULT


_D = _Default()

# (user part, client part, tags user from request?, tags client-id from request?) in precedence order.
# "name" means the request's own name. None means the entity has no such part.
_LEVELS: tuple[tuple[str | None, str | None, bool, bool], ...] = (
    ("name", "name", True, True),  # /users/<user>/clients/<client-id>
    ("name", "default", True, True),  # /users/<user>/clients/<default>
    ("name", None, True, False),  # /users/<user>
    ("default", "name", True, True),  # /users/<default>/clients/<client-id>
    ("default", "default", True, True),  # /users/<default>/clients/<default>
    ("default", None, True, False),  # /users/<default>
    (None, "name", False, True),  # /clients/<client-id>
    (None, "default", False, True),  # /clients/<default>
)


_LEVEL_OF_SHAPE = {(user_kind, client_kind): index for index, (user_kind, client_kind, _, _) in enumerate(_LEVELS)}

LEVEL_PATHS = tuple(
    QuotaEntity(
        None if u is None else ("<user>" if u == "name" else DEFAULT),
        None if c is None else ("<client-id>" if c == "name" else DEFAULT),
    ).path
    for u, c, _, _ in _LEVELS
)
"""Each precedence level as Kafka's docs write it, most specific first (``/users/<user>/clients/<client-id>``)."""


def precedence(entity: QuotaEntity) -> int:
    """The precedence level of a configured entity, 1 (``/users/<user>/clients/<client-id>``) to 8
    (``/clients/<default>``): what :meth:`QuotaTable.resolve` tries first comes first."""
    return _level_of(entity) + 1


def _level_of(entity: QuotaEntity) -> int:
    def kind(part: str | None) -> str | None:
        return None if part is None else ("default" if part == DEFAULT else "name")

    return _LEVEL_OF_SHAPE[(kind(entity.user), kind(entity.client_id))]


def _internal_key(entity: QuotaEntity) -> tuple[object, object]:
    def part(name: str | None) -> object:
        return _D if name == DEFAULT else name

    return (part(entity.user), part(entity.client_id))


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
    (:meth:`changes_since`).
    """

    __slots__ = ("_entries", "_by_key", "_level_counts", "_levels_by_key", "_listing", "_version", "_changes")

    def __init__(self, entries: Iterable[QuotaEntry] = ()) -> None:
        listing: tuple[QuotaEntry, ...] = tuple(entries)
        by_entity: dict[QuotaEntity, QuotaEntry] = {}
        # key -> {(user part, client part): (limit, entry)}; parts are names, _D, or None.
        by_key: dict[str, dict[tuple[object, object], tuple[float, QuotaEntry]]] = {}
        counts: dict[str, list[int]] = {}
        for entry in listing:
            if entry.entity in by_entity:
                raise ValueError(f"{entry.entity.path}: configured more than once")
            by_entity[entry.entity] = entry
            internal, level = _internal_key(entry.entity), _level_of(entry.entity)
            for key, value in entry.quotas.items():
                by_key.setdefault(key, {})[internal] = (_check_value(entry.entity, key, value), entry)
                counts.setdefault(key, [0] * len(_LEVELS))[level] += 1
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
                user_kind, client_kind, tag_user, tag_client = _LEVELS[level]
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
            user_kind, client_kind, tag_user, tag_client = _LEVELS[level]
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
        return frozenset(_LEVELS[level][2:] for level in self._levels_by_key.get(key, ()))

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
        internal, level = _internal_key(entity), _level_of(entity)
        old = self._entries.get(entity)
        if old is not None:
            for key in old.quotas:
                self._key(key)[internal] = REMOVED
                self._counts[key][level] -= 1
        if entry is not None:
            for key, limit in limits:
                self._key(key)[internal] = (limit, entry)
                self._counts.setdefault(key, [0] * len(_LEVELS))[level] += 1
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
            if not by_key[key]:
                del by_key[key]
        new._by_key = by_key
        new._set_levels({key: found for key, found in self._counts.items() if key in by_key})
        new._listing = None
        new._version = object()
        new._changes = (origin._version, frozenset(self._changed))
        return new


EMPTY_QUOTA_TABLE = QuotaTable()
