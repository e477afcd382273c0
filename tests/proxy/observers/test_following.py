"""How a follower tells that its topic is no longer the one it was reading (deleted and recreated): pure."""

from __future__ import annotations

from config.model import Address
from proxy.cluster.kafka_clients import ClusterLook
from proxy.observers.following import Offsets, log_changed, log_end


def test_the_same_log_growing_or_compacted_is_not_a_change():
    seen = Offsets(start=0, end=10, position=10, listed=10)
    assert log_changed(seen, 0, 12, None, 11) is None
    assert log_changed(seen, 4, 12, 12, 12) is None  # the log start moves forward (retention, DeleteRecords)
    assert log_changed(seen, 0, 10, 14, 14) is None  # Tansu: listed short of the fetched end, as before


def test_offsets_going_backwards_mean_a_new_log_under_the_same_name():
    seen = Offsets(start=3, end=10, position=10)
    assert "start offset" in log_changed(seen, 0, 12, None, 10)
    assert "end offset went back" in log_changed(Offsets(0, 10, 8), 0, 2, None, 8)
    assert "below the position" in log_changed(Offsets(0, 0, 0), 0, 2, None, 5)
    assert "out of range" in log_changed(Offsets(0, 10, 10), 0, 10, None, 0)


def test_a_listed_end_going_back_is_a_new_log_though_the_old_high_watermark_stays():
    """Seen in CI against Tansu: the volume topic deleted and re-created by the publisher within a check interval;
    the consumer's fetches at its old position fail, so its high watermark stays the old log's (40) and the higher
    of the two ends never fell. The listed end of the new log (2) is below the one listed before (39)."""
    seen = Offsets(start=0, end=40, position=40, listed=39)
    assert "listed log end offset went back from 39 to 2" in log_changed(seen, 0, 2, 40, 40)


class _Kafka:
    """What TopicReader asks of the cluster (proxy.cluster.kafka_clients.OwnKafka.look): scripted Metadata
    answers, one per look (the last one repeats); None is a cluster that does not answer."""

    def __init__(self, *partitions: frozenset[int] | None) -> None:
        self.answers = list(partitions) or [frozenset({0})]
        self.looks = 0

    async def look(self, topics, timeout_s: float, client_id: str = "") -> ClusterLook | None:
        answer = self.answers[min(self.looks, len(self.answers) - 1)]
        self.looks += 1
        if answer is None:
            return None
        return ClusterLook({1: Address("b", 9092)}, {topic: answer for topic in topics})


class _Consumer:
    """What TopicReader asks of an aiokafka consumer (its public API), answering as Tansu does (a scripted
    stand-in: the offsets Tansu gives are set by hand). ListOffsets "latest" is the last batch's base offset + 1;
    the fetch's high watermark is the log's real end."""

    def __init__(self, listed_end: int, fetched_end: int | None, position: int) -> None:
        self.listed_end, self.fetched_end, self._position = listed_end, fetched_end, position
        self.list_offsets_calls = 0

    async def beginning_offsets(self, tps):
        return {tp: 0 for tp in tps}

    async def end_offsets(self, tps):
        self.list_offsets_calls += 1
        return {tp: self.listed_end for tp in tps}

    async def position(self, tp) -> int:
        return self._position

    def highwater(self, tp) -> int | None:
        return self.fetched_end


def _changed(consumer: _Consumer, kafka: _Kafka | None = None) -> str | None:
    import asyncio

    from aiokafka import TopicPartition

    from proxy.observers.following import TopicReader

    reader = TopicReader(consumer, "configs", kafka or _Kafka(), {TopicPartition("configs", 0): Offsets()})
    return asyncio.run(reader.changed())


def test_a_log_end_listed_below_what_the_fetch_answered_is_not_a_new_log():
    """Tansu lists the end of a log whose last batch holds 313 records (offsets 199362..199674) as 199363; the
    follower has read to 199675, as far as its fetch said the log goes. Before, that was a new log: the whole topic
    was read again from the beginning (seen in bench/dynamic_config.py during its burst)."""
    consumer = _Consumer(listed_end=199_363, fetched_end=199_675, position=199_675)
    assert _changed(consumer) is None
    assert consumer.list_offsets_calls == 1
    assert log_end(199_363, 199_675) == 199_675 and log_end(10, None) == 10


def test_a_recreated_shorter_log_is_still_seen_when_the_fetch_answers_its_end():
    """Tansu, the topic deleted and made again with 3 records while the follower sat at 50: its fetch answers
    the new log's high watermark (3, no error), so both say the log ends below the position."""
    assert "below the position" in _changed(_Consumer(listed_end=1, fetched_end=3, position=50))
    assert "below the position" in _changed(_Consumer(listed_end=2, fetched_end=None, position=50))


def test_a_deleted_topic_is_told_from_a_cluster_that_does_not_answer():
    """The cluster's Metadata answer: the topic unknown (UNKNOWN_TOPIC_OR_PARTITION, no partitions) is deleted; no
    answer at all tells nothing (the follower keeps reading what it has); other partitions are a new topic."""
    consumer = _Consumer(listed_end=5, fetched_end=5, position=5)
    assert _changed(consumer, _Kafka(frozenset())) == "was deleted"
    assert _changed(consumer, _Kafka(None)) is None
    assert "has partitions [0, 1]" in _changed(consumer, _Kafka(frozenset({0, 1})))
    assert _changed(consumer, _Kafka(frozenset({0}))) is None
