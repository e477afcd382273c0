"""The active producer-id quota (KIP-936) with a fake clock: the bloom filters' four steps, the cleanup, decisions."""

from __future__ import annotations

import math

import pytest

from quota.managers.producer_id_cache import BloomFilter, TimeControlledBloomFilter
from quota.managers.producer_ids import ProducerIdQuotaManager
from quota.primitives.decision import FORWARD, Throttle
from quota.primitives.quota_table import QuotaTable

HOUR_MS = 3_600_000


def test_bloom_filter_has_no_false_negatives_and_about_its_false_positive_rate():
    f = BloomFilter(10_000, 0.01)
    for pid in range(10_000):
        f.add(pid)
    assert all(pid in f for pid in range(10_000))
    false_positives = sum(pid in f for pid in range(1_000_000, 1_020_000))
    assert false_positives / 20_000 <= 0.015


def test_the_kips_four_steps():
    cache = TimeControlledBloomFilter(HOUR_MS, 100, 0.001)
    assert not cache.seen_or_add(1, 0)  # step 1: filter 1 created, takes the PID
    assert len(cache.filters) == 1
    assert cache.seen_or_add(1, HOUR_MS // 4)
    assert not cache.seen_or_add(2, HOUR_MS // 2)  # step 2: filter 2 created at half a window, takes new PIDs
    assert [created for created, _ in cache.filters] == [0, HOUR_MS // 2]
    assert 2 not in cache.filters[0][1] and 2 in cache.filters[1][1]
    assert cache.seen_or_add(1, HOUR_MS // 2 + 1)  # both are read; 1 is copied into filter 2 (still active)
    assert not cache.seen_or_add(3, HOUR_MS - 1)
    cache.dispose_expired(HOUR_MS)  # step 3: filter 1 disposed at one window
    assert [created for created, _ in cache.filters] == [HOUR_MS // 2]
    assert cache.seen_or_add(1, HOUR_MS) and cache.seen_or_add(3, HOUR_MS)  # step 4: filter 3, half of 2's window
    assert [created for created, _ in cache.filters] == [HOUR_MS // 2, HOUR_MS]
    assert not cache.seen_or_add(4, HOUR_MS)
    assert 4 in cache.filters[1][1] and 1 in cache.filters[1][1]  # 1, still active, was carried over
    cache.dispose_expired(HOUR_MS + HOUR_MS // 2)
    assert cache.seen_or_add(1, HOUR_MS + HOUR_MS // 2) and cache.seen_or_add(4, HOUR_MS + HOUR_MS // 2)
    assert not cache.seen_or_add(2, HOUR_MS + HOUR_MS // 2)  # 2 was not seen for a window: counted again
    cache.dispose_expired(3 * HOUR_MS)
    assert not cache.live


def test_a_pid_unseen_for_a_whole_window_counts_again():
    cache = TimeControlledBloomFilter(HOUR_MS, 100, 0.001)
    cache.seen_or_add(7, 0)
    assert not cache.seen_or_add(7, HOUR_MS)


def quotas(limit=5, num=1, **kw):
    table = QuotaTable.from_values([({"user": "alice"}, {"producer_ids_rate": limit})])
    return ProducerIdQuotaManager(table, window_num=num, window_size_s=3600, expected_pids=100, **kw)


def test_the_first_n_new_pids_pass_then_each_new_one_is_throttled_and_known_ones_are_not():
    manager = quotas(limit=5, num=1)  # burst 5 PIDs, refill 5 per hour
    assert [manager.record_and_decide("alice", pid, 0) for pid in range(5)] == [FORWARD] * 5
    throttle = manager.record_and_decide("alice", 99, 0)
    assert throttle == Throttle(720_000, 720_000)  # -1 token at 5 per 3600 s
    assert manager.record_and_decide("alice", 3, 1) is FORWARD  # known: not counted again
    assert manager.record_and_decide("bob", 1000, 0) is FORWARD  # no quota for bob


def test_the_reported_throttle_and_the_mute_are_capped_and_the_default_user_gives_each_user_a_bucket():
    table = QuotaTable.from_values([({"user": "<default>"}, {"producer_ids_rate": 1})])
    manager = ProducerIdQuotaManager(table, window_num=1, window_size_s=10, expected_pids=10, max_mute_ms=5_000)
    assert manager.record_and_decide("a", 1, 0) is FORWARD
    assert manager.record_and_decide("a", 2, 0) == Throttle(5_000, 5_000)  # uncapped: 10 s
    assert manager.record_and_decide("b", 1, 0) is FORWARD


def test_a_client_that_honours_the_reported_throttle_is_never_told_to_wait_past_its_delivery_timeout():
    """Issue 23's probe: 100 new ids an hour (one window), 5 ids short: -5 tokens at 100 per 3600 s is 180 s, past
    a producer's 120 s delivery timeout; ``quota.mute.max.ms`` (25 s by default) caps what is reported, as it caps
    the byte-rate throttles, and the applied-throttle total counts what was reported."""
    manager = quotas(limit=100, num=1, max_mute_ms=25_000)
    decisions = [manager.record_and_decide("alice", pid, 0) for pid in range(105)]
    assert decisions[:100] == [FORWARD] * 100
    assert decisions[-1] == Throttle(25_000, 25_000)
    assert all(d.throttle_time_ms <= 25_000 and d.mute_ms <= 25_000 for d in decisions[100:])
    (stats,) = manager.stats(0)
    assert stats.throttle_time_ms_total == 5 * 25_000 and stats.throttled_count == 5
    shadow = quotas(limit=100, num=1, max_mute_ms=25_000, shadow=True)
    assert [shadow.record_and_decide("alice", pid, 0) for pid in range(105)][-1] == Throttle(25_000, 25_000, True)


def test_cleanup_drops_users_whose_filters_are_all_disposed():
    manager = quotas()
    manager.record_and_decide("alice", 1, 0)
    assert manager.cleanup(HOUR_MS - 1) == 0 and len(manager) == 1
    assert manager.cleanup(HOUR_MS) == 1 and len(manager) == 0


def test_an_idle_user_gets_what_its_bucket_refilled_not_a_fresh_burst():
    """Issue 23 item 5: 5 ids an hour, 11 windows (a burst of 55). Exhausted, then idle for one window, its filters
    are all disposed; the bucket must outlive them (it had refilled 5 tokens, 4 above zero), not start full again."""
    manager = quotas(limit=5, num=11)
    assert [manager.record_and_decide("alice", pid, 0) for pid in range(55)] == [FORWARD] * 55
    assert manager.record_and_decide("alice", 55, 0) == Throttle(720_000, 720_000)  # -1 token
    assert manager.cleanup(HOUR_MS) == 0 and len(manager) == 1  # filters gone, the bucket is not full: kept
    (stats,) = manager.stats(HOUR_MS)
    assert stats.tokens == pytest.approx(4.0) and stats.cache_bytes == 0
    later = [manager.record_and_decide("alice", pid, HOUR_MS) for pid in range(1000, 1010)]
    assert later[:4] == [FORWARD] * 4 and all(isinstance(d, Throttle) for d in later[4:])


def test_a_user_is_dropped_once_its_filters_are_gone_and_its_bucket_is_full_again():
    manager = quotas(limit=5, num=11)
    for pid in range(56):  # -1 token: full again after 56 / 5 hours
        manager.record_and_decide("alice", pid, 0)
    full_ms = 56 * HOUR_MS // 5
    assert manager.cleanup(full_ms - 1) == 0 and len(manager) == 1
    assert manager.cleanup(full_ms) == 1 and len(manager) == 0
    assert [manager.record_and_decide("alice", pid, full_ms) for pid in range(100, 155)] == [FORWARD] * 55


def test_a_zero_rate_users_bucket_never_refills_and_is_still_dropped_with_its_filters():
    """A bucket of rate 0 never fills again; a fresh one decides the same (every new id throttled), so the user
    is dropped with its filters and memory stays bounded."""
    manager = quotas(limit=0, num=11, max_mute_ms=25_000)
    assert manager.record_and_decide("alice", 1, 0) == Throttle(25_000, 25_000)
    assert manager.cleanup(HOUR_MS) == 1 and len(manager) == 0
    assert manager.record_and_decide("alice", 2, HOUR_MS) == Throttle(25_000, 25_000)


@pytest.mark.parametrize("expected,rate", [(1000, 0.01), (100_000, 0.001)])
def test_filter_size_follows_expected_items_and_rate(expected, rate):
    f = BloomFilter(expected, rate)
    optimal_bytes = expected * 1.44 * -math.log2(rate) / 8  # m = -n ln p / (ln 2)^2 bits
    assert 0.95 * optimal_bytes <= f.size_bytes <= 1.05 * optimal_bytes + 8


def test_a_flood_keeps_being_counted_and_memory_stays_bounded():
    cache = TimeControlledBloomFilter(HOUR_MS, 1000, 0.001)
    new = sum(not cache.seen_or_add(pid, 0) for pid in range(20_000))
    assert new >= 0.99 * 20_000  # full filters give way to fresh ones instead of taking every PID for a known one
    assert len(cache.filters) <= 4 and cache.size_bytes <= 4 * BloomFilter(1000, 0.001).size_bytes


def test_issued_producer_ids_are_attributed_and_bounded():
    from quota.managers.producer_ids import IssuedProducerIds

    issued = IssuedProducerIds(max_entries=2)
    for key in [("u", "a", "1.1.1.1")] * 3 + [("u", "b", "1.1.1.2"), ("v", "c", "1.1.1.3")]:
        issued.record(*key)
    assert issued.counts() == {("u", "b", "1.1.1.2"): 1, ("v", "c", "1.1.1.3"): 1}
    assert issued.other == 3
