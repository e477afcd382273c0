"""Per-topic byte-rate quotas: the ``{topic: NAME}`` and ``{topic: <default>}`` entities, the
``{topic: NAME, partition: N}`` and ``{topic: NAME, partition: <default>}`` ones, and their immutable table. Pure.

A topic quota is not a client's: every byte written to (``producer_byte_rate``) or read from
(``consumer_byte_rate``) a topic through the proxy counts against that topic's quota, whichever user, client id or
connection moves it (KIP-1010's proposal, which Kafka has not shipped). A topic with its own entry has its own
quota; every other topic has the ``<default>`` entry's, each topic on its own (as a ``<default>`` user quota applies
to each user separately); a topic neither covers has none, and nothing is kept for it.

The table answers as a client table does (:class:`~quota.primitives.quota_lookup.QuotaLookup`), so the byte-rate
machinery (:class:`~quota.managers.client_quota.ClientQuotaManager` and its sensor keeper: Kafka's sampled rate,
throttle and smoothing, the bounded table and its eviction, expiry) serves topics unchanged: a topic is looked up
as the client id of an anonymous client, ``("", topic)``, and its sensor is tagged ``("", topic)``. A
:class:`TopicEntity` says what it stands for (``/topics/orders``). A topic named in full is always tracked; topics
under ``<default>`` are bounded by ``quota.max.tracked.entities`` as ``<default>`` client ids are.

A partition entry (:class:`PartitionEntity`) holds one partition of a named topic (``partition: 3``), or each
partition of it on its own (``partition: <default>``), beside the topic's own quota: the same table keeps both, a
topic's entry under its name and a partition's under ``(topic, partition)``, so one snapshot is swapped whole; the
partitions are resolved through :class:`~quota.primitives.partition_quotas.PartitionQuotaView`, which counts a
partition as the client ``(topic, partition)``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from quota.primitives.chunked import REMOVED, ChunkedMap
from quota.primitives.entity import (
    CONSUMER_BYTE_RATE,
    DEFAULT,
    PRODUCER_BYTE_RATE,
    QuotaEntity,
    QuotaEntry,
    QuotaTags,
    ResolvedQuota,
)

TOPIC = "topic"
"""The entity type, as the YAML writes it (``entity: {topic: orders}``)."""

PARTITION = "partition"
"""The second part of a partition entity (``entity: {topic: orders, partition: 3}``)."""

TOPIC_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE)
"""The quota keys a topic entity takes (a partition entity too)."""

TableKey = str | tuple[str, str]
"""Where an entry is in a :class:`TopicQuotaTable`: a topic's name (or :data:`DEFAULT`), or ``(topic, partition)``
(the partition's index as a string, or :data:`DEFAULT`)."""

TOPIC_PRODUCER_BYTE_RATE = "topic_producer_byte_rate"
TOPIC_CONSUMER_BYTE_RATE = "topic_consumer_byte_rate"
"""The topic quotas' names where they stand beside the client quotas (shadow counts, evictions, ``explain``)."""

NAMES = {PRODUCER_BYTE_RATE: TOPIC_PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE: TOPIC_CONSUMER_BYTE_RATE}

PARTITION_PRODUCER_BYTE_RATE = "partition_producer_byte_rate"
PARTITION_CONSUMER_BYTE_RATE = "partition_consumer_byte_rate"
"""The partition quotas' names where they stand beside the others (throttles, shadow counts, evictions, ``explain``)."""

PARTITION_NAMES = {PRODUCER_BYTE_RATE: PARTITION_PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE: PARTITION_CONSUMER_BYTE_RATE}


@dataclass(frozen=True, slots=True)
class TopicEntity(QuotaEntity):
    """A topic entity: ``client_id`` holds the topic's name or :data:`DEFAULT` (how its sensor is looked up and
    tagged; see the module's docstring), ``user`` is always None. Never equal to a client entity."""

    @classmethod
    def of(cls, topic: str) -> TopicEntity:
        return cls(user=None, client_id=topic)

    @property
    def topic(self) -> str:
        """The topic's name, or :data:`DEFAULT`."""
        return self.client_id or DEFAULT

    @property
    def path(self) -> str:
        return f"/topics/{self.topic}"


@dataclass(frozen=True, slots=True)
class PartitionEntity(QuotaEntity):
    """A partition entity: ``user`` holds the topic's name, ``client_id`` the partition's index as a string or
    :data:`DEFAULT` (how its sensor is looked up and tagged: ``(topic, partition)``). Never equal to a topic or
    client entity."""

    @classmethod
    def of(cls, topic: str, partition: str) -> PartitionEntity:
        return cls(user=topic, client_id=partition)

    @property
    def topic(self) -> str:
        return self.user or DEFAULT

    @property
    def partition(self) -> str:
        """The partition's index as a string, or :data:`DEFAULT`."""
        return self.client_id or DEFAULT

    @property
    def key(self) -> tuple[str, str]:
        return (self.topic, self.partition)

    @property
    def path(self) -> str:
        return f"/topics/{self.topic}/partitions/{self.partition}"


def table_key(entity: QuotaEntity) -> TableKey:
    """Where an entity's entry is in a :class:`TopicQuotaTable` (raises ValueError for a client entity)."""
    if isinstance(entity, PartitionEntity):
        return entity.key
    if isinstance(entity, TopicEntity):
        return entity.topic
    raise ValueError(f"{entity.path}: not a topic or partition entity")


def _checked(entry: QuotaEntry) -> TableKey:
    """The table key of a valid topic or partition entry; raises ValueError naming what is wrong."""
    entity = entry.entity
    where = table_key(entity)
    for key, value in entry.quotas.items():
        if key not in TOPIC_KEYS:
            raise ValueError(f"{entity.path}: {key} is not a topic quota (known: {', '.join(TOPIC_KEYS)})")
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
            raise ValueError(f"{entity.path}: {key} must be a rate > 0, got {value!r}")
    return where


@dataclass(frozen=True, slots=True)
class TopicQuotaEntry(QuotaEntry):
    """A topic's entry; ``reject``: over its ``producer_byte_rate`` a Produce's partitions of the topic are refused
    with a retriable error rather than throttled (``on_exceed: reject``)."""

    reject: bool = False


_REJECTING = "on_exceed=reject"  # counted beside the quota keys: how many entries reject
_OF_PARTITION = "partition:"  # the prefix of a partition entry's counts


def _counted(entry: QuotaEntry) -> tuple[str, ...]:
    """What an entry adds to a table's counts: its quota keys, and whether it rejects (a partition entry's
    prefixed with :data:`_OF_PARTITION`)."""
    rejects = isinstance(entry, TopicQuotaEntry) and entry.reject
    counted = (*entry.quotas, _REJECTING) if rejects else tuple(entry.quotas)
    if isinstance(entry.entity, PartitionEntity):
        return tuple(_OF_PARTITION + key for key in counted)
    return counted


_ANY_TOPIC = frozenset({(False, True)})  # every topic is found by its name alone (SensorKeeper's BY_CLIENT_ID)


class TopicQuotaTable:
    """An immutable snapshot of the configured topic quotas; a change makes a new table (:meth:`with_changes`, work
    linear in the topics changed, as a dynamic record asks) and the whole table is swapped. Resolving costs two
    lookups at most."""

    __slots__ = ("_entries", "_default", "_counts")  # _counts: entries per quota key (and rejecting ones)

    def __init__(self, entries: Iterable[QuotaEntry] = ()) -> None:
        listing: dict[TableKey, QuotaEntry] = {}
        for entry in entries:
            key = _checked(entry)
            if key in listing:
                raise ValueError(f"{entry.entity.path}: configured more than once")
            listing[key] = entry
        self._set(ChunkedMap(listing), None)

    def _set(self, entries: ChunkedMap, counts: dict[str, int] | None) -> None:
        """Every field from ``entries`` (``counts``: how many entries set each key; None: counted now)."""
        self._entries = entries
        self._default: QuotaEntry | None = entries.get(DEFAULT)
        if counts is None:
            counts = {}
            for entry in entries.values():
                for key in _counted(entry):
                    counts[key] = counts.get(key, 0) + 1
        self._counts = {key: n for key, n in counts.items() if n > 0}

    def with_changes(self, changes: Mapping[TableKey, QuotaEntry | None]) -> TopicQuotaTable:
        """A new table: this one with each topic (or :data:`DEFAULT`, or ``(topic, partition)``) of ``changes`` set
        to its entry, or removed (None). This table is not changed; the work is linear in ``changes``, whatever the
        number of entries."""
        if not changes:
            return self
        counts = dict(self._counts)
        changing = self._entries.changing(len(changes))
        for topic, entry in changes.items():
            if entry is not None and _checked(entry) != topic:
                raise ValueError(f"{topic}: the entry is {entry.entity.path}'s")
            old = changing.get(topic)
            for key in () if old is None else _counted(old):
                counts[key] -= 1
            for key in () if entry is None else _counted(entry):
                counts[key] = counts.get(key, 0) + 1
            changing[topic] = REMOVED if entry is None else entry
        table = TopicQuotaTable.__new__(TopicQuotaTable)
        table._set(changing.done(), counts)
        return table

    @property
    def entries(self) -> tuple[QuotaEntry, ...]:
        return tuple(self._entries.values())

    def entry(self, key: TableKey) -> QuotaEntry | None:
        """The entry of one topic (or :data:`DEFAULT`), or of ``(topic, partition)``, if configured."""
        found: QuotaEntry | None = self._entries.get(key)
        return found

    def keys(self) -> frozenset[str]:
        """The quota keys configured for at least one topic (its own entry or ``<default>``)."""
        return frozenset(key for key in self._counts if key in TOPIC_KEYS)

    def partition_keys(self) -> frozenset[str]:
        """The quota keys configured for at least one partition entry."""
        return frozenset(key for key in TOPIC_KEYS if _OF_PARTITION + key in self._counts)

    def resolve_topic(self, key: str, topic: str) -> ResolvedQuota:
        """The quota for ``key`` that applies to ``topic``: its own entry's, else ``<default>``'s, else none."""
        tags = QuotaTags("", topic)
        for entry in self._candidates(topic):
            limit = entry.quotas.get(key)
            if limit is not None:
                return ResolvedQuota(float(limit), tags, entry.entity, entry.shadow)
        return ResolvedQuota(math.inf, tags)

    def _candidates(self, topic: str) -> tuple[QuotaEntry, ...]:
        """The entries that may apply to ``topic``, in precedence order: its own, then ``<default>``."""
        own = self._entries.get(topic) if topic != DEFAULT else None
        return tuple(e for e in (own, self._default) if e is not None)

    def resolve(self, key: str, user: str, client_id: str) -> ResolvedQuota:
        """As a client table resolves: ``client_id`` is the topic (``user`` plays no part)."""
        return self.resolve_topic(key, client_id)

    def matches(self, key: str, topic: str) -> list[ResolvedQuota]:
        """Every entry for ``key`` that matches ``topic``: its own, then ``<default>``'s; the first is the one that
        applies (for explaining, not the request path)."""
        tags = QuotaTags("", topic)
        return [
            ResolvedQuota(float(e.quotas[key]), tags, e.entity, e.shadow)
            for e in self._candidates(topic)
            if key in e.quotas
        ]

    def rejects(self, topic: str) -> bool:
        """Whether the entry that sets ``topic``'s ``producer_byte_rate`` refuses over-quota writes
        (``on_exceed: reject``) rather than throttling them."""
        if _REJECTING not in self._counts:
            return False  # no entry rejects: one lookup
        for entry in self._candidates(topic):
            if PRODUCER_BYTE_RATE in entry.quotas:
                return isinstance(entry, TopicQuotaEntry) and entry.reject
        return False

    def resolve_partition(self, key: str, topic: str, partition: str) -> ResolvedQuota:
        """The quota for ``key`` that applies to one partition of ``topic`` (its index as a string): the partition's
        own entry's, else the topic's ``partition: <default>`` entry's (each partition its own budget: tagged with
        the partition either way), else none. The topic's own quota applies beside it (:meth:`resolve_topic`)."""
        tags = QuotaTags(topic, partition)
        for entry in self._partition_candidates(topic, partition):
            limit = entry.quotas.get(key)
            if limit is not None:
                return ResolvedQuota(float(limit), tags, entry.entity, entry.shadow)
        return ResolvedQuota(math.inf, tags)

    def _partition_candidates(self, topic: str, partition: str) -> tuple[QuotaEntry, ...]:
        own = self._entries.get((topic, partition)) if partition != DEFAULT else None
        default = self._entries.get((topic, DEFAULT))
        return tuple(e for e in (own, default) if e is not None)

    def partition_matches(self, key: str, topic: str, partition: str) -> list[ResolvedQuota]:
        """As :meth:`matches`, for one partition: its own entry's, then its topic's ``partition: <default>``'s."""
        tags = QuotaTags(topic, partition)
        return [
            ResolvedQuota(float(e.quotas[key]), tags, e.entity, e.shadow)
            for e in self._partition_candidates(topic, partition)
            if key in e.quotas
        ]

    def partition_rejects(self, topic: str, partition: str) -> bool:
        """As :meth:`rejects`, for one partition's entries."""
        if _OF_PARTITION + _REJECTING not in self._counts:
            return False
        for entry in self._partition_candidates(topic, partition):
            if PRODUCER_BYTE_RATE in entry.quotas:
                return isinstance(entry, TopicQuotaEntry) and entry.reject
        return False

    def tag_parts(self, key: str) -> frozenset[tuple[bool, bool]]:
        return _ANY_TOPIC if key in self._counts else frozenset()

    def changes_since(self, older: TopicQuotaTable) -> frozenset[QuotaEntity] | None:
        return None  # every sensor is looked at again (at most quota.max.tracked.entities of <default> topics)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"TopicQuotaTable({len(self._entries)} entries, keys={sorted(self.keys())})"


def topic_table(
    values: Mapping[TableKey, Mapping[str, float]], shadow: Iterable[TableKey] = (), reject: Iterable[TableKey] = ()
) -> TopicQuotaTable:
    """From plain values, for tests and tools: ``{"orders": {"producer_byte_rate": 1048576}, "<default>": ...,
    ("orders", "3"): ...}``; the keys in ``shadow`` are shadow entries, those in ``reject`` refuse over-quota
    writes."""
    shadowed, rejecting = set(shadow), set(reject)
    return TopicQuotaTable(
        TopicQuotaEntry(
            PartitionEntity.of(*key) if isinstance(key, tuple) else TopicEntity.of(key),
            dict(quotas),
            key in shadowed,
            key in rejecting,
        )
        for key, quotas in values.items()
    )


EMPTY_TOPIC_TABLE = TopicQuotaTable()
