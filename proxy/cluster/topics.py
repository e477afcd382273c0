"""What the proxy knows about the cluster's topics, as the brokers' own answers tell it. Pure: time is passed in.

One object, shared by every connection of the proxy:

- **topic ids** (KIP-516): Produce v13, Fetch v13+ and DeleteTopics v6 may name a topic by its id; the quotas and
  the internal-topic guard need its name. A re-created topic's new id replaces the old one.
- **partition counts**: the controller mutation quota (KIP-599) needs how many partitions a DeleteTopics deletes
  and a CreatePartitions adds; a count older than the configured age is not trusted, and the request that needs it
  waits for a lookup instead. Nothing is guessed.
- **the broker's default partition count**: what a CreateTopics with ``num_partitions: -1`` creates, once a broker's
  CreateTopics answer has shown it.

It is learnt on the response path only: every Metadata answer, the clients' and the proxy's own lookups alike,
through :func:`proxy.apis.metadata.learn` (:meth:`Topics.learn_from_metadata`), and the answers to the mutations
the proxy passes on (:meth:`Topics.created`, :meth:`Topics.deleted`). Handlers only read it.
"""

from __future__ import annotations

import uuid

from proxy.codec.error_codes import NONE, UNKNOWN_TOPIC_OR_PARTITION
from proxy.codec.messages import Message
from proxy.codec.primitives import ZERO_UUID


class Topics:
    __slots__ = ("_by_id", "_by_name", "_counts", "default_partitions")

    def __init__(self) -> None:
        self._by_id: dict[uuid.UUID, str] = {}
        self._by_name: dict[str, uuid.UUID] = {}
        self._counts: dict[str, tuple[int, int]] = {}  # topic name -> (partitions, learnt at, ms)
        self.default_partitions: int | None = None  # what the broker creates for num_partitions -1, once seen

    # -- reading --------------------------------------------------------------------------------------------------

    def name_for(self, topic_id: uuid.UUID) -> str | None:
        """The topic's name, or None if this id was never seen."""
        return self._by_id.get(topic_id)

    def id_for(self, name: str) -> uuid.UUID | None:
        """The topic's id, or None if unknown."""
        return self._by_name.get(name)

    def partitions(self, name: str, now_ms: int, max_age_ms: int) -> int | None:
        """The topic's partition count learnt within ``max_age_ms`` (0: it does not exist), or None (not known, or
        too old)."""
        known = self._counts.get(name)
        if known is None or now_ms - known[1] > max_age_ms:
            return None
        return known[0]

    # -- learning, from the brokers' answers ----------------------------------------------------------------------

    def learn_from_metadata(self, msg: Message, now_ms: int) -> None:
        """Every topic of a decoded Metadata response: its id (v10+), and its count or its absence
        (UNKNOWN_TOPIC_OR_PARTITION)."""
        for topic in msg.topics:
            if not topic.name:
                continue
            if topic.error_code == NONE:
                self._counts[topic.name] = (len(topic.partitions), now_ms)
            elif topic.error_code == UNKNOWN_TOPIC_OR_PARTITION:
                self._counts[topic.name] = (0, now_ms)
            if getattr(topic, "topic_id", ZERO_UUID) != ZERO_UUID:
                self._learn_id(topic.name, topic.topic_id)

    def _learn_id(self, name: str, topic_id: uuid.UUID) -> None:
        old = self._by_name.get(name)
        if old is not None and old != topic_id:
            del self._by_id[old]
        stale = self._by_id.get(topic_id)
        if stale is not None and stale != name:
            del self._by_name[stale]
        self._by_id[topic_id] = name
        self._by_name[name] = topic_id

    def created(self, name: str, partitions: int, now_ms: int, default: bool = False) -> None:
        """A broker answered that ``name`` now has ``partitions`` (CreateTopics, CreatePartitions); ``default``: it
        was created with ``num_partitions: -1``, so that is the broker's default."""
        self._counts[name] = (partitions, now_ms)
        if default:
            self.default_partitions = partitions

    def deleted(self, name: str, now_ms: int) -> None:
        self._counts[name] = (0, now_ms)

    def __len__(self) -> int:
        """How many topics the proxy knows something of."""
        return len(self._counts.keys() | self._by_name.keys())
