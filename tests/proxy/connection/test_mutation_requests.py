"""The controller mutation quota on bytes: one connection core, this test as the broker (a scripted one).

Tansu implements neither CreatePartitions nor answers the proxy's lookups on demand in a way a test can check,
so this drives :class:`proxy.connection.core.ConnectionCore` directly: the requests the broker receives are parsed,
and the test answers them as a Kafka broker would. Covers the lookup of unknown partition counts before a
decision (its Metadata request goes first, the client's request waits and keeps its place), strict splits and
merges for CreatePartitions and DeleteTopics, and the permissive versions.
"""

from __future__ import annotations

import pytest

from proxy.codec.apis import CREATE_PARTITIONS, CREATE_TOPICS, DELETE_TOPICS, METADATA, has_throttle_time
from tests.proxy.mutation_wire import THROTTLED, Wire


def metadata_topic(name, partitions, error_code=0):
    return {
        "name": name,
        "error_code": error_code,
        "partitions": [
            {"partition_index": i, "leader_id": 1, "replica_nodes": [1], "isr_nodes": [1]} for i in range(partitions)
        ],
    }


def test_an_unknown_topic_is_looked_up_before_create_partitions_is_decided_and_the_split_is_merged():
    wire = Wire()
    topics = [{"name": f"t{i}", "count": 100, "assignments": None} for i in range(3)]
    wire.send(CREATE_PARTITIONS, 3, 7, topics=topics, timeout_ms=1000, validate_only=False)
    ((lookup, asked),) = wire.broker_requests()
    assert lookup.api_key == METADATA and lookup.correlation_id < 0  # the proxy's own, before the request
    assert [t.name for t in asked.topics] == ["t0", "t1", "t2"] and not asked.allow_auto_topic_creation
    assert not wire.core.step(wire.clock.now_ms() * 1_000_000).reading_client  # the client waits at the boundary
    # each topic has 1 partition: +99 each; burst 500 -> t0 (500), t1 (401), t2 (302) admitted... then negative
    wire.answer(lookup, topics=[metadata_topic(f"t{i}", 1) for i in range(3)])
    ((forwarded, body),) = wire.broker_requests()
    assert forwarded.api_key == CREATE_PARTITIONS and forwarded.correlation_id == 7
    assert [t.name for t in body.topics] == ["t0", "t1", "t2"]  # 500 - 297 = 203 >= 0 before each: all admitted
    wire.answer(forwarded, results=[{"name": f"t{i}", "error_code": 0} for i in range(3)])
    ((corr, response),) = wire.client_responses(CREATE_PARTITIONS, 3)
    assert corr == 7 and [r.error_code for r in response.results] == [0, 0, 0]

    # 203 tokens left: +300 on t0 (now 100 partitions, known from the answer) is admitted, t1 rejected
    wire.send(
        CREATE_PARTITIONS,
        3,
        8,
        topics=[{"name": "t0", "count": 400, "assignments": None}, {"name": "t1", "count": 101, "assignments": None}],
        timeout_ms=1000,
        validate_only=False,
    )
    ((forwarded, body),) = wire.broker_requests()  # no lookup: counts are fresh
    assert [t.name for t in body.topics] == ["t0"]
    wire.answer(forwarded, results=[{"name": "t0", "error_code": 0}])
    ((corr, response),) = wire.client_responses(CREATE_PARTITIONS, 3)
    assert [(r.name, r.error_code) for r in response.results] == [("t0", 0), ("t1", THROTTLED)]
    assert response.throttle_time_ms == 19_400  # -97 tokens / 5 per s
    assert "controller_mutation_rate" in response.results[1].error_message


