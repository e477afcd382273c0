"""``on_exceed: reject`` on real frames with a fake clock: a topic's partitions are admitted while it is within its
quota and the rest answered NOT_ENOUGH_REPLICAS by the proxy, never forwarded; the other partitions and topics of
the same request go on unchanged, and the client gets one result per partition it sent. Nothing is throttled."""

from __future__ import annotations

import uuid

import pytest

from proxy.apis import AnswerLocally, ForwardRequest, LookUp, Session
from proxy.codec.apis import METADATA, PRODUCE
from proxy.codec.error_codes import NONE, NOT_ENOUGH_REPLICAS
from proxy.codec.header import response_header_length
from proxy.codec.messages import decode_request, decode_response, encode_response, new_request, new_response
from quota.primitives.clock import ManualClock
from tests.proxy.byte_rate_scopes import batch, scope_with
from tests.proxy.internal_topic_plans import plan_and_body

KB = 1024
SESSION = Session("L", "10.0.0.7")
QUOTAS = [
    {"entity": {"topic": "capped"}, "producer_byte_rate": 1 * KB, "on_exceed": "reject"},
    {"entity": {"topic": "<default>"}, "producer_byte_rate": 1 * KB},  # throttles, as before
]


def decided(scope, topics, version=9, acks=1):
    """``topics``: {topic (name or id): [records of each partition]}."""
    key = "topic_id" if version >= 13 else "name"
    msg = new_request(
        PRODUCE,
        version,
        acks=acks,
        timeout_ms=1000,
        topic_data=[
            {key: t, "partition_data": [{"index": i, "records": r} for i, r in enumerate(parts)]}
            for t, parts in topics.items()
        ],
    )
    _, plan, body = plan_and_body(scope, SESSION, PRODUCE, version, msg)
    return plan.decide(body)


def results(response) -> dict:
    return {
        (t.topic_id if t.topic_id not in (None, uuid.UUID(int=0)) else t.name, p.index): p.error_code
        for t in response.responses
        for p in t.partition_responses
    }


def broker_answer(version, request_body: bytes) -> memoryview:
    """What a broker answers the forwarded request: every partition it got written."""
    sent = decode_request(PRODUCE, version, request_body)
    key = "topic_id" if version >= 13 else "name"
    answer = new_response(
        PRODUCE,
        version,
        responses=[
            {
                key: getattr(t, key),
                "partition_responses": [
                    {"index": p.index, "error_code": NONE, "base_offset": 5} for p in t.partition_data
                ],
            }
            for t in sent.topic_data
        ],
    )
    return memoryview(encode_response(PRODUCE, version, answer))


@pytest.mark.parametrize("version", [3, 9, 13])
def test_the_partitions_past_the_quota_are_refused_and_the_rest_forwarded_and_merged(version):
    clock = ManualClock(1_000_000)
    scope = scope_with(QUOTAS, clock)
    quota = scope.quotas.topics.produce
    b = batch(200)  # more than the topic may take now: the first partition crosses the quota, the rest wait
    assert 0 < quota.headroom("capped") < len(b)
    capped, other = ("capped", "other") if version < 13 else (uuid.uuid4(), uuid.uuid4())
    if version >= 13:
        scope.topics.learn_from_metadata(
            new_response(
                METADATA,
                12,
                topics=[{"name": "capped", "topic_id": capped}, {"name": "other", "topic_id": other}],
            ),
            clock.now_ms(),
        )
    outcome = decided(scope, {capped: [b, b, b], other: [batch(1)]}, version)
    assert isinstance(outcome, ForwardRequest) and outcome.throttle is None  # refused, not throttled
    sent = decode_request(PRODUCE, version, outcome.body)
    assert [
        (getattr(t, "topic_id" if version >= 13 else "name"), [p.index for p in t.partition_data])
        for t in sent.topic_data
    ] == [
        (capped, [0]),
        (other, [0]),
    ]
    assert sent.topic_data[0].partition_data[0].records == b  # the batch as the client sent it
    merged = decode_response(PRODUCE, version, outcome.leg.rewrite(broker_answer(version, outcome.body)))
    assert results(merged) == {
        (capped, 0): NONE,
        (capped, 1): NOT_ENOUGH_REPLICAS,
        (capped, 2): NOT_ENOUGH_REPLICAS,
        (other, 0): NONE,
    }
    if version >= 8:
        refused = next(p for t in merged.responses for p in t.partition_responses if p.error_code)
        assert "producer_byte_rate of capped (on_exceed: reject)" in refused.error_message
    (stats,) = [s for s in quota.stats() if s.tags.client_id == "capped"]
    assert stats.value_total == len(b) and stats.throttled_count == 0  # only what was written counts
    assert quota.rejected == {"capped": (2, 2 * len(b))}


