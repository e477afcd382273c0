"""Reading one of the proxy's own topics from the beginning, and noticing when it is no longer the same topic.

The config follower and the volume-usage follower each assign an aiokafka consumer to every partition of their
topic (no consumer group) and read it from offset 0. A topic can be deleted (DeleteTopics) and created again under
the same name: the consumer then sits on partitions that no longer exist, or at an offset past the new log's end,
and reads nothing ever again. :class:`TopicReader` looks at the topic every :data:`CHECK_S` and says why it has
changed, from what a Metadata answer of the proxy's own (:meth:`proxy.cluster.kafka_clients.OwnKafka.look`) and
the consumer's ListOffsets show:

- the topic is gone from the metadata: deleted;
- its partitions are not the ones assigned;
- a partition's log start offset went backwards, its listed log end (ListOffsets "latest") went backwards, or its
  log end offset is below what was already seen there or below the consumer's position: a new log under the same
  name. The log end is the higher of ListOffsets
  "latest" and the high watermark of the consumer's last fetch (:func:`log_end`): Tansu answers "latest" with
  the last batch's base offset + 1, below the position whenever that batch held several records, and taking that
  for a new log read the whole topic again for nothing (200,000 records in bench/dynamic_config.py, its state
  built twice over); a real Kafka gives the same offset both ways. The listed end is also watched on its own: after
  a DeleteTopics and a re-creation the fetch that errors keeps the old log's high watermark, so the higher of the
  two stays up while the listed end of the new, shorter log falls;
- the consumer's position went backwards without being told to (aiokafka's reset after OFFSET_OUT_OF_RANGE).

The follower then drops its consumer and starts again from the beginning. Every call to the broker is bounded by
:data:`CALL_TIMEOUT_S`. The same Metadata answer names the cluster's brokers (:attr:`TopicReader.last`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from proxy.cluster.kafka_clients import ClusterLook, OwnKafka
from proxy.ground.tasks import wait_for

if TYPE_CHECKING:
    from aiokafka import AIOKafkaConsumer

CHECK_S = 1.0  # how often a follower looks at its topic
CALL_TIMEOUT_S = 5.0  # each metadata or offsets request of a follower


@dataclass
class Offsets:
    """What was seen of one partition: the highest log start and end offsets, the listed end on its own, and the
    consumer's position."""

    start: int = 0
    end: int = 0
    position: int = 0
    listed: int = 0


def log_end(listed: int, fetched: int | None) -> int:
    """A partition's log end: the higher of ListOffsets "latest" (``listed``) and the high watermark its last fetch
    answered (``fetched``, None before one). Each is a broker's word that the log reaches that far: a new, shorter
    log under the same name shows in both (Tansu's fetch answers the new log's end; a real Kafka's answers
    OFFSET_OUT_OF_RANGE, the consumer's position goes back to the beginning and that is seen instead)."""
    return listed if fetched is None else max(listed, fetched)


def log_changed(seen: Offsets, start: int, listed: int, fetched: int | None, position: int) -> str | None:
    """Why a partition's log is not the one read so far (pure), or None: ``listed`` is ListOffsets "latest",
    ``fetched`` the last fetch's high watermark (:func:`log_end`)."""
    end = log_end(listed, fetched)
    if start < seen.start:
        return f"its log start offset went back from {seen.start} to {start}"
    if listed < seen.listed:
        return f"its listed log end offset went back from {seen.listed} to {listed}"
    if end < seen.end:
        return f"its log end offset went back from {seen.end} to {end}"
    if end < position:
        return f"its log end offset {end} is below the position {position} already read"
    if position < seen.position:
        return f"the position went back from {seen.position} to {position} (offset out of range)"
    return None


@dataclass
class TopicReader:
    """One consumer reading every partition of ``topic`` from the beginning; ``kafka`` answers what the cluster
    holds (its Metadata, asked afresh at every look)."""

    consumer: AIOKafkaConsumer
    topic: str
    kafka: OwnKafka
    offsets: dict = field(default_factory=dict)  # TopicPartition -> Offsets
    client_id: str = "kafka-quota-proxy"

    last: ClusterLook | None = None  # the cluster's answer to the last look; None when it did not answer

    @property
    def answered(self) -> bool:
        """Whether the cluster answered the last look."""
        return self.last is not None

    async def refresh(self) -> bool:
        """Look at the cluster's metadata for the topic, bounded; False when the cluster did not answer."""
        self.last = await self.kafka.look([self.topic], CALL_TIMEOUT_S, self.client_id)
        return self.last is not None

    def partitions(self) -> frozenset[int] | None:
        """The topic's partitions in the last answer (empty: it does not exist), None when nothing can be told."""
        return None if self.last is None else self.last.partitions.get(self.topic)

    async def open(self) -> bool:
        """Assign every partition and seek to the beginning; False when the topic does not exist (yet). Raises
        ConnectionError when the cluster does not answer, or answers another error for the topic (it cannot be told
        missing then)."""
        from aiokafka import TopicPartition

        if not await self.refresh():
            raise ConnectionError(f"no bootstrap server answered Metadata for {self.topic}")
        partitions = self.partitions()
        if partitions is None:  # the cluster answered (refresh), with an error for the topic
            why = None if self.last is None else self.last.errors.get(self.topic)
            raise ConnectionError(f"Metadata for {self.topic}: {why}")
        if not partitions:
            return False
        tps = [TopicPartition(self.topic, p) for p in sorted(partitions)]
        self.consumer.assign(tps)
        await wait_for(self.consumer.seek_to_beginning(*tps), CALL_TIMEOUT_S)
        self.offsets = {tp: Offsets() for tp in tps}
        await self.changed()  # the first look: what "backwards" is measured against
        return True

    async def end_offsets(self) -> dict:
        return await wait_for(self.consumer.end_offsets(list(self.offsets)), CALL_TIMEOUT_S)

    async def positions(self) -> dict:
        return {tp: await wait_for(self.consumer.position(tp), CALL_TIMEOUT_S) for tp in self.offsets}

    async def changed(self) -> str | None:
        """Why the topic is no longer the one being read (deleted, recreated, repartitioned), or None (also when the
        cluster does not answer: nothing can be told then)."""
        if not await self.refresh():
            return None
        partitions = self.partitions()
        if partitions is None:
            return None  # an error for this topic (not that it is missing): nothing can be told
        if not partitions:
            return "was deleted"
        if partitions != {tp.partition for tp in self.offsets}:
            return f"has partitions {sorted(partitions)} where {sorted(tp.partition for tp in self.offsets)} were read"
        starts = await wait_for(self.consumer.beginning_offsets(list(self.offsets)), CALL_TIMEOUT_S)
        ends = await self.end_offsets()
        positions = await self.positions()
        for tp, seen in self.offsets.items():
            fetched = self.consumer.highwater(tp)
            why = log_changed(seen, starts[tp], ends[tp], fetched, positions[tp])
            if why is not None:
                return f"partition {tp.partition}: {why}"
            seen.start, seen.end, seen.position = starts[tp], log_end(ends[tp], fetched), positions[tp]
            seen.listed = ends[tp]
        return None


__all__ = ["CALL_TIMEOUT_S", "CHECK_S", "Offsets", "TopicReader", "log_changed", "log_end"]
