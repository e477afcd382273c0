"""Per-topic byte rates on the request path, on bytes and values with a fake clock: each topic's record bytes charged
to its quota beside the client's, the longest throttle kept, a Fetch answer trimmed per topic, topic ids named
before anything is charged, shadow entries counted and not applied."""

from __future__ import annotations

import uuid

from proxy.apis import ForwardRequest, LookUp, Session
from proxy.codec.apis import FETCH, METADATA, PRODUCE
from proxy.codec.frame import BUFFER, STREAM
from proxy.codec.messages import decode_response, encode_response, new_request, new_response
from quota.primitives.clock import ManualClock
from quota.primitives.decision import Throttle
from quota.primitives.entity import DEFAULT
from quota.primitives.topic_quotas import TOPIC_PRODUCER_BYTE_RATE
from tests.proxy.byte_rate_scopes import batch, scope_with
from tests.proxy.internal_topic_plans import plan_and_body

SESSION = Session("L", "10.0.0.7")
KB = 1024


def produce(version, topics):
    """A Produce of ``{topic (name or id): [records of each partition]}``."""
    key = "topic_id" if version >= 13 else "name"
    return new_request(
        PRODUCE,
        version,
        acks=1,
        timeout_ms=1000,
        topic_data=[
            {key: t, "partition_data": [{"index": i, "records": r} for i, r in enumerate(parts)]}
            for t, parts in topics.items()
        ],
    )


def charge_produce(scope, topics, version=9):
    header, plan, body = plan_and_body(scope, SESSION, PRODUCE, version, produce(version, topics))
    assert plan.action == BUFFER
    return header, plan, plan.decide(body)


def test_each_topic_is_charged_its_record_bytes_and_the_worst_throttles_the_request():
    clock = ManualClock(1_000_000)
    scope = scope_with(
        [
            {"entity": {"topic": "slow"}, "producer_byte_rate": 1 * KB},
            {"entity": {"topic": "slower"}, "producer_byte_rate": 100},
            {"entity": {"topic": "<default>"}, "producer_byte_rate": 10_000 * KB},
        ],
        clock,
    )
    topics = scope.quotas.topics.produce
    b = batch(100)  # about 10 KB
    _, _, outcome = charge_produce(scope, {"slow": [b, b], "slower": [b], "free": [b]})
    assert isinstance(outcome, ForwardRequest) and outcome.body is None  # forwarded as the client sent it
    assert {s.tags.client_id: s.value_total for s in topics.stats()} == {
        "slow": 2 * len(b),
        "slower": len(b),
        "free": len(b),
    }
    # the request's throttle is the longest of its topics': "slower" overshoots most
    slower = topics.stats_for_topic("slower")
    assert isinstance(outcome.throttle, Throttle) and outcome.throttle.by == "topic_producer_byte_rate (topic slower)"
    assert (
        outcome.throttle.throttle_time_ms
        == slower.throttle_time_ms_total
        > topics.stats_for_topic("slow").throttle_time_ms_total
    )
    assert dict(outcome.usage.topic_bytes) == {"slow": 2 * len(b), "slower": len(b), DEFAULT: len(b)}


def test_the_client_quota_and_the_topic_quota_both_apply_and_the_longer_wins():
    clock = ManualClock(1_000_000)
    b = batch(200)  # about 21 KB: twice what 1 KiB/s lets through at once
    scope = scope_with(
        [
            {"entity": {"client-id": "tenant"}, "producer_byte_rate": 1 * KB},
            {"entity": {"topic": "t"}, "producer_byte_rate": 100_000 * KB},
        ],
        clock,
    )
    header, plan, outcome = charge_produce(scope, {"t": [b]})
    assert isinstance(plan.throttle, Throttle) and plan.throttle.bound == 1 * KB  # the client's, at the header
    assert outcome.throttle is None  # the topic is far within its quota
    scope = scope_with(
        [
            {"entity": {"client-id": "tenant"}, "producer_byte_rate": 100_000 * KB},
            {"entity": {"topic": "t"}, "producer_byte_rate": 1 * KB},
        ],
        clock,
    )
    header, plan, outcome = charge_produce(scope, {"t": [b]})
    assert plan.throttle is None and outcome.throttle.by == "topic_producer_byte_rate (topic t)"
    assert outcome.throttle.bound == 0  # not the client's byte-rate figures (the usage log's quota_rate)


def test_a_topic_named_by_an_unknown_id_is_looked_up_then_charged_by_name():
    clock = ManualClock(1_000_000)
    scope = scope_with([{"entity": {"topic": "orders"}, "producer_byte_rate": 1 * KB}], clock)
    orders, unknown = uuid.uuid4(), uuid.uuid4()
    b = batch(50)
    _, _, outcome = charge_produce(scope, {orders: [b], unknown: [b]}, version=13)
    assert isinstance(outcome, LookUp) and outcome.api_key == METADATA
    version = outcome.api_version
    answer = new_response(METADATA, version, topics=[{"name": "orders", "topic_id": orders, "partitions": []}])
    decided = outcome.then(memoryview(encode_response(METADATA, version, answer)))
    assert isinstance(decided, ForwardRequest)
    (stats,) = scope.quotas.topics.produce.stats()
    assert (stats.tags.client_id, stats.value_total) == ("orders", len(b))  # the id nobody names writes nothing