def test_a_request_refused_whole_is_answered_by_the_proxy_and_admitted_again_once_under_quota():
    clock = ManualClock(1_000_000)
    scope = scope_with(QUOTAS, clock)
    quota = scope.quotas.topics.produce
    b = batch(200)
    assert isinstance(decided(scope, {"capped": [b]}), ForwardRequest)  # takes it past its quota
    outcome = decided(scope, {"capped": [b, b]})
    assert isinstance(outcome, AnswerLocally) and outcome.throttle is None
    frame = outcome.frame
    body = frame[response_header_length(PRODUCE, 9, frame) :]
    assert results(decode_response(PRODUCE, 9, body)) == {("capped", 0): NOT_ENOUGH_REPLICAS, ("capped", 1): 19}
    assert isinstance(decided(scope, {"capped": [b]}, acks=0), AnswerLocally)  # acks=0: dropped (no answer sent)
    # a retry while still over is refused again and costs the topic nothing; once the window has passed, admitted
    clock.advance(60_000)
    again = decided(scope, {"capped": [b]})
    assert isinstance(again, ForwardRequest) and again.body is None  # nothing refused: the request as it came
    (stats,) = [s for s in quota.stats() if s.tags.client_id == "capped"]
    assert stats.value_total == 2 * len(b)


def test_shadow_or_throttle_entries_refuse_nothing():
    clock = ManualClock(1_000_000)
    shadow = [{**QUOTAS[0], "mode": "shadow"}]
    scope = scope_with(shadow, clock)
    b = batch(200)
    for _ in range(3):
        outcome = decided(scope, {"capped": [b, b]})
        assert isinstance(outcome, ForwardRequest) and outcome.body is None and outcome.throttle is None
    assert outcome.usage.shadows  # counted as what a shadow throttle would have done
    quota = scope.quotas.topics.produce
    assert quota.rejected == {} and quota.shadow_rejected == {"capped": (5, 5 * len(b))}  # the first one crossed
    (stats,) = quota.stats()
    assert stats.value_total == 6 * len(b)  # every byte written and counted
    from proxy.ops.topic_metrics import topic_families

    exposed = {
        (sample.name, sample.labels["topic"]): sample.value
        for family in topic_families(scope.quotas.topics)
        for sample in family.samples
        if "rejected" in sample.name
    }
    assert exposed == {("kafka_quota_proxy_topic_quota_shadow_rejected_partitions_total", "capped"): 5}
    scope = scope_with(QUOTAS, clock, **{"quota.mode": "shadow"})
    assert not scope.quotas.topics.produce.rejecting("capped") and scope.quotas.topics.produce.shadow_rejecting(
        "capped"
    )
    throttled = scope_with(QUOTAS, clock)
    for _ in range(2):
        outcome = decided(throttled, {"other": [b, b]})
    assert isinstance(outcome, ForwardRequest) and outcome.body is None and outcome.throttle.throttle_time_ms > 0


def test_a_topic_id_the_proxy_must_look_up_first_is_then_refused_by_name():
    clock = ManualClock(1_000_000)
    scope = scope_with(QUOTAS, clock)
    capped = uuid.uuid4()
    b = batch(200)
    outcome = decided(scope, {capped: [b, b]}, version=13)
    assert isinstance(outcome, LookUp)
    answer = new_response(METADATA, outcome.api_version, topics=[{"name": "capped", "topic_id": capped}])
    outcome = outcome.then(memoryview(encode_response(METADATA, outcome.api_version, answer)))
    assert isinstance(outcome, ForwardRequest)
    merged = decode_response(PRODUCE, 13, outcome.leg.rewrite(broker_answer(13, outcome.body)))
    assert results(merged) == {(capped, 0): NONE, (capped, 1): NOT_ENOUGH_REPLICAS}


def test_on_exceed_is_checked_at_load():
    from config.errors import ConfigError

    for entry, message in [
        ({"on_exceed": "drop", "producer_byte_rate": 1}, "on_exceed: expected throttle or reject"),
        ({"on_exceed": "reject", "consumer_byte_rate": 1}, "on_exceed: reject refuses writes over producer_byte_rate"),
    ]:
        with pytest.raises(ConfigError, match=message):
            scope_with([{"entity": {"topic": "t"}, **entry}], ManualClock(0))
    with pytest.raises(ConfigError, match="on_exceed"):
        scope_with([{"entity": {"user": "u"}, "on_exceed": "reject", "producer_byte_rate": 1}], ManualClock(0))
