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


_ANY_TOPIC = frozenset({(False, True)})  # every topic is found by its name alone (SensorKeeper's BY_CLIENT_ID)


class TopicQuotaTable:
    """An immutable snapshot of the configured topic quotas; swap a whole new table to change anything. Resolving
    costs two dict lookups at most."""

    __slots__ = ("_entries", "_named", "_default")

    def __init__(self, entries: Iterable[QuotaEntry] = ()) -> None:
        listing: dict[str, QuotaEntry] = {}
        named: dict[str, dict[str, tuple[float, QuotaEntry]]] = {}
        default: dict[str, tuple[float, QuotaEntry]] = {}
        for entry in entries:
            entity = entry.entity
            if not isinstance(entity, TopicEntity):
                raise ValueError(f"{entity.path}: not a topic entity")
            if entity.topic in listing:
                raise ValueError(f"{entity.path}: configured more than once")
            listing[entity.topic] = entry
            for key, value in entry.quotas.items():
                if key not in TOPIC_KEYS:
                    raise ValueError(f"{entity.path}: {key} is not a topic quota (known: {', '.join(TOPIC_KEYS)})")
                if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
                    raise ValueError(f"{entity.path}: {key} must be a rate > 0, got {value!r}")
                found = (float(value), entry)
                if entity.topic == DEFAULT:
                    default[key] = found
                else:
                    named.setdefault(key, {})[entity.topic] = found
        self._entries = listing
        self._named = named
        self._default = default

    @property
    def entries(self) -> tuple[QuotaEntry, ...]:
        return tuple(self._entries.values())

    def entry(self, topic: str) -> QuotaEntry | None:
        """The entry of one topic (or :data:`DEFAULT`), if configured."""
        return self._entries.get(topic)

    def keys(self) -> frozenset[str]:
        """The quota keys configured for at least one topic."""
        return frozenset(self._named) | frozenset(self._default)

    def resolve_topic(self, key: str, topic: str) -> ResolvedQuota:
        """The quota for ``key`` that applies to ``topic``: its own entry's, else ``<default>``'s, else none."""
        found = self._named.get(key, {}).get(topic) if topic != DEFAULT else None
        if found is None:
            found = self._default.get(key)
        tags = QuotaTags("", topic)
        if found is None:
            return ResolvedQuota(math.inf, tags)
        limit, entry = found
        return ResolvedQuota(limit, tags, entry.entity, entry.shadow)

    def resolve(self, key: str, user: str, client_id: str) -> ResolvedQuota:
        """As a client table resolves: ``client_id`` is the topic (``user`` plays no part)."""
        return self.resolve_topic(key, client_id)

    def matches(self, key: str, topic: str) -> list[ResolvedQuota]:
        """Every entry for ``key`` that matches ``topic``: its own, then ``<default>``'s; the first is the one that
        applies (for explaining, not the request path)."""
        tags = QuotaTags("", topic)
        found = [self._named.get(key, {}).get(topic), self._default.get(key)]
        return [ResolvedQuota(limit, tags, entry.entity, entry.shadow) for limit, entry in filter(None, found)]

    def tag_parts(self, key: str) -> frozenset[tuple[bool, bool]]:
        return _ANY_TOPIC if key in self._named or key in self._default else frozenset()

    def changes_since(self, older: TopicQuotaTable) -> frozenset[QuotaEntity] | None:
        return None  # every sensor is looked at again: topic tables are YAML's, swapped at most on a reload

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"TopicQuotaTable({len(self._entries)} entries, keys={sorted(self.keys())})"


def topic_table(values: Mapping[str, Mapping[str, float]], shadow: Iterable[str] = ()) -> TopicQuotaTable:
    """From plain values, for tests and tools: ``{"orders": {"producer_byte_rate": 1048576}, "<default>": ...}``;
    the topics in ``shadow`` are shadow entries."""
    shadowed = set(shadow)
    return TopicQuotaTable(
        QuotaEntry(TopicEntity.of(topic), dict(quotas), topic in shadowed) for topic, quotas in values.items()
    )


EMPTY_TOPIC_TABLE = TopicQuotaTable()
