import math

import pytest

from quota import (
    DEFAULT,
    FORWARD,
    INT32_MAX,
    PRODUCER_BYTE_RATE,
    ClientQuotaManager,
    ManualClock,
    QuotaTable,
    QuotaTags,
    QuotaWindow,
    Throttle,
    is_applied,
)

P = PRODUCER_BYTE_RATE


def manager(values, clock=None, **kwargs) -> ClientQuotaManager:
    return ClientQuotaManager(QuotaTable.from_values(values), P, clock or ManualClock(), **kwargs)


def test_kafka_quota_violation_example_throttles_2100_ms():
    # ClientQuotaManagerTest.testQuotaViolation: /clients/<default> = 500 B/s, 11 x 1 s windows.
    clock = ManualClock()
    m = manager([({"client-id": DEFAULT}, {P: 500})], clock)
    for _ in range(10):
        assert m.record_and_get_throttle_time_ms("ANONYMOUS", "unknown", 400) == 0
        clock.advance(1000)
    clock.advance(500)
    # 400 * 10 + 2300 = 6300 bytes over 10.5 s = 600 B/s; (600 - 500) / 500 * 10.5 s = 2100 ms.
    assert m.record_and_get_throttle_time_ms("ANONYMOUS", "unknown", 2300) == 2100
    clock.advance(2100)
    for _ in range(10):
        m.record_and_get_throttle_time_ms("ANONYMOUS", "unknown", 400)
        clock.advance(1000)
    assert m.record_and_get_throttle_time_ms("ANONYMOUS", "unknown", 0) == 0


def test_a_fresh_client_may_burst_samples_minus_one_windows_of_quota():
    m = manager([({"user": DEFAULT}, {P: 1000})])
    assert m.max_value_in_quota_window("alice", "etl") == 10_000
    assert m.record_and_get_throttle_time_ms("alice", "etl", 10_000) == 0
    # One byte more: (1000.1 - 1000) / 1000 * 10 s = 1 ms.
    assert m.record_and_get_throttle_time_ms("alice", "etl", 1) == 1


def test_unconfigured_clients_are_never_throttled_but_are_metered():
    m = manager([({"user": "bob"}, {P: 1})])
    assert m.record_and_get_throttle_time_ms("alice", "etl", 10**12) == 0
    assert m.record_and_decide("alice", "etl", 10**12) is FORWARD
    assert m.max_value_in_quota_window("alice", "etl") == math.inf
    assert m.remaining_in_quota_window("alice", "etl") == math.inf
    assert m.cap_to_quota_window("alice", "etl", 52_428_800) == 52_428_800
    stats = m.stats_for("alice", "etl")
    assert stats.tags == QuotaTags("", "etl") and stats.value_total == 2 * 10**12 and stats.entity is None


def test_max_value_in_quota_window_follows_the_window_settings():
    # ClientQuotaManagerTest.testGetMaxValueInQuotaWindowWithNonDefaultQuotaWindow: 4 samples, /users/<default>=10.
    m = manager([({"user": DEFAULT}, {P: 10})], window=QuotaWindow(num=4, size_seconds=1))
    assert m.max_value_in_quota_window("userA", "client1") == 30
    big = manager([({"user": DEFAULT}, {P: 10**12})])
    assert big.cap_to_quota_window("a", "b", 52_428_800) == 52_428_800
    assert big.cap_to_quota_window("a", "b", INT32_MAX) == INT32_MAX


def test_remaining_in_quota_window_shrinks_as_bytes_are_recorded():
    clock = ManualClock()
    m = manager([({"user": DEFAULT}, {P: 1000})], clock)
    assert m.remaining_in_quota_window("alice", "etl") == 10_000
    m.record_and_get_throttle_time_ms("alice", "etl", 4_000)
    assert m.remaining_in_quota_window("alice", "etl") == 6_000
    assert m.record_and_get_throttle_time_ms("alice", "etl", 6_000) == 0
    assert m.remaining_in_quota_window("alice", "etl") == 0


