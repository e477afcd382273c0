"""Reading one of the proxy's own topics from the beginning, and noticing when it is no longer the same topic.

The config follower and the volume-usage follower each assign an aiokafka consumer to every partition of their
topic (no consumer group) and read it from offset 0. A topic can be deleted (DeleteTopics) and created again under
the same name: the consumer then sits on partitions that no longer exist, or at an offset past the new log's end,
and reads nothing ever again. :class:`TopicReader` looks at the topic every :data:`CHECK_S` and says why it has
changed, from what aiokafka's metadata and ListOffsets show (aiokafka does not carry topic ids):

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
:data:`CALL_TIMEOUT_S`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

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
    """One consumer reading every partition of ``topic`` from the beginning."""

    consumer: object
    topic: str
    offsets: dict = field(default_factory=dict)  # TopicPartition -> Offsets

    answered: bool = False  # whether the cluster answered the last metadata update

    async def refresh(self) -> bool:
        """A metadata update, bounded; False when the cluster did not answer."""
        try:
            self.answered = bool(await asyncio.wait_for(self.consumer._client.force_metadata_update(),
                                                        CALL_TIMEOUT_S))
        except asyncio.TimeoutError:
            self.answered = False
        return self.answered

    def partitions(self) -> set[int]:
        return set(self.consumer.partitions_for_topic(self.topic) or ())

    async def open(self) -> bool:
        """Assign every partition and seek to the beginning; False when the topic does not exist (yet)."""
        from aiokafka import TopicPartition

        partitions = self.partitions()
        if not partitions and await self.refresh():
            partitions = self.partitions()
        if not partitions:
            return False
        tps = [TopicPartition(self.topic, p) for p in sorted(partitions)]
        self.consumer.assign(tps)
        await asyncio.wait_for(self.consumer.seek_to_beginning(*tps), CALL_TIMEOUT_S)
        self.offsets = {tp: Offsets() for tp in tps}
        await self.changed()  # the first look: what "backwards" is measured against
        return True

    async def end_offsets(self) -> dict:
        return await asyncio.wait_for(self.consumer.end_offsets(list(self.offsets)), CALL_TIMEOUT_S)

    async def positions(self) -> dict:
        return {tp: await asyncio.wait_for(self.consumer.position(tp), CALL_TIMEOUT_S) for tp in self.offsets}

    async def changed(self) -> str | None:
        """Why the topic is no longer the one being read (deleted, recreated, repartitioned), or None (also when the
        cluster does not answer: nothing can be told then)."""
        if not await self.refresh():
            return None
        partitions = self.partitions()
        if not partitions:
            return "was deleted"
        if partitions != {tp.partition for tp in self.offsets}:
            return f"has partitions {sorted(partitions)} where {sorted(tp.partition for tp in self.offsets)} were read"
        starts = await asyncio.wait_for(self.consumer.beginning_offsets(list(self.offsets)), CALL_TIMEOUT_S)
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
