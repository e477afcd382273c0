"""The controller mutation quota (KIP-599) with a fake clock: the token bucket, strict and permissive admission."""

from __future__ import annotations

import math

import pytest

from quota.managers.mutation import ControllerMutationQuotaManager, TokenBucket
from quota.primitives.clock import ManualClock
from quota.primitives.decision import FORWARD, Throttle
from quota.primitives.quota_table import QuotaTable
from quota.primitives.rate import QuotaWindow


def manager(rate: float = 5, num: int = 100, size: int = 1, entity=None, shadow=False, clock=None):
    table = QuotaTable.from_values([(entity or {"client-id": "admin"}, {"controller_mutation_rate": rate}, shadow)])
    return ControllerMutationQuotaManager(table, clock or ManualClock(1_000_000), QuotaWindow(num, size))


def test_the_kips_worked_example_560_mutations_at_5_per_second_burst_500_is_throttled_12_s():
    quotas = manager(rate=5, num=100)
    assert quotas.tokens("u", "admin") == 500
    decision = quotas.record_and_decide("u", "admin", 560)
    assert quotas.tokens("u", "admin") == -60
    assert decision == Throttle(12_000, 12_000)


def test_bucket_refills_at_the_rate_and_never_above_the_burst():
    bucket = TokenBucket(rate=5, burst=500, now_ms=0)
    bucket.take(560, 0)
    assert bucket.refill(2_000) == -50
    assert bucket.throttle_time_ms() == 10_000
    assert bucket.refill(12_000) == 0
    assert bucket.refill(1_000_000) == 500


def test_strict_admits_topics_in_order_while_tokens_are_not_negative():
    """7 x 80 on a full bucket of 500: all admitted (the 7th starts at 20 >= 0), tokens end at -60; the next
    topic is rejected with a throttle of 12 s; after 12 s a topic is admitted again."""
    clock = ManualClock(1_000_000)
    quotas = manager(clock=clock)
    first = quotas.admit("u", "admin", [80] * 7)
    assert first.all_admitted and first.throttle is None
    assert quotas.tokens("u", "admin") == -60
    second = quotas.admit("u", "admin", [1])
    assert second.admitted == (False,)
    assert second.throttle == Throttle(12_000, 12_000)
    clock.advance(12_000)
    third = quotas.admit("u", "admin", [1])
    assert third.admitted == (True,) and third.throttle is None


def test_strict_ten_topics_of_80_on_a_full_bucket_admit_the_first_7_and_reject_the_last_3():
    quotas = manager()
    admission = quotas.admit("u", "admin", [80] * 10)
    assert admission.admitted == (True,) * 7 + (False,) * 3
    assert admission.throttle.throttle_time_ms == 12_000
    assert quotas.tokens("u", "admin") == -60  # rejected topics take nothing


def test_a_topic_of_unknown_size_is_admitted_by_the_same_rule_and_recorded_later():
    quotas = manager()
    admission = quotas.admit("u", "admin", [480, None, 10])
    assert admission.admitted == (True, True, True)
    quotas.record("u", "admin", 100)
    assert quotas.tokens("u", "admin") == 500 - 480 - 10 - 100


def test_permissive_records_everything_and_throttles_only_below_zero():
    quotas = manager()
    assert quotas.record_and_decide("u", "admin", 500) is FORWARD
    assert quotas.record_and_decide("u", "admin", 1) == Throttle(200, 200)


def test_mute_is_capped_but_the_reported_throttle_is_not():
    table = QuotaTable.from_values([({"client-id": "admin"}, {"controller_mutation_rate": 1})])
    quotas = ControllerMutationQuotaManager(table, ManualClock(0), QuotaWindow(1, 1), max_mute_ms=5_000)
    decision = quotas.record_and_decide("u", "admin", 31)
    assert decision == Throttle(30_000, 5_000)


def test_unconfigured_clients_are_never_counted():
    quotas = manager()
    assert quotas.admit("u", "other", [10_000]).all_admitted
    assert quotas.record_and_decide("u", "other", 10_000) is FORWARD
    assert quotas.tokens("u", "other") == math.inf
    assert len(quotas) == 0


def test_shadow_quota_admits_everything_and_marks_its_throttle_shadow():
    quotas = manager(shadow=True)
    admission = quotas.admit("u", "admin", [400, 400, 400])
    assert admission.all_admitted
    assert admission.throttle.shadow and admission.throttle.throttle_time_ms > 0


def test_default_entities_give_each_client_its_own_bucket():
    quotas = manager(entity={"client-id": "<default>"})
    quotas.record_and_decide("u", "a", 500)
    assert quotas.tokens("u", "a") == 0
    assert quotas.tokens("u", "b") == 500


def test_a_lower_quota_caps_the_tokens_at_the_new_burst():
    clock = ManualClock(0)
    quotas = manager(clock=clock)
    quotas.admit("u", "admin", [10])
    quotas.update_quotas(QuotaTable.from_values([({"client-id": "admin"}, {"controller_mutation_rate": 1})]))
    assert quotas.tokens("u", "admin") == 100
    assert quotas.record_and_decide("u", "admin", 101) == Throttle(1_000, 1_000)


@pytest.mark.parametrize("rate", [0.5, 3, 1000])
def test_throttle_is_minus_tokens_over_rate(rate):
    bucket = TokenBucket(rate, rate * 10, 0)
    bucket.take(rate * 10 + rate * 2, 0)
    assert bucket.throttle_time_ms() == 2_000


def test_a_topic_rejected_a_hair_below_zero_still_carries_a_throttle():
    """Refills in steps can leave the bucket at -1e-16, which rounds to a 0 ms throttle: the topic is rejected all
    the same, and the admission must say so with a throttle (the proxy forwards a request whose admission has none,
    so that topic reached the broker uncharged: a polite client re-sending as its mute ended got 1.4 x its quota)."""
    clock = ManualClock(0)
    quotas = manager(rate=5, num=2, clock=clock)  # burst 10
    assert quotas.admit("u", "admin", [1] * 11).all_admitted  # the 11th starts at 0: tokens -1
    clock.advance(36)
    assert quotas.admit("u", "admin", [1]).admitted == (False,)
    clock.advance(164)
    assert -1e-9 < quotas.tokens("u", "admin") < 0
    admission = quotas.admit("u", "admin", [1])
    assert admission.admitted == (False,)
    assert admission.throttle is not None and admission.throttle.throttle_time_ms >= 1
