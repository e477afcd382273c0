"""Per-partition byte rates on values, with a fake clock: which partitions have a quota, each partition's own budget
under ``partition: <default>``, the topic's quota beside them, refusal and shadow per partition, and the bound a
tenant writing to ever more partitions runs into."""

from __future__ import annotations

from quota.managers.topic_quota import PartitionQuotaManager, TopicQuotas
from quota.primitives.clock import ManualClock
from quota.primitives.decision import FORWARD, Throttle
from quota.primitives.entity import CONSUMER_BYTE_RATE, DEFAULT, PRODUCER_BYTE_RATE, QuotaEntity
from quota.primitives.partition_quotas import PartitionQuotaView
from quota.primitives.rate import QuotaWindow
from quota.primitives.topic_quotas import (
    PartitionEntity,
    TopicEntity,
    TopicQuotaEntry,
    TopicQuotaTable,
    topic_table,
)

WINDOW = QuotaWindow(11, 1)
P = PRODUCER_BYTE_RATE


def manager(table: TopicQuotaTable, clock: ManualClock, key: str = P, cap: int = 100_000) -> PartitionQuotaManager:
    return PartitionQuotaManager(PartitionQuotaView(table), key, clock, WINDOW, 25_000, max_tracked_entities=cap)


def test_a_partition_resolves_to_its_own_entry_else_its_topics_default_else_nothing():
    table = topic_table(
        {
            ("orders", "3"): {P: 100},
            ("orders", DEFAULT): {P: 500, CONSUMER_BYTE_RATE: 700},
            "orders": {P: 2_000},
            DEFAULT: {P: 50},
        }
    )
    own = table.resolve_partition(P, "orders", "3")
    assert (own.limit, own.entity.path, own.tags) == (100.0, "/topics/orders/partitions/3", ("orders", "3"))
    other = table.resolve_partition(P, "orders", "4")
    assert (other.limit, other.entity.path, other.tags) == (
        500.0,
        "/topics/orders/partitions/<default>",
        ("orders", "4"),
    )
    assert table.resolve_partition(CONSUMER_BYTE_RATE, "orders", "3").limit == 700  # the key from <default>
    assert table.resolve_partition(P, "clicks", "3").unlimited  # no partition entry for clicks: {topic: <default>}
    # is the topic's quota, not its partitions'
    assert table.resolve_topic(P, "orders").limit == 2_000 and table.resolve_topic(P, "clicks").limit == 50
    assert table.keys() == {P} and table.partition_keys() == {P, CONSUMER_BYTE_RATE}
    assert [m.entity.path for m in table.partition_matches(P, "orders", "3")] == [
        "/topics/orders/partitions/3",
        "/topics/orders/partitions/<default>",
    ]
    assert PartitionEntity.of("orders", "3") not in (TopicEntity.of("orders"), QuotaEntity("orders", "3"))


def test_partition_entries_alone_leave_the_topic_quotas_off():
    table = topic_table({("orders", DEFAULT): {P: 500}})
    topics = TopicQuotas(table, ManualClock(0), WINDOW, 25_000, 100)
    assert not topics.produce.enabled and topics.partition_produce.enabled
    assert topics.produce_enabled and not topics.fetch_enabled
    assert table.with_changes({("orders", DEFAULT): None}).partition_keys() == frozenset()


def test_each_partition_has_its_own_budget_under_default_and_a_hot_one_cannot_take_a_cold_ones():
    clock = ManualClock(1_000_000)
    quota = manager(topic_table({("orders", DEFAULT): {P: 1_000}}), clock)
    hot = []
    for _ in range(40):
        hot.append(quota.record_topic(("orders", 0), 900))
        clock.advance(300)
    assert any(isinstance(d, Throttle) for d in hot)
    assert isinstance(hot[-1], Throttle) and hot[-1].bound == 1_000
    assert quota.record_topic(("orders", 1), 250) is FORWARD  # the cold partition keeps its budget
    assert quota.record_topic(("clicks", 0), 10**6) is FORWARD  # another topic: no partition quota
    assert len(quota) == 2


def test_a_named_partition_keeps_its_own_rate_beside_default():
    clock = ManualClock(1_000_000)
    quota = manager(topic_table({("orders", "3"): {P: 10_000}, ("orders", DEFAULT): {P: 1_000}}), clock)
    named = [quota.record_topic(("orders", 3), 2_000) for _ in range(5)]
    assert all(d is FORWARD for d in named)  # 10 kB in a 11 s window: within its own 10 kB/s
    assert isinstance(quota.record_topic(("orders", 4), 30_000), Throttle)
    assert (quota.label(("orders", 3)), quota.label(("orders", 4)), quota.label(("clicks", 4))) == (
        "orders/3",
        "orders/<default>",
        None,
    )