def test_remaining_floor_is_a_cheap_lower_bound_of_the_remaining_budget():
    # what a consumer's Fetch reads first: when it covers max_bytes, the exact budget is not measured
    clock = ManualClock()
    m = manager([({"user": DEFAULT}, {P: 1000})], clock)
    assert m.remaining_floor("alice", "etl") == 0.0  # not seen yet: nothing known without resolving
    assert m.remaining_floor("bob", "any") == 0.0
    m.record_and_get_throttle_time_ms("alice", "etl", 4_000)
    assert 5_999 < m.remaining_floor("alice", "etl") <= m.remaining_in_quota_window("alice", "etl") == 6_000
    clock.advance(30_000)  # the bytes left the window: the floor holds until a measurement purges them
    assert m.remaining_floor("alice", "etl") <= m.remaining_in_quota_window("alice", "etl") == 10_000
    m.record_and_get_throttle_time_ms("alice", "etl", 9_000)
    assert m.remaining_floor("alice", "etl") < 1_001  # near the quota the exact figure decides
    smooth = manager([({"user": DEFAULT}, {P: 1000})], clock, smoothing=True)
    smooth.record_and_get_throttle_time_ms("alice", "etl", 1)
    assert smooth.remaining_floor("alice", "etl") == 0.0  # the bucket decides: measured each time


def test_clients_with_the_same_tags_share_one_quota():
    m = manager([({"user": DEFAULT}, {P: 1000})])
    assert m.record_and_get_throttle_time_ms("alice", "etl", 10_000) == 0
    assert m.record_and_get_throttle_time_ms("alice", "web", 1_000) > 0  # same (alice, "") sensor
    assert m.record_and_get_throttle_time_ms("bob", "etl", 10_000) == 0  # bob has his own
    assert len(m) == 2


def test_throttle_is_capped_by_the_mute_cap():
    m = manager([({"user": DEFAULT}, {P: 1000})])
    assert m.max_throttle_time_ms == 11_000  # quota.window.num * quota.window.size.seconds
    assert m.record_and_get_throttle_time_ms("alice", "etl", 10**9) == 11_000
    capped = manager([({"user": DEFAULT}, {P: 1000})], max_throttle_time_ms=5_000)
    assert capped.record_and_get_throttle_time_ms("alice", "etl", 10**9) == 5_000


def test_decisions_carry_throttle_mute_and_shadow():
    m = manager([({"user": DEFAULT}, {P: 1000}), ({"user": "carol"}, {P: 1000}, True)])
    assert m.record_and_decide("alice", "etl", 10_000) is FORWARD
    decision = m.record_and_decide("alice", "etl", 1_000)
    assert decision == Throttle(throttle_time_ms=1_000, mute_ms=1_000) and is_applied(decision)
    m.record_and_decide("carol", "etl", 10_000)
    shadow = m.record_and_decide("carol", "etl", 1_000)
    assert isinstance(shadow, Throttle) and shadow.shadow and not is_applied(shadow)
    everyone = manager([({"user": DEFAULT}, {P: 1000})], shadow=True)
    everyone.record_and_decide("alice", "etl", 10_000)
    assert everyone.record_and_decide("alice", "etl", 1_000).shadow


def test_stats_count_bytes_and_throttles_as_plain_values():
    clock = ManualClock()
    m = manager([({"user": DEFAULT}, {P: 1000})], clock)
    m.record_and_get_throttle_time_ms("alice", "etl", 10_000)
    t1 = m.record_and_get_throttle_time_ms("alice", "etl", 1_000)
    t2 = m.record_and_get_throttle_time_ms("alice", "etl", 1_000)
    (stats,) = m.stats()
    assert stats.tags == QuotaTags("alice", "") and stats.entity == "/users/<default>"
    assert stats.value_total == 12_000 and stats.limit == 1000
    assert stats.rate == pytest.approx(1_200)
    assert stats.throttled_count == 2 and stats.throttle_time_ms_total == t1 + t2 > 0
    assert stats.last_record_ms == 0 and not stats.shadow


def test_unrecord_takes_bytes_back():
    m = manager([({"user": DEFAULT}, {P: 1000})])
    m.record_and_get_throttle_time_ms("alice", "etl", 10_000)
    m.unrecord("alice", "etl", 5_000)
    assert m.record_and_get_throttle_time_ms("alice", "etl", 5_000) == 0


def test_record_no_throttle_is_paid_by_the_next_checked_record():
    m = manager([({"user": DEFAULT}, {P: 1000})])
    m.record_no_throttle("alice", "etl", 20_000)
    assert m.record_and_get_throttle_time_ms("alice", "etl", 0) == 10_000


