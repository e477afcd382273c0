"""KIP-599 charges what the broker did: tokens given back for topics it did not create, delete or extend.

Pure, with a fake clock. Kafka validates first and charges only the partitions it creates or deletes; the proxy
admits before the broker has answered, then :meth:`ControllerMutationQuotaManager.refund` gives back what the
broker's answer reports as failed, never above the burst.
"""

from __future__ import annotations

from quota.managers.mutation import ControllerMutationQuotaManager, TokenBucket
from quota.primitives.clock import ManualClock
from quota.primitives.quota_table import QuotaTable
from quota.primitives.rate import QuotaWindow


def manager(rate: float, num: int, clock: ManualClock) -> ControllerMutationQuotaManager:
    table = QuotaTable.from_values([({"user": "<default>"}, {"controller_mutation_rate": rate}, False)])
    return ControllerMutationQuotaManager(table, clock, QuotaWindow(num, 1))


def test_the_issues_create_if_absent_loop_leaves_the_bucket_where_the_one_real_create_did():
    """Rate 2/s, 10 x 1 s windows (burst 20): one 4-partition create (16 left), then twelve 'create if absent'
    calls of the same topic, each admitted and then refunded (the broker answered TOPIC_ALREADY_EXISTS): the
    bucket never goes negative, and another client's 4-partition create is admitted."""
    clock = ManualClock(1_000_000)
    quotas = manager(2, 10, clock)
    assert quotas.admit("ANONYMOUS", "first", [4]).all_admitted
    assert quotas.tokens("ANONYMOUS", "first") == 16
    for _ in range(12):
        admission = quotas.admit("ANONYMOUS", "first", [4])
        assert admission.all_admitted and admission.throttle is None
        quotas.refund("ANONYMOUS", "first", 4)
        assert quotas.tokens("ANONYMOUS", "first") == 16
    other = quotas.admit("ANONYMOUS", "other", [4])
    assert other.all_admitted and other.throttle is None
    assert quotas.tokens("ANONYMOUS", "other") == 12


def test_a_refund_never_raises_the_bucket_above_its_burst():
    clock = ManualClock(0)
    quotas = manager(2, 10, clock)
    quotas.record("u", "c", 4)  # 16
    clock.advance(1_000)  # refilled to 18
    quotas.refund("u", "c", 4)
    assert quotas.tokens("u", "c") == 20  # not 22
    quotas.refund("u", "c", 100)
    assert quotas.tokens("u", "c") == 20


def test_a_refund_after_the_bucket_went_negative_gives_back_exactly_what_was_taken():
    clock = ManualClock(0)
    quotas = manager(2, 10, clock)
    admission = quotas.admit("u", "c", [15, 15, 15])  # 20 -> 5 -> -10; the third is rejected
    assert admission.admitted == (True, True, False)
    assert admission.throttle.throttle_time_ms == 5_000
    quotas.refund("u", "c", 15)  # the second was refused by the broker
    assert quotas.tokens("u", "c") == 5
    assert quotas.admit("u", "c", [1]).all_admitted


def test_a_refund_for_an_entity_no_quota_applies_to_or_whose_bucket_is_gone_changes_nothing():
    clock = ManualClock(0)
    table = QuotaTable.from_values([({"client-id": "limited"}, {"controller_mutation_rate": 1}, False)])
    quotas = ControllerMutationQuotaManager(table, clock, QuotaWindow(10, 1))
    quotas.refund("u", "free", 5)  # unlimited: nothing to give back
    quotas.refund("u", "limited", 5)  # never charged: no bucket is made (a new one starts full)
    assert quotas.tokens("u", "limited") == 10


def test_token_bucket_give_back_refills_first_then_caps_at_the_burst():
    bucket = TokenBucket(rate=5, burst=500, now_ms=0)
    bucket.take(560, 0)  # -60
    bucket.give_back(80, 2_000)  # -60 + 10 refilled + 80
    assert bucket.tokens == 30
    bucket.give_back(1_000, 2_000)
    assert bucket.tokens == 500


def test_applied_throttles_are_counted_when_recorded_as_told_and_shadow_ones_when_decided():
    """The throttle-time counters: an applied throttle decided at admission is not counted until the caller records
    the one the client is told (after the broker's answer settled it; 0 is not counted); a shadow throttle, never
    told nor settled, is counted when decided."""
    clock = ManualClock(1_000_000)
    quotas = manager(1, 10, clock)
    decided = quotas.record_and_decide("u", "c", 15)  # 10 -> -5: 5 s decided
    assert decided.throttle_time_ms == 5_000
    ((stats, _),) = quotas.buckets()
    assert (stats.throttle_time_ms_total, stats.throttled_count) == (0, 0)
    quotas.record_throttle("u", "c", 0)
    quotas.record_throttle("u", "c", 3_000)
    ((stats, _),) = quotas.buckets()
    assert (stats.throttle_time_ms_total, stats.throttled_count) == (3_000, 1)
    shadow_table = QuotaTable.from_values([({"user": "<default>"}, {"controller_mutation_rate": 1}, True)])
    shadow = ControllerMutationQuotaManager(shadow_table, clock, QuotaWindow(10, 1))
    assert shadow.admit("u", "c", [15]).throttle.shadow
    ((stats, _),) = shadow.buckets()
    assert (stats.shadow_throttle_time_ms_total, stats.throttle_time_ms_total) == (5_000, 0)
