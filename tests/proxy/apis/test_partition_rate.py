"""Per-partition byte rates on the request path, on bytes with a fake clock: each partition's record bytes charged to
its own quota beside its topic's (the longest throttle kept), refusal per partition with the topic's quota beside
it, a Fetch answer's partitions cut each to its own headroom, shadow entries counted and not applied."""

from __future__ import annotations

from proxy.apis import ForwardRequest, Session
from proxy.codec.apis import FETCH, PRODUCE
from proxy.codec.error_codes import NONE, NOT_ENOUGH_REPLICAS
from proxy.codec.frame import BUFFER
from proxy.codec.messages import decode_request, decode_response, encode_response, new_request, new_response
from quota.primitives.clock import ManualClock
from quota.primitives.decision import Throttle
from tests.proxy.byte_rate_scopes import batch, scope_with
from tests.proxy.internal_topic_plans import plan_and_body

SESSION = Session("L", "10.0.0.7")
KB = 1024


def charge(scope, partitions: dict[int, bytes], topic="orders", version=9):
    """A Produce of ``{partition index: records}`` to ``topic``, decided."""
    msg = new_request(
        PRODUCE,
        version,
        acks=1,
        timeout_ms=1000,
        topic_data=[{"name": topic, "partition_data": [{"index": i, "records": r} for i, r in partitions.items()]}],
    )
    _, plan, body = plan_and_body(scope, SESSION, PRODUCE, version, msg)
    assert plan.action == BUFFER
    return plan.decide(body)


def test_a_hot_partition_is_throttled_by_its_own_quota_and_a_cold_one_is_not():
    clock = ManualClock(1_000_000)
    scope = scope_with(
        [
            {"entity": {"topic": "orders", "partition": "<default>"}, "producer_byte_rate": 1 * KB},
            {"entity": {"topic": "orders", "partition": 7}, "producer_byte_rate": 100 * KB},
        ],
        clock,
    )
    b = batch(40)  # about 4.5 KB: within what a fresh partition may take at once, not three times
    first = charge(scope, {0: b, 7: b})
    assert isinstance(first, ForwardRequest) and first.throttle is None
    hot = charge(scope, {0: b})
    hot = charge(scope, {0: b})
    assert isinstance(hot.throttle, Throttle)
    assert hot.throttle.by == "partition_producer_byte_rate (topic orders partition 0)" and hot.throttle.bound == 0
    assert charge(scope, {1: b}).throttle is None  # a cold partition keeps its own budget
    assert charge(scope, {7: b}).throttle is None  # the named partition has its own rate
    assert dict(hot.usage.partition_bytes) == {"orders/<default>": len(b)}
    assert dict(first.usage.partition_bytes) == {"orders/<default>": len(b), "orders/7": len(b)}
    assert first.usage.topic_bytes == ()  # no topic quota: nothing charged to one
    assert charge(scope, {0: b}, topic="clicks").throttle is None  # no partition entry for clicks


def test_the_topic_quota_and_the_partition_quota_both_apply_and_the_longer_wins():
    clock = ManualClock(1_000_000)
    b = batch(200)  # about 21 KB
    scope = scope_with(
        [
            {"entity": {"topic": "orders"}, "producer_byte_rate": 100},
            {"entity": {"topic": "orders", "partition": 0}, "producer_byte_rate": 1 * KB},
        ],
        clock,
    )
    outcome = charge(scope, {0: b})
    assert outcome.throttle.by == "topic_producer_byte_rate (topic orders)"  # the topic overshoots most
    scope = scope_with(
        [
            {"entity": {"topic": "orders"}, "producer_byte_rate": 10 * KB},
            {"entity": {"topic": "orders", "partition": 0}, "producer_byte_rate": 100},
        ],
        clock,
    )
    outcome = charge(scope, {0: b})
    assert outcome.throttle.by == "partition_producer_byte_rate (topic orders partition 0)"


def test_reject_refuses_a_partition_over_its_own_quota_and_forwards_the_others():
    clock = ManualClock(1_000_000)
    scope = scope_with(
        [
            {
                "entity": {"topic": "orders", "partition": "<default>"},
                "producer_byte_rate": 1 * KB,
                "on_exceed": "reject",
            }
        ],
        clock,
    )
    quota = scope.quotas.topics.partition_produce
    b = batch(200)  # more than a partition may take at once: written once, then refused
    assert charge(scope, {0: b}).throttle is None
    outcome = charge(scope, {0: b, 1: b})
    assert isinstance(outcome, ForwardRequest) and outcome.throttle is None  # refused, not throttled
    sent = decode_request(PRODUCE, 9, outcome.body)
    assert [[p.index for p in t.partition_data] for t in sent.topic_data] == [[1]]
    answer = new_response(
        PRODUCE,
        9,
        responses=[{"name": "orders", "partition_responses": [{"index": 1, "error_code": NONE, "base_offset": 0}]}],
    )
    merged = decode_response(PRODUCE, 9, outcome.leg.rewrite(memoryview(encode_response(PRODUCE, 9, answer))))
    errors = {p.index: (p.error_code, p.error_message) for t in merged.responses for p in t.partition_responses}
    assert errors[1][0] == NONE and errors[0][0] == NOT_ENOUGH_REPLICAS
    assert "partition producer_byte_rate of orders/<default>" in errors[0][1]
    assert quota.rejected == {"orders/<default>": (1, len(b))}
    assert dict(outcome.usage.partition_bytes) == {"orders/<default>": len(b)}  # what was written