def test_a_quota_update_applies_to_live_sensors_at_once():
    clock = ManualClock()
    m = manager([({"user": DEFAULT}, {P: 1000})], clock)
    assert m.record_and_get_throttle_time_ms("alice", "etl", 5_000) == 0
    m.update_quotas(QuotaTable.from_values([({"user": DEFAULT}, {P: 400})]))
    assert m.stats()[0].limit == 400
    # 5000 B over 10 s = 500 B/s > 400: (500 - 400) / 400 * 10 s.
    assert m.record_and_get_throttle_time_ms("alice", "etl", 0) == 2_500
    m.update_quotas(QuotaTable.from_values([({"user": DEFAULT}, {P: 4000})]))
    assert m.record_and_get_throttle_time_ms("alice", "etl", 30_000) == 0


def test_a_quota_update_can_move_a_client_to_a_more_specific_sensor():
    m = manager([({"user": DEFAULT}, {P: 1000})])
    m.record_and_get_throttle_time_ms("alice", "etl", 10_000)
    swapped = [({"user": DEFAULT}, {P: 1000}), ({"user": "alice", "client-id": "etl"}, {P: 5000})]
    m.update_quotas(QuotaTable.from_values(swapped))
    assert m.resolve("alice", "etl").tags == QuotaTags("alice", "etl")
    assert m.record_and_get_throttle_time_ms("alice", "etl", 50_000) == 0
    assert m.record_and_get_throttle_time_ms("alice", "web", 1) > 0  # still in the old (alice, "") sensor
    assert {s.tags for s in m.stats()} == {QuotaTags("alice", ""), QuotaTags("alice", "etl")}


def test_idle_sensors_expire_after_an_hour():
    clock = ManualClock()
    m = manager([({"user": DEFAULT}, {P: 1000})], clock)
    m.record_and_get_throttle_time_ms("alice", "etl", 1)
    clock.advance(1_800_000)
    m.record_and_get_throttle_time_ms("bob", "etl", 1)
    clock.set(3_600_000)
    m.record_and_get_throttle_time_ms("bob", "etl", 1)
    assert len(m) == 2  # alice idle for exactly an hour: not yet (Kafka expires when idle > expiration)
    clock.advance(1)
    m.record_and_get_throttle_time_ms("bob", "etl", 1)  # expiry happens on the record path too
    assert [s.tags for s in m.stats()] == [QuotaTags("bob", "")]
    clock.advance(3_600_001)
    assert m.expire_idle_sensors() == 1 and len(m) == 0


def test_memory_stays_bounded_with_many_short_lived_clients():
    clock = ManualClock()
    m = manager([({"client-id": DEFAULT}, {P: 1000})], clock, inactive_sensor_expiration_ms=60_000)
    for i in range(10_000):
        m.record_and_get_throttle_time_ms("ANONYMOUS", f"client-{i}", 10)
        clock.advance(100)
    assert len(m) <= 601


class CountingDict(dict):
    lookups = 0

    def get(self, key, default=None):
        CountingDict.lookups += 1
        return super().get(key, default)


def _lookups_per_record(n_entities: int) -> int:
    values = [({"user": DEFAULT}, {P: 1000}), ({"client-id": DEFAULT}, {P: 1000})]
    values += [({"user": f"u{i}", "client-id": f"c{i}"}, {P: 1000}) for i in range(n_entities)]
    values += [({"client-id": f"c{i}"}, {P: 1000}) for i in range(n_entities)]
    m = manager(values)
    chunked = m.quotas._by_key[P]  # a ChunkedMap: count the lookups in its chunks
    chunked._chunks = [CountingDict(chunk) for chunk in chunked._chunks]
    CountingDict.lookups = 0
    for user, client_id in [("u1", "c1"), ("u1", "zz"), ("nobody", "c2"), ("nobody", "zz")]:
        m.record_and_get_throttle_time_ms(user, client_id, 100)
        m.max_value_in_quota_window(user, client_id)
    return CountingDict.lookups


def test_decision_cost_is_flat_in_the_number_of_configured_entities():
    assert _lookups_per_record(10) == _lookups_per_record(20_000)


def test_enabled_only_when_some_entity_has_the_key():
    from quota.primitives.clock import ManualClock
    from quota.primitives.quota_table import QuotaTable

    manager = ClientQuotaManager(
        QuotaTable.from_values([({"user": "a"}, {"consumer_byte_rate": 10})]), "producer_byte_rate", ManualClock()
    )
    assert not manager.enabled
    manager.update_quotas(QuotaTable.from_values([({"user": "a"}, {"producer_byte_rate": 10})]))
    assert manager.enabled