def test_strict_delete_splits_then_a_request_with_every_topic_rejected_is_answered_by_the_proxy():
    wire = Wire(rate=1, num=10)  # burst 10
    wire.send(DELETE_TOPICS, 5, 1, topic_names=["a", "b"], timeout_ms=1000)
    ((lookup, _),) = wire.broker_requests()
    wire.answer(lookup, topics=[metadata_topic("a", 20), metadata_topic("b", 5)])
    ((forwarded, body),) = wire.broker_requests()
    assert list(body.topic_names) == ["a"]  # a: 10 >= 0, admitted (-10 left); b: rejected
    wire.answer(forwarded, responses=[{"name": "a", "error_code": 0}])
    ((corr, response),) = wire.client_responses(DELETE_TOPICS, 5)
    assert corr == 1 and [(r.name, r.error_code) for r in response.responses] == [("a", 0), ("b", THROTTLED)]
    assert response.throttle_time_ms == 10_000

    wire.clock.advance(10_000)  # the mute is over; 0 tokens, so "c" is admitted; then -5
    wire.send(DELETE_TOPICS, 5, 2, topic_names=["b", "c"], timeout_ms=1000)
    ((lookup, asked),) = wire.broker_requests()  # only c is unknown
    assert [t.name for t in asked.topics] == ["c"]
    wire.answer(lookup, topics=[metadata_topic("c", 0, error_code=3)])  # does not exist: costs nothing
    ((forwarded, body),) = wire.broker_requests()
    assert list(body.topic_names) == ["b"]  # 0 >= 0: b admitted (-5); c admitted after? no: -5 < 0
    wire.answer(forwarded, responses=[{"name": "b", "error_code": 0}])
    ((corr, response),) = wire.client_responses(DELETE_TOPICS, 5)
    assert [(r.name, r.error_code) for r in response.responses] == [("b", 0), ("c", THROTTLED)]

    wire.clock.advance(5_000)
    wire.send(DELETE_TOPICS, 5, 3, topic_names=["c"], timeout_ms=1000)  # 0 tokens: admitted, costs 0
    ((lookup, asked),) = wire.broker_requests()  # a name the broker did not know is not kept: asked again
    assert [t.name for t in asked.topics] == ["c"]
    wire.answer(lookup, topics=[metadata_topic("c", 0, error_code=3)])
    ((forwarded, body),) = wire.broker_requests()
    wire.answer(forwarded, responses=[{"name": "c", "error_code": 3}])
    wire.clock.advance(0)
    wire.scope.quotas.mutations.record("ANONYMOUS", "admin", 1)  # -1: the next is rejected outright
    wire.send(DELETE_TOPICS, 5, 4, topic_names=["a"], timeout_ms=1000)
    ((lookup, _),) = wire.broker_requests()  # deleted through the proxy: not kept, asked again
    wire.answer(lookup, topics=[metadata_topic("a", 0, error_code=3)])
    assert wire.broker_requests() == []  # answered by the proxy, never forwarded
    (_, first), (corr, response) = wire.client_responses(DELETE_TOPICS, 5)
    assert corr == 4 and [(r.name, r.error_code) for r in response.responses] == [("a", THROTTLED)]


def test_permissive_create_topics_goes_through_whole_and_carries_the_throttle():
    wire = Wire(rate=5, num=100)
    topics = [
        {"name": f"p{i}", "num_partitions": 100, "replication_factor": 1, "assignments": [], "configs": []}
        for i in range(6)
    ]
    wire.send(CREATE_TOPICS, 4, 3, topics=topics, timeout_ms=1000, validate_only=False)
    ((forwarded, body),) = wire.broker_requests()
    assert len(body.topics) == 6
    wire.answer(forwarded, topics=[{"name": f"p{i}", "error_code": 0} for i in range(6)])
    ((corr, response),) = wire.client_responses(CREATE_TOPICS, 4)
    assert corr == 3 and response.throttle_time_ms == 20_000  # -100 tokens / 5 per s


