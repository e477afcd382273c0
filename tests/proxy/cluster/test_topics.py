"""What the proxy knows about topics (proxy.cluster.topics.Topics), learnt from the brokers' answers: pure."""

from __future__ import annotations

import uuid

from proxy.cluster.topics import Topics
from proxy.codec.apis import METADATA
from proxy.codec.error_codes import UNKNOWN_TOPIC_OR_PARTITION
from proxy.codec.messages import decode_response, encode_response, new_response


def metadata(version: int = 12, **fields):
    msg = new_response(METADATA, version, **fields)
    return decode_response(METADATA, version, encode_response(METADATA, version, msg))


def test_ids_are_learnt_from_metadata_and_a_recreated_topic_replaces_its_old_id():
    a, b = uuid.uuid4(), uuid.uuid4()
    topics = Topics()
    topics.learn_from_metadata(
        metadata(topics=[{"name": "orders", "topic_id": a}, {"name": "audit", "topic_id": b}]), 0
    )
    assert topics.name_for(a) == "orders" and topics.id_for("audit") == b and topics.name_for(uuid.uuid4()) is None
    c = uuid.uuid4()
    topics.learn_from_metadata(metadata(topics=[{"name": "orders", "topic_id": c}]), 0)
    assert topics.name_for(a) is None and topics.name_for(c) == "orders"


def test_counts_are_learnt_from_the_same_answer_and_age():
    topics = Topics()
    topics.learn_from_metadata(
        metadata(
            topics=[
                {
                    "name": "orders",
                    "topic_id": uuid.uuid4(),
                    "partitions": [{"partition_index": 0}, {"partition_index": 1}],
                },
                {"name": "gone", "error_code": UNKNOWN_TOPIC_OR_PARTITION},
            ]
        ),
        1000,
    )
    assert topics.partitions("orders", 1500, max_age_ms=1000) == 2
    assert topics.partitions("gone", 1500, max_age_ms=1000) is None  # not kept: a lookup tells it is absent
    assert topics.partitions("orders", 2500, max_age_ms=1000) is None  # too old: looked up again
    assert topics.partitions("never", 1500, max_age_ms=1000) is None
    assert len(topics) == 1


def test_mutation_answers_teach_counts_and_the_default():
    topics = Topics()
    topics.created("a", 3, 0)
    assert topics.default_partitions is None
    topics.created("b", 6, 0, default=True)  # created with num_partitions -1: the broker's default
    assert topics.default_partitions == 6 and topics.partitions("b", 0, 10) == 6
    topics.deleted("a", 5)
    assert topics.partitions("a", 5, 10) is None and len(topics) == 1


def test_old_metadata_versions_without_ids_teach_counts_only():
    topics = Topics()
    topics.learn_from_metadata(metadata(version=9, topics=[{"name": "t", "partitions": [{"partition_index": 0}]}]), 0)
    assert topics.partitions("t", 0, 10) == 1 and topics.id_for("t") is None


def test_names_a_broker_does_not_know_are_never_kept_and_forget_what_was():
    """Issue 44 (T1): 2,000 made-up names a request made 0-partition entries that were never dropped."""
    topics = Topics(max_topics=10)
    known = uuid.uuid4()
    topics.learn_from_metadata(
        metadata(topics=[{"name": "orders", "topic_id": known, "partitions": [{"partition_index": 0}]}]), 0
    )
    for n in range(50):
        topics.learn_from_metadata(
            metadata(
                topics=[
                    {"name": f"made-up-{n}-{i}" + "x" * 200, "error_code": UNKNOWN_TOPIC_OR_PARTITION}
                    for i in range(40)
                ]
            ),
            0,
        )
    assert len(topics) == 1 and topics.name_for(known) == "orders"  # the real topic was not crowded out
    topics.learn_from_metadata(metadata(topics=[{"name": "orders", "error_code": UNKNOWN_TOPIC_OR_PARTITION}]), 1)
    assert len(topics) == 0 and topics.name_for(known) is None and topics.partitions("orders", 1, 10) is None


def test_the_table_keeps_at_most_its_bound_dropping_the_least_recently_used():
    topics = Topics(max_topics=3)
    ids = {name: uuid.uuid4() for name in "abcd"}
    for name in "abc":
        topics.learn_from_metadata(metadata(topics=[{"name": name, "topic_id": ids[name], "partitions": []}]), 0)
    assert topics.name_for(ids["a"]) == "a"  # used: "b" is now the least recently used
    topics.learn_from_metadata(metadata(topics=[{"name": "d", "topic_id": ids["d"], "partitions": []}]), 0)
    assert len(topics) == 3
    assert topics.name_for(ids["b"]) is None and topics.id_for("b") is None  # dropped, its id with it
    assert [topics.name_for(ids[n]) for n in "acd"] == ["a", "c", "d"]


def test_an_id_moved_to_another_name_leaves_the_old_name_unknown():
    topics = Topics()
    same = uuid.uuid4()
    topics.learn_from_metadata(metadata(topics=[{"name": "old", "topic_id": same, "partitions": []}]), 0)
    topics.learn_from_metadata(metadata(topics=[{"name": "new", "topic_id": same, "partitions": []}]), 0)
    assert topics.name_for(same) == "new" and topics.id_for("old") is None and len(topics) == 1
    topics.learn_from_metadata(metadata(version=9, topics=[{"name": "new", "partitions": []}]), 1)
    assert topics.id_for("new") == same  # an answer without ids keeps the one known