def test_rotating_partitions_gain_nothing_beyond_the_topic_quota():
    """A tenant spreading its writes over every partition gets each partition's budget, and the topic's own quota
    holds their sum: both apply, the longest throttle wins (the proxy combines them)."""
    clock = ManualClock(1_000_000)
    topics = TopicQuotas(
        topic_table({"orders": {P: 2_000}, ("orders", DEFAULT): {P: 1_000}}), clock, WINDOW, 25_000, 100_000
    )
    throttled_by_topic = 0
    for i in range(200):
        partition = i % 64  # rotating: each partition stays under its own 1 kB/s
        on_partition = topics.partition_produce.record_topic(("orders", partition), 800)
        on_topic = topics.produce.record_topic("orders", 800)
        assert on_partition is FORWARD or i >= 64
        throttled_by_topic += isinstance(on_topic, Throttle)
        clock.advance(100)
    assert throttled_by_topic > 100  # 8 kB/s asked of a 2 kB/s topic


def test_a_partition_count_flood_keeps_the_table_bounded_and_gains_no_burst():
    """Writing to ever more partitions under <default>: at the cap a new partition evicts one made and not used
    since, its debt kept, and starts at its limit (no fresh burst per partition); a named partition in use stays."""
    clock = ManualClock(1_000_000)
    table = topic_table({("orders", "0"): {P: 1_000}, ("orders", DEFAULT): {P: 1_000}})
    quota = manager(table, clock, cap=50)
    for i in range(5_000):
        clock.advance(1)
        if i % 10 == 0:
            quota.record_topic(("orders", 0), 10)
        decision = quota.record_topic(("orders", 1 + i), 100)
        if i >= 50:
            assert isinstance(decision, Throttle), i
    assert len(quota) <= 51
    assert quota.keeper.get(quota.resolve_topic(("orders", 0)).tags) is not None
    assert quota.overflowed >= 4_900
    grouped = {label for label, _, _ in quota.grouped_stats()}
    assert grouped == {"orders/0", "orders/<default>"}  # metric labels stay bounded by the configuration


def test_reject_admits_a_partition_while_under_its_quota_and_counts_the_refused():
    clock = ManualClock(1_000_000)
    table = topic_table({("orders", DEFAULT): {P: 1_000}}, reject=[("orders", DEFAULT)])
    quota = manager(table, clock)
    assert quota.rejecting(("orders", 0)) and not quota.shadow_rejecting(("orders", 0))
    first = [quota.admit(("orders", 0), (6_000,))[0] for _ in range(4)]
    assert first == [True, True, False, False]  # 11 kB of room: the second takes it past, then refused
    assert quota.admit(("orders", 1), (6_000,)) == (True,)  # another partition's own budget
    assert quota.rejected == {"orders/<default>": (2, 12_000)}
    clock.advance(30_000)
    assert quota.admit(("orders", 0), (100,)) == (True,)


def test_a_shadow_partition_entry_counts_and_refuses_nothing():
    clock = ManualClock(1_000_000)
    key = ("orders", "2")
    table = topic_table({key: {P: 1_000}}, shadow=[key], reject=[key])
    quota = manager(table, clock)
    assert quota.shadow_rejecting(("orders", 2)) and not quota.rejecting(("orders", 2))
    decisions = [quota.record_topic(("orders", 2), 5_000) for _ in range(5)]
    throttles = [d for d in decisions if isinstance(d, Throttle)]
    assert throttles and all(d.shadow for d in throttles)
    assert quota.admit(("orders", 2), (50_000,), shadow=True) == (False,)
    assert quota.shadow_rejected == {"orders/2": (1, 50_000)} and quota.rejected == {}


def test_a_changed_table_moves_partitions_to_their_new_limit():
    clock = ManualClock(1_000_000)
    table = topic_table({("orders", DEFAULT): {P: 1_000}})
    topics = TopicQuotas(table, clock, WINDOW, 25_000, 100)
    topics.partition_produce.record_topic(("orders", 1), 100)
    entry = TopicQuotaEntry(PartitionEntity.of("orders", "1"), {P: 5_000})
    topics.update(table.with_changes({("orders", "1"): entry}))
    assert topics.partition_produce.resolve_topic(("orders", 1)).limit == 5_000
    assert topics.partition_produce.label(("orders", 1)) == "orders/1"
    topics.set_shadow(True)
    assert topics.partition_fetch.shadow and topics.partition_produce.shadow
    clock.advance(4 * 3_600_000)
    assert topics.expire_idle() >= 1
