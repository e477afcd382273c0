"""What the proxy knows about the cluster's topics, as the brokers' own answers tell it. Pure: time is passed in.

One object, shared by every connection of the proxy:

- **topic ids** (KIP-516): Produce v13, Fetch v13+ and DeleteTopics v6 may name a topic by its id; the quotas and
  the internal-topic guard need its name. A re-created topic's new id replaces the old one.
- **partition counts**: the controller mutation quota (KIP-599) needs how many partitions a DeleteTopics deletes
  and a CreatePartitions adds; a count older than the configured age is not trusted, and the request that needs it
  waits for a lookup instead. Nothing is guessed.
- **the broker's default partition count**: what a CreateTopics with ``num_partitions: -1`` creates, once a broker's
  CreateTopics answer has shown it.

It is learnt on the response path only: Metadata answers through :func:`proxy.apis.metadata.learn`
(:meth:`Topics.learn_from_metadata`), and the answers to the mutations the proxy passes on (:meth:`Topics.created`,
:meth:`Topics.deleted`). Handlers only read it.

It is bounded (``metadata.max.tracked.topics``, issue 44): only topics a broker says exist are kept, the least
recently used dropped first past the bound; a name a broker answers UNKNOWN_TOPIC_OR_PARTITION for is forgotten,
never stored, so names a client makes up (2,000 of 200 characters in one Metadata request, as fast as it can send
them) cost nothing here and never push a real topic out. A fact dropped is only a fact to ask again: the handler
that needs it looks it up, and a lookup that finds nothing counts the topic as absent.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from typing import TYPE_CHECKING

from config.settings import DEFAULT_SETTINGS
from proxy.codec.error_codes import NONE, UNKNOWN_TOPIC_OR_PARTITION
from proxy.codec.primitives import ZERO_UUID

if TYPE_CHECKING:
    from proxy.cluster.kafka_clients import Answer

DEFAULT_MAX_TOPICS = DEFAULT_SETTINGS.metadata_max_tracked_topics


class _Topic:
    __slots__ = ("partitions", "learnt_ms", "topic_id")

    def __init__(self, partitions: int | None, learnt_ms: int, topic_id: uuid.UUID | None) -> None:
        self.partitions = partitions  # None: only its id is known (an answer with an error carried the id)
        self.learnt_ms = learnt_ms
        self.topic_id = topic_id


class Topics:
    __slots__ = ("_by_name", "_by_id", "max_topics", "default_partitions")

    def __init__(self, max_topics: int = DEFAULT_MAX_TOPICS) -> None:
        self._by_name: OrderedDict[str, _Topic] = OrderedDict()  # least recently used first
        self._by_id: dict[uuid.UUID, str] = {}  # the ids of the topics in _by_name, no other
        self.max_topics = max_topics
        self.default_partitions: int | None = None  # what the broker creates for num_partitions -1, once seen

    # -- reading --------------------------------------------------------------------------------------------------

    def name_for(self, topic_id: uuid.UUID) -> str | None:
        """The topic's name, or None if this id is not known (never seen, or dropped)."""
        name = self._by_id.get(topic_id)
        if name is not None:
            self._by_name.move_to_end(name)
        return name

    def id_for(self, name: str) -> uuid.UUID | None:
        """The topic's id, or None if unknown."""
        known = self._by_name.get(name)
        return None if known is None else known.topic_id

    def partitions(self, name: str, now_ms: int, max_age_ms: int) -> int | None:
        """The topic's partition count learnt within ``max_age_ms``, or None (not known, too old, or not there: a
        lookup tells)."""
        known = self._by_name.get(name)
        if known is None or known.partitions is None or now_ms - known.learnt_ms > max_age_ms:
            return None
        self._by_name.move_to_end(name)
        return known.partitions

    # -- learning, from the brokers' answers ----------------------------------------------------------------------

    def learn_from_metadata(self, msg: Answer, now_ms: int) -> None:
        """Every topic of a decoded Metadata response: its id (v10+) and its count; a topic the broker does not know
        (UNKNOWN_TOPIC_OR_PARTITION) is forgotten."""
        for topic in msg.topics:
            if not topic.name:
                continue
            if topic.error_code == UNKNOWN_TOPIC_OR_PARTITION:
                self.deleted(topic.name, now_ms)
                continue
            topic_id = getattr(topic, "topic_id", ZERO_UUID)
            topic_id = None if topic_id == ZERO_UUID else topic_id
            if topic.error_code == NONE:
                self._store(topic.name, len(topic.partitions), now_ms, topic_id)
            elif topic_id is not None:  # another error (authorization, leader not available) with the id
                known = self._by_name.get(topic.name)
                self._store(
                    topic.name,
                    None if known is None else known.partitions,
                    0 if known is None else known.learnt_ms,
                    topic_id,
                )

    def created(self, name: str, partitions: int, now_ms: int, default: bool = False) -> None:
        """A broker answered that ``name`` now has ``partitions`` (CreateTopics, CreatePartitions); ``default``: it
        was created with ``num_partitions: -1``, so that is the broker's default."""
        self._store(name, partitions, now_ms, None)
        if default:
            self.default_partitions = partitions

    def deleted(self, name: str, now_ms: int) -> None:
        """``name`` is gone (deleted through the proxy, or a broker does not know it): nothing is kept of it."""
        known = self._by_name.pop(name, None)
        if known is not None and known.topic_id is not None:
            self._by_id.pop(known.topic_id, None)

    def _store(self, name: str, partitions: int | None, now_ms: int, topic_id: uuid.UUID | None) -> None:
        old = self._by_name.get(name)
        if topic_id is None and old is not None:
            topic_id = old.topic_id  # an answer without ids (Metadata before v10, a mutation's) keeps the one known
        if old is not None and old.topic_id is not None and old.topic_id != topic_id:
            del self._by_id[old.topic_id]  # re-created: the old id names nothing now
        if topic_id is not None:
            stale = self._by_id.get(topic_id)
            if stale is not None and stale != name:
                self.deleted(stale, now_ms)  # an id is one topic's: the name it had before is not known any more
            self._by_id[topic_id] = name
        self._by_name[name] = _Topic(partitions, now_ms, topic_id)
        self._by_name.move_to_end(name)
        while len(self._by_name) > self.max_topics:
            _, dropped = self._by_name.popitem(last=False)
            if dropped.topic_id is not None:
                self._by_id.pop(dropped.topic_id, None)

    def __len__(self) -> int:
        """How many topics the proxy knows something of."""
        return len(self._by_name)
