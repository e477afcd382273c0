"""proxy.cluster.created_counts: the partition counts of topics a CreateTopics v4 created with -1, looked up off the
request path with the proxy's own Metadata request (a fake OwnKafka here: what is asked, what it answers)."""

from __future__ import annotations

import asyncio

from proxy.cluster.created_counts import CreatedCounts
from proxy.cluster.kafka_clients import ClusterLook


class FakeKafka:
    """Answers each look with the next of ``answers`` (a dict topic -> partition count, or None: no answer)."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.asked = []

    async def look(self, topics, timeout_s, client_id):
        self.asked.append(sorted(topics))
        await asyncio.sleep(0)
        answer = self.answers.pop(0)
        if answer is None:
            return None
        return ClusterLook({}, {t: frozenset(range(answer[t])) if t in answer else frozenset() for t in topics})


def run(counts, wants):
    got = {}

    async def main():
        for name in wants:
            counts.want(name, lambda n, name=name: got.setdefault(name, []).append(n))
        await asyncio.sleep(0.05)
        await counts.stop()

    asyncio.run(main())
    return got


def test_topics_wanted_together_are_looked_up_in_one_request_and_handed_their_counts():
    kafka = FakeKafka({"a": 3, "b": 6})
    unknown = []
    counts = CreatedCounts(kafka, 1.0, retry_s=0, on_unknown=lambda: unknown.append(1))
    assert run(counts, ["a", "b", "a"]) == {"a": [3, 3], "b": [6]}
    assert kafka.asked == [["a", "b"]] and counts.unknown == 0 and unknown == []


def test_a_topic_not_yet_in_the_metadata_is_asked_again_then_unknown():
    """The broker's metadata may lag the controller's answer: asked again (only for what is missing); after the
    last try the count is None, counted as unknown (the quota charges its fallback)."""
    kafka = FakeKafka({"a": 3}, None, {"b": 2})
    counts = CreatedCounts(kafka, 1.0, tries=3, retry_s=0)
    assert run(counts, ["a", "b", "c"]) == {"a": [3], "b": [2], "c": [None]}
    assert kafka.asked == [["a", "b", "c"], ["b", "c"], ["b", "c"]]
    assert counts.unknown == 1


def test_no_kafka_or_too_many_waiting_hands_none_at_once():
    counts = CreatedCounts(None, 1.0)
    got = []
    counts.want("a", got.append)
    assert got == [None] and counts.unknown == 1
    bounded = CreatedCounts(FakeKafka({"a": 1}), 1.0, max_pending=1, retry_s=0)
    assert run(bounded, ["a", "b"]) == {"a": [1], "b": [None]}


def test_stop_hands_none_to_whoever_still_waits():
    class Silent:
        async def look(self, topics, timeout_s, client_id):
            await asyncio.sleep(60)

    counts = CreatedCounts(Silent(), 1.0)
    assert run(counts, ["a"]) == {"a": [None]}
    assert counts.unknown == 1
