"""Partition counts of the cluster's topics, as the broker's own answers tell them. Pure: time is passed in.

The controller mutation quota (KIP-599) needs how many partitions a DeleteTopics deletes and a CreatePartitions
adds, and how many a CreateTopics with ``num_partitions: -1`` creates (the broker's default). Counts are learnt
off the request path from every Metadata response the proxy passes on, from CreateTopics responses (v5+ say how
many partitions were created) and from the proxy's own lookups; a count older than the configured age is not
trusted, and the request that needs it waits for a lookup instead. Nothing is guessed.
"""

from __future__ import annotations

from proxy.codec.error_codes import UNKNOWN_TOPIC_OR_PARTITION
from proxy.codec.messages import Message


class TopicPartitions:
    __slots__ = ("_counts", "default_partitions")

    def __init__(self) -> None:
        self._counts: dict[str, tuple[int, int]] = {}  # topic name -> (partitions, learnt at, ms)
        self.default_partitions: int | None = None  # what the broker creates for num_partitions -1, once seen

    def partitions(self, name: str, now_ms: int, max_age_ms: int) -> int | None:
        """The topic's partition count learnt within ``max_age_ms``, or None (not known, or too old)."""
        known = self._counts.get(name)
        if known is None or now_ms - known[1] > max_age_ms:
            return None
        return known[0]

    def learn_from_metadata(self, msg: Message, now_ms: int) -> None:
        """Every topic of a decoded Metadata response: its count, or its absence (UNKNOWN_TOPIC_OR_PARTITION)."""
        for topic in msg.topics:
            if not topic.name:
                continue
            if topic.error_code == 0:
                self._counts[topic.name] = (len(topic.partitions), now_ms)
            elif topic.error_code == UNKNOWN_TOPIC_OR_PARTITION:
                self._counts[topic.name] = (0, now_ms)

    def created(self, name: str, partitions: int, now_ms: int) -> None:
        self._counts[name] = (partitions, now_ms)

    def deleted(self, name: str, now_ms: int) -> None:
        self._counts[name] = (0, now_ms)

    def __len__(self) -> int:
        return len(self._counts)