def test_a_shadow_topic_entry_is_counted_and_not_applied():
    clock = ManualClock(1_000_000)
    scope = scope_with([{"entity": {"topic": "t"}, "producer_byte_rate": 100, "mode": "shadow"}], clock)
    _, _, outcome = charge_produce(scope, {"t": [batch(100)]})
    assert outcome.throttle is None
    (note,) = outcome.usage.shadows
    assert note.quota == TOPIC_PRODUCER_BYTE_RATE and note.decision.throttle_time_ms > 0
    assert outcome.usage.shadow_throttle_ms == note.decision.throttle_time_ms


def test_without_topic_quotas_neither_produce_nor_fetch_is_read():
    scope = scope_with([{"entity": {"client-id": "x"}, "producer_byte_rate": 1 * KB}], ManualClock(0))
    _, plan, _ = plan_and_body(scope, SESSION, PRODUCE, 9, produce(9, {"t": [batch(1)]}))
    assert plan.action == STREAM


def fetch_answer(version, topics):
    key = "topic_id" if version >= 13 else "topic"
    msg = new_response(
        FETCH,
        version,
        responses=[
            {key: t, "partitions": [{"partition_index": i, "records": r} for i, r in enumerate(parts)]}
            for t, parts in topics.items()
        ],
    )
    return encode_response(FETCH, version, msg)


def fetch_plan(scope, version=12, topics=("capped", "free")):
    key = "topic_id" if version >= 13 else "topic"
    request = new_request(
        FETCH,
        version,
        replica_id=-1,
        max_bytes=50 * 1024 * 1024,
        topics=[{key: t, "partitions": [{"partition": 0, "partition_max_bytes": 1 << 20}]} for t in topics],
    )
    return plan_and_body(scope, SESSION, FETCH, version, request)


def test_a_fetch_answer_is_trimmed_per_topic_and_each_topic_charged():
    clock = ManualClock(1_000_000)
    scope = scope_with([{"entity": {"topic": "capped"}, "consumer_byte_rate": 500}], clock)
    _, plan, _ = fetch_plan(scope)
    assert plan.action == STREAM  # Fetch v12 names topics: nothing to read before it goes
    b1, b2, b3 = batch(60), batch(60, base_offset=60), batch(60, base_offset=120)  # about 6.5 KB each
    body = fetch_answer(12, {"capped": [b1 + b2, b3], "free": [b1 + b2 + b3]})
    rewritten, throttle = plan.leg.run(memoryview(body), lambda b: len(b if b is not None else body), None)
    out = decode_response(FETCH, 12, rewritten)
    capped, free = out.responses
    # the capped topic keeps its first batch only (its headroom, 5,000 bytes in the window, is below one batch)
    assert [bytes(p.records) for p in capped.partitions] == [b1, b""]
    assert bytes(free.partitions[0].records) == b1 + b2 + b3  # the other topic of the answer untouched
    assert isinstance(throttle, Throttle) and throttle.by == "topic_consumer_byte_rate (topic capped)"
    (stats,) = scope.quotas.topics.fetch.stats()
    assert (stats.tags.client_id, stats.value_total) == ("capped", len(b1))


def test_a_fetch_by_topic_ids_is_read_first_and_unknown_ids_looked_up():
    clock = ManualClock(1_000_000)
    scope = scope_with([{"entity": {"topic": "<default>"}, "consumer_byte_rate": 1 * KB}], clock)
    capped = uuid.uuid4()
    _, plan, body = fetch_plan(scope, version=13, topics=(capped,))
    assert plan.action == BUFFER
    outcome = plan.decide(body)
    assert isinstance(outcome, LookUp)
    version = outcome.api_version
    answer = new_response(METADATA, version, topics=[{"name": "events", "topic_id": capped, "partitions": []}])
    forwarded = outcome.then(memoryview(encode_response(METADATA, version, answer)))
    assert isinstance(forwarded, ForwardRequest)  # with the leg its answer goes through
    b = batch(20)
    body = fetch_answer(13, {capped: [b]})
    forwarded.leg.run(memoryview(body), lambda b: len(body), None)
    (stats,) = scope.quotas.topics.fetch.stats()
    assert (stats.tags.client_id, stats.value_total) == ("events", len(b))
    usage = forwarded.leg.accounted(lambda usage: None)
    assert dict(usage.topic_bytes) == {DEFAULT: len(b)}


def test_a_follower_fetch_is_exempt():
    clock = ManualClock(1_000_000)
    scope = scope_with([{"entity": {"topic": "<default>"}, "consumer_byte_rate": 1}], clock)
    request = new_request(
        FETCH,
        15,
        max_bytes=1 << 20,
        replica_state={"replica_id": 2, "replica_epoch": 1},
        topics=[{"topic_id": uuid.uuid4(), "partitions": [{"partition": 0}]}],
    )
    _, plan, body = plan_and_body(scope, SESSION, FETCH, 15, request)
    outcome = plan.decide(body)
    assert isinstance(outcome, ForwardRequest)  # its answer goes through no leg: neither trimmed nor charged
    leg = plan.leg.then(outcome.leg)
    assert leg.rewrite is None and leg.record_response is None and outcome.body is None
    body = fetch_answer(15, {uuid.uuid4(): [batch(20)]})
    rewritten, throttle = leg.run(memoryview(body), lambda b: len(body), None)
    assert rewritten is None and throttle is None and len(scope.quotas.topics.fetch) == 0
