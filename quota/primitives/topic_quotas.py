"""Per-topic byte-rate quotas: the ``{topic: NAME}`` and ``{topic: <default>}`` entities and their immutable table.
Pure.

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

TOPIC_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE)
"""The quota keys a topic entity takes."""

TOPIC_PRODUCER_BYTE_RATE = "topic_producer_byte_rate"
TOPIC_CONSUMER_BYTE_RATE = "topic_consumer_byte_rate"
"""The topic quotas' names where they stand beside the client quotas (shadow counts, evictions, ``explain``)."""

NAMES = {PRODUCER_BYTE_RATE: TOPIC_PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE: TOPIC_CONSUMER_BYTE_RATE}


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


def _checked(entry: QuotaEntry) -> str:
    """The topic (or :data:`DEFAULT`) of a valid topic entry; raises ValueError naming what is wrong."""
    entity = entry.entity
    if not isinstance(entity, TopicEntity):
        raise ValueError(f"{entity.path}: not a topic entity")
    for key, value in entry.quotas.items():
        if key not in TOPIC_KEYS:
            raise ValueError(f"{entity.path}: {key} is not a topic quota (known: {', '.join(TOPIC_KEYS)})")
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
            raise ValueError(f"{entity.path}: {key} must be a rate > 0, got {value!r}")
    return entity.topic


@dataclass(frozen=True, slots=True)
class TopicQuotaEntry(QuotaEntry):
    """A topic's entry; ``reject``: over its ``producer_byte_rate`` a Produce's partitions of the topic are refused
    with a retriable error rather than throttled (``on_exceed: reject``)."""

    reject: bool = False


_REJECTING = "on_exceed=reject"  # counted beside the quota keys: how many entries reject


def _counted(entry: QuotaEntry) -> tuple[str, ...]:
    """What an entry adds to a table's counts: its quota keys, and whether it rejects."""
    rejects = isinstance(entry, TopicQuotaEntry) and entry.reject
    return (*entry.quotas, _REJECTING) if rejects else tuple(entry.quotas)


_ANY_TOPIC = frozenset({(False, True)})  # every topic is found by its name alone (SensorKeeper's BY_CLIENT_ID)


class TopicQuotaTable:
    """An immutable snapshot of the configured topic quotas; a change makes a new table (:meth:`with_changes`, work
    linear in the topics changed, as a dynamic record asks) and the whole table is swapped. Resolving costs two
    lookups at most."""

    __slots__ = ("_entries", "_default", "_counts")  # _counts: entries per quota key (and rejecting ones)

    def __init__(self, entries: Iterable[QuotaEntry] = ()) -> None:
        listing: dict[str, QuotaEntry] = {}
        for entry in entries:
            topic = _checked(entry)
            if topic in listing:
                raise ValueError(f"/topics/{topic}: configured more than once")
            listing[topic] = entry
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

    def with_changes(self, changes: Mapping[str, QuotaEntry | None]) -> TopicQuotaTable:
        """A new table: this one with each topic (or :data:`DEFAULT`) of ``changes`` set to its entry, or removed
        (None). This table is not changed; the work is linear in ``changes``, whatever the number of entries."""
        if not changes:
            return self
        counts = dict(self._counts)
        changing = self._entries.changing(len(changes))
        for topic, entry in changes.items():
            if entry is not None and _checked(entry) != topic:
                raise ValueError(f"/topics/{topic}: the entry is {entry.entity.path}'s")
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

    def entry(self, topic: str) -> QuotaEntry | None:
        """The entry of one topic (or :data:`DEFAULT`), if configured."""
        found: QuotaEntry | None = self._entries.get(topic)
        return found

    def keys(self) -> frozenset[str]:
        """The quota keys configured for at least one topic."""
        return frozenset(key for key in self._counts if key != _REJECTING)

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

    def tag_parts(self, key: str) -> frozenset[tuple[bool, bool]]:
        return _ANY_TOPIC if key in self._counts else frozenset()

    def changes_since(self, older: TopicQuotaTable) -> frozenset[QuotaEntity] | None:
        return None  # every sensor is looked at again (at most quota.max.tracked.entities of <default> topics)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"TopicQuotaTable({len(self._entries)} entries, keys={sorted(self.keys())})"


def topic_table(
    values: Mapping[str, Mapping[str, float]], shadow: Iterable[str] = (), reject: Iterable[str] = ()
) -> TopicQuotaTable:
    """From plain values, for tests and tools: ``{"orders": {"producer_byte_rate": 1048576}, "<default>": ...}``;
    the topics in ``shadow`` are shadow entries, those in ``reject`` refuse over-quota writes."""
    shadowed, rejecting = set(shadow), set(reject)
    return TopicQuotaTable(
        TopicQuotaEntry(TopicEntity.of(topic), dict(quotas), topic in shadowed, topic in rejecting)
        for topic, quotas in values.items()
    )


EMPTY_TOPIC_TABLE = TopicQuotaTable()
