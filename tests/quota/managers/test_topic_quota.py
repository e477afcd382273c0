"""Per-topic byte rates on values, with a fake clock: which topics have a quota, Kafka's throttle from the overshoot,
a topic's quota shared by every client, and the bound on topic sensors a tenant making up names runs into."""

from __future__ import annotations

import pytest

from quota.managers.client_quota import ClientQuotaManager
from quota.managers.topic_quota import TopicQuotaManager, TopicQuotas
from quota.primitives.clock import ManualClock
from quota.primitives.decision import FORWARD, Throttle
from quota.primitives.entity import CONSUMER_BYTE_RATE, DEFAULT, PRODUCER_BYTE_RATE, QuotaEntity
from quota.primitives.quota_table import QuotaTable
from quota.primitives.rate import QuotaWindow
from quota.primitives.topic_quotas import TopicEntity, TopicQuotaTable, topic_table

WINDOW = QuotaWindow(11, 1)


def manager(table: TopicQuotaTable, clock: ManualClock, key: str = PRODUCER_BYTE_RATE, cap: int = 100_000):
    return TopicQuotaManager(table, key, clock, WINDOW, 25_000, max_tracked_entities=cap)


def test_a_topic_resolves_to_its_own_entry_else_default_else_nothing():
    table = topic_table(
        {"orders": {PRODUCER_BYTE_RATE: 1000}, DEFAULT: {PRODUCER_BYTE_RATE: 50, CONSUMER_BYTE_RATE: 70}}
    )
    own = table.resolve_topic(PRODUCER_BYTE_RATE, "orders")
    assert (own.limit, own.entity, own.entity.path) == (1000.0, TopicEntity.of("orders"), "/topics/orders")
    assert table.resolve_topic(CONSUMER_BYTE_RATE, "orders").limit == 70  # no consumer key of its own: <default>
    other = table.resolve_topic(PRODUCER_BYTE_RATE, "clicks")
    assert (other.limit, other.entity.path, other.tags) == (50.0, "/topics/<default>", ("", "clicks"))
    assert [m.entity.path for m in table.matches(PRODUCER_BYTE_RATE, "orders")] == [
        "/topics/orders",
        "/topics/<default>",
    ]
    bare = topic_table({"orders": {PRODUCER_BYTE_RATE: 1000}})
    assert bare.resolve_topic(PRODUCER_BYTE_RATE, "clicks").unlimited
    assert bare.keys() == {PRODUCER_BYTE_RATE}
    assert TopicEntity.of("etl") != QuotaEntity(client_id="etl")  # a topic is never a client id's entry


def test_a_bad_table_is_refused():
    with pytest.raises(ValueError, match="request_percentage is not a topic quota"):
        topic_table({"t": {"request_percentage": 5}})
    with pytest.raises(ValueError, match="rate > 0"):
        topic_table({"t": {PRODUCER_BYTE_RATE: 0}})


def test_a_topic_without_a_quota_leaves_nothing_behind():
    clock = ManualClock(1_000_000)
    quota = manager(topic_table({"orders": {PRODUCER_BYTE_RATE: 1000}}), clock)
    for i in range(1000):
        assert quota.record_topic(f"made-up-{i}", 10**6) is FORWARD
    assert len(quota) == 0


def test_the_throttle_is_kafkas_from_the_overshoot_as_for_a_client():
    """The same bytes recorded for a topic and for a client id under the same limit give the same throttles."""
    clock = ManualClock(1_000_000)
    topic = manager(topic_table({"orders": {PRODUCER_BYTE_RATE: 10_000}}), clock)
    client = ClientQuotaManager(
        QuotaTable.from_values([({"client-id": "etl"}, {PRODUCER_BYTE_RATE: 10_000})]),
        PRODUCER_BYTE_RATE,
        clock,
        WINDOW,
        25_000,
    )
    seen = []
    for _ in range(40):
        a = topic.record_topic("orders", 7_000)
        b = client.record_and_decide("", "etl", 7_000)
        assert a == b
        seen.append(a)
        clock.advance(300)
    throttles = [d for d in seen if isinstance(d, Throttle)]
    assert throttles and all(t.bound == 10_000 and t.mute_ms == t.throttle_time_ms for t in throttles)


def test_many_writers_of_one_topic_share_its_one_sensor():
    """The topic quota is the topic's: a tenant rotating client ids or connections records into one sensor."""
    clock = ManualClock(1_000_000)
    quota = manager(topic_table({DEFAULT: {PRODUCER_BYTE_RATE: 1_000}}), clock)
    decisions = [quota.record_topic("orders", 500) for _ in range(30)]
    assert len(quota) == 1
    assert isinstance(decisions[-1], Throttle)
    (stats,) = quota.stats()
    assert stats.value_total == 15_000 and stats.entity == "/topics/<default>"


def test_names_made_up_under_default_are_bounded_and_named_topics_always_tracked():
    """At the cap a new <default> topic evicts one made and never used again; a named topic in use keeps its sensor,
    and a topic made while the table is full starts at its limit: a flood of names gains no burst per name."""
    clock = ManualClock(1_000_000)
    table = topic_table({"orders": {PRODUCER_BYTE_RATE: 1_000}, DEFAULT: {PRODUCER_BYTE_RATE: 1_000}})
    quota = manager(table, clock, cap=50)
    for i in range(5_000):
        clock.advance(1)
        if i % 10 == 0:
            quota.record_topic("orders", 10)  # in use: a second chance each time the eviction comes round
        decision = quota.record_topic(f"flood-{i}", 100)
        if i >= 50:
            assert isinstance(decision, Throttle), i  # starts at its limit: no fresh burst
    assert len(quota) <= 51  # the cap (and the named topic, made beyond it if it was evicted while idle)
    assert quota.keeper.get(quota.resolve_topic("orders").tags) is not None
    assert quota.overflowed >= 4_900


def test_grouped_stats_label_default_topics_together():
    clock = ManualClock(1_000_000)
    quota = manager(topic_table({"orders": {PRODUCER_BYTE_RATE: 1_000}, DEFAULT: {PRODUCER_BYTE_RATE: 500}}), clock)
    quota.record_topic("orders", 100)
    for i in range(20):
        quota.record_topic(f"t{i}", 10)
    grouped = {label: (stats.value_total, limit) for label, stats, limit in quota.grouped_stats()}
    assert grouped == {"orders": (100, 1_000), DEFAULT: (200, 500)}
    assert (quota.label("orders"), quota.label("t3")) == ("orders", DEFAULT)
    bare = manager(topic_table({"orders": {PRODUCER_BYTE_RATE: 1_000}}), clock)
    assert bare.label("t3") is None  # no quota covers it: not counted anywhere


def test_shadow_and_smoothing_switch_both_managers():
    clock = ManualClock(1_000_000)
    topics = TopicQuotas(
        topic_table({"orders": {PRODUCER_BYTE_RATE: 1_000}}, shadow=["orders"]), clock, WINDOW, 25_000, 10
    )
    assert topics.enabled and topics.produce.enabled and not topics.fetch.enabled
    decisions = [topics.produce.record_topic("orders", 5_000) for _ in range(5)]
    assert all(d.shadow for d in decisions if isinstance(d, Throttle)) and any(
        isinstance(d, Throttle) for d in decisions
    )
    topics.set_shadow(True)
    topics.set_smoothing(True)
    assert topics.produce.shadow and topics.fetch.smoothing
    clock.advance(4 * 3_600_000)
    assert topics.expire_idle() == 1