def test_validate_only_is_not_counted():
    wire = Wire(rate=1, num=1)
    topics = [{"name": "v", "num_partitions": 1000, "replication_factor": 1, "assignments": [], "configs": []}]
    wire.send(CREATE_TOPICS, 7, 4, topics=topics, timeout_ms=1000, validate_only=True)
    ((forwarded, body),) = wire.broker_requests()
    assert body.validate_only
    assert wire.scope.quotas.mutations.tokens("ANONYMOUS", "admin") == 1


def _request_topics(api_key, version, names, partitions):
    if api_key == CREATE_TOPICS:
        return {
            "topics": [
                {"name": n, "num_partitions": partitions, "replication_factor": 1, "assignments": [], "configs": []}
                for n in names
            ],
            "timeout_ms": 1000,
        }
    if api_key == CREATE_PARTITIONS:
        return {
            "topics": [{"name": n, "count": partitions + 1, "assignments": None} for n in names],
            "timeout_ms": 1000,
        }
    if version >= 6:
        return {"topics": [{"name": n} for n in names], "timeout_ms": 1000}
    return {"topic_names": names, "timeout_ms": 1000}


def _forwarded_names(api_key, version, body):
    if api_key == DELETE_TOPICS:
        return [t.name for t in body.topics] if version >= 6 else list(body.topic_names)
    return [t.name for t in body.topics]


RESULTS = {CREATE_TOPICS: "topics", DELETE_TOPICS: "responses", CREATE_PARTITIONS: "results"}


def _results(api_key, response):
    return getattr(response, RESULTS[api_key])


def _broker_results(api_key, names):
    return {RESULTS[api_key]: [{"name": n, "error_code": 0} for n in names]}


@pytest.mark.parametrize(
    "api_key,version",
    [(CREATE_TOPICS, v) for v in range(8)]
    + [(DELETE_TOPICS, v) for v in range(7)]
    + [(CREATE_PARTITIONS, v) for v in range(4)],
)
def test_every_version_is_split_and_merged_when_strict_and_forwarded_whole_and_throttled_when_not(api_key, version):
    """Three topics of 10 partitions on a bucket of 10: x leaves 0 tokens, y is admitted at 0 and leaves -10, z is
    rejected with 89 (strict), or everything goes through and the client is throttled for 20 s (permissive)."""
    wire = Wire(rate=1, num=10)
    for name in ("x", "y", "z"):  # counts known, as if from a Metadata response: 10 now (1 before CreatePartitions)
        wire.scope.topics.created(name, 1 if api_key == CREATE_PARTITIONS else 10, wire.clock.now_ms())
    wire.send(api_key, version, 5, **_request_topics(api_key, version, ["x", "y", "z"], 10))
    ((forwarded, body),) = wire.broker_requests()
    strict = version >= {CREATE_TOPICS: 6, DELETE_TOPICS: 5, CREATE_PARTITIONS: 3}[api_key]
    sent = _forwarded_names(api_key, version, body)
    assert sent == (["x", "y"] if strict else ["x", "y", "z"])
    wire.answer(forwarded, **_broker_results(api_key, sent))
    expected_throttle = 10_000 if strict else 20_000  # strict: -10 tokens when z is refused; permissive: -20
    # every version, before KIP-219 too, is answered at once (Kafka >= 2.0): the mute after it holds the client,
    # so a client whose request timeout is below the throttle is not made to resend a mutation already done
    ((corr, response),) = wire.client_responses(api_key, version)
    now_ns = wire.clock.now_ms() * 1_000_000
    assert not wire.core.step(now_ns).reading_client, "the connection is not muted after the throttled answer"
    wire.clock.advance(expected_throttle)
    assert wire.core.step(wire.clock.now_ms() * 1_000_000).reading_client, "the mute did not end with the throttle"
    results = _results(api_key, response)
    assert corr == 5 and [r.name for r in results] == ["x", "y", "z"]
    assert [r.error_code for r in results] == ([0, 0, THROTTLED] if strict else [0, 0, 0])
    if has_throttle_time(api_key, version):
        assert response.throttle_time_ms == expected_throttle