def test_a_partition_the_topic_refuses_gives_back_what_its_own_quota_took():
    """Both reject: a partition its own quota admits and its topic's refuses is not written, so its own sensor
    does not keep the bytes (a retry is not charged twice)."""
    clock = ManualClock(1_000_000)
    scope = scope_with(
        [
            {"entity": {"topic": "orders"}, "producer_byte_rate": 1 * KB, "on_exceed": "reject"},
            {
                "entity": {"topic": "orders", "partition": "<default>"},
                "producer_byte_rate": 100 * KB,
                "on_exceed": "reject",
            },
        ],
        clock,
    )
    b = batch(200)
    outcome = charge(scope, {0: b, 1: b})  # the topic takes the first and refuses the second
    assert [[p.index for p in t.partition_data] for t in decode_request(PRODUCE, 9, outcome.body).topic_data] == [[0]]
    stats = {s.tags.client_id: s.value_total for s in scope.quotas.topics.partition_produce.stats()}
    assert stats == {"0": len(b), "1": 0}
    assert dict(outcome.usage.partition_bytes) == {"orders/<default>": len(b)}


def test_a_shadow_partition_entry_is_counted_and_refuses_nothing():
    clock = ManualClock(1_000_000)
    scope = scope_with(
        [
            {
                "entity": {"topic": "orders", "partition": 0},
                "producer_byte_rate": 100,
                "on_exceed": "reject",
                "mode": "shadow",
            }
        ],
        clock,
    )
    b = batch(200)
    for _ in range(3):
        outcome = charge(scope, {0: b})
        assert isinstance(outcome, ForwardRequest) and outcome.body is None and outcome.throttle is None
    assert scope.quotas.topics.partition_produce.shadow_rejected["orders/0"][0] >= 2
    assert outcome.usage.shadow_throttle_ms > 0


def fetch_plan(scope):
    """The plan of a consumer's Fetch v12 of partitions 0 and 1 of ``orders``."""
    partitions = [{"partition": i, "partition_max_bytes": 1 << 20} for i in (0, 1)]
    request = new_request(
        FETCH, 12, replica_id=-1, max_bytes=50 * 1024 * 1024, topics=[{"topic": "orders", "partitions": partitions}]
    )
    return plan_and_body(scope, SESSION, FETCH, 12, request)[1]


def test_a_fetch_answer_cuts_each_partition_to_its_own_headroom():
    clock = ManualClock(1_000_000)
    scope = scope_with([{"entity": {"topic": "orders", "partition": "<default>"}, "consumer_byte_rate": 500}], clock)
    plan = fetch_plan(scope)
    b1, b2 = batch(60), batch(60, base_offset=60)  # about 6.5 KB each: a partition's headroom is below one batch
    body = encode_response(
        FETCH,
        12,
        new_response(
            FETCH,
            12,
            responses=[
                {"topic": "orders", "partitions": [{"partition_index": i, "records": b1 + b2} for i in (0, 1)]},
                {"topic": "free", "partitions": [{"partition_index": 0, "records": b1 + b2}]},
            ],
        ),
    )
    rewritten, throttle = plan.leg.run(memoryview(body), lambda b: len(b if b is not None else body), None)
    orders, free = decode_response(FETCH, 12, rewritten).responses
    assert [bytes(p.records) for p in orders.partitions] == [b1, b1]  # each keeps its first batch
    assert bytes(free.partitions[0].records) == b1 + b2
    assert isinstance(throttle, Throttle) and "partition_consumer_byte_rate (topic orders partition" in throttle.by
    stats = {s.tags.client_id: s.value_total for s in scope.quotas.topics.partition_fetch.stats()}
    assert stats == {"0": len(b1), "1": len(b1)}


def test_a_fetch_answer_cut_by_its_topic_charges_each_partition_what_the_client_gets():
    """The partitions' quotas far from binding, the topic's below one batch: the topic's trim keeps the answer's
    first batch only, and each partition is charged what is left of it, not what the broker read."""
    clock = ManualClock(1_000_000)
    scope = scope_with(
        [
            {"entity": {"topic": "orders"}, "consumer_byte_rate": 500},
            {"entity": {"topic": "orders", "partition": "<default>"}, "consumer_byte_rate": 100 * KB},
        ],
        clock,
    )
    plan = fetch_plan(scope)
    b1, b2 = batch(60), batch(60, base_offset=60)
    answer = [{"topic": "orders", "partitions": [{"partition_index": i, "records": b1 + b2} for i in (0, 1)]}]
    body = encode_response(FETCH, 12, new_response(FETCH, 12, responses=answer))
    rewritten, _ = plan.leg.run(memoryview(body), lambda b: len(b if b is not None else body), None)
    (orders,) = decode_response(FETCH, 12, rewritten).responses
    assert [bytes(p.records) for p in orders.partitions] == [b1, b""]
    stats = {s.tags.client_id: s.value_total for s in scope.quotas.topics.partition_fetch.stats()}
    assert stats == {"0": len(b1), "1": 0}
