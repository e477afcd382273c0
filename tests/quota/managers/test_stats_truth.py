"""What the quota managers' stats say about enforcement, with a fake clock: a shadow quota's throttles are counted
apart from applied ones, and once an entry is deleted the limit reported is the one that applies now."""

from __future__ import annotations

import math

from quota.managers.client_quota import ClientQuotaManager
from quota.managers.mutation import ControllerMutationQuotaManager
from quota.managers.producer_ids import ProducerIdQuotaManager
from quota.primitives.clock import ManualClock
from quota.primitives.entity import CONTROLLER_MUTATION_RATE, PRODUCER_BYTE_RATE, PRODUCER_IDS_RATE, QuotaTags
from quota.primitives.quota_table import QuotaTable
from quota.primitives.rate import QuotaWindow

P = PRODUCER_BYTE_RATE
ETL = QuotaTags("", "etl")


def table(*values) -> QuotaTable:
    return QuotaTable.from_values(values)


# -- shadow throttles are not applied throttles -----------------------------------------------------------------


def test_a_shadow_entry_over_its_quota_moves_only_the_shadow_counters():
    m = ClientQuotaManager(table(({"client-id": "etl"}, {P: 100}, True)), P, ManualClock(1_000_000))
    for _ in range(5):
        assert m.record_and_decide("alice", "etl", 10_000).shadow
    stats = m.stats_for("alice", "etl")
    assert (stats.throttled_count, stats.throttle_time_ms_total, stats.throttle_time_ms_max) == (0, 0, 0)
    assert stats.shadow_throttled_count == 5 and stats.shadow_throttle_time_ms_total > 0


def test_proxy_wide_shadow_mode_moves_only_the_shadow_counters_and_enforcing_again_counts_applied():
    m = ClientQuotaManager(table(({"client-id": "etl"}, {P: 100})), P, ManualClock(1_000_000), shadow=True)
    m.record_and_decide("alice", "etl", 10_000)
    m.shadow = False  # quota.mode back to enforce
    assert not m.record_and_decide("alice", "etl", 10_000).shadow
    stats = m.stats_for("alice", "etl")
    assert stats.throttled_count == 1 and stats.shadow_throttled_count == 1
    assert stats.throttle_time_ms_max == stats.throttle_time_ms_total  # the applied one only


def test_the_summed_rest_keeps_shadow_and_applied_apart():
    m = ClientQuotaManager(table(({"client-id": "<default>"}, {P: 100}, True)), P, ManualClock(1_000_000))
    for i in range(4):
        m.record_and_decide("u", f"c{i}", 10_000)
    _, other = m.top_stats(2)
    assert other.throttled_count == 0 and other.shadow_throttled_count == 3


def test_shadow_mutation_throttles_are_not_applied_throttles():
    m = ControllerMutationQuotaManager(
        table(({"client-id": "admin"}, {CONTROLLER_MUTATION_RATE: 1}, True)), ManualClock(1_000_000), QuotaWindow(2, 1)
    )
    admission = m.admit("u", "admin", [5, 5])  # burst 2: enforced, the second would be rejected
    assert admission.all_admitted and admission.throttle.shadow
    assert m.record_and_decide("u", "admin", 10).shadow
    [(stats, _)] = m.buckets()
    assert stats.throttled_count == 0 and stats.throttle_time_ms_total == 0
    assert stats.shadow_throttled_count == 2 and stats.shadow_throttle_time_ms_total > 0


def test_shadow_producer_id_throttles_are_not_applied_throttles():
    m = ProducerIdQuotaManager(
        table(({"user": "alice"}, {PRODUCER_IDS_RATE: 1}, True)), window_num=1, window_size_s=10, expected_pids=10
    )
    for pid in range(3):
        m.record_and_decide("alice", pid, 0)
    [stats] = m.stats(0)
    assert stats.throttled_count == 0 and stats.throttle_time_ms_total == 0
    assert stats.shadow_throttled_count == 2 and stats.shadow_throttle_time_ms_total == 2 * 10_000 + 10_000


# -- a deleted entry's limit follows back to the quota that applies now ------------------------------------------


def limits(m: ClientQuotaManager) -> dict[QuotaTags, float]:
    return {s.tags: s.limit for s in m.stats()}


def test_deleted_pair_entry_falls_back_to_the_user_quota_at_once():
    """/users/alice/clients/etl (tags alice/etl) deleted: alice's clients count in /users/alice (tags alice/"")
    from now on. The old tags report no limit; the new ones report the user quota before the next record."""
    base = ({"user": "alice"}, {P: 100})
    m = ClientQuotaManager(table(base, ({"user": "alice", "client-id": "etl"}, {P: 1000})), P, ManualClock(5))
    m.record_and_decide("alice", "etl", 10)
    m.update_quotas(table(base))
    assert limits(m) == {QuotaTags("alice", "etl"): math.inf, QuotaTags("alice", ""): 100}
    m.update_quotas(table(base, ({"user": "alice", "client-id": "etl"}, {P: 1000})))  # and back again
    assert limits(m) == {QuotaTags("alice", "etl"): 1000, QuotaTags("alice", ""): 100}


def test_tags_other_clients_still_count_in_keep_their_limit():
    pair = ({"user": "alice", "client-id": "etl"}, {P: 1000})
    m = ClientQuotaManager(table(({"client-id": "etl"}, {P: 500})), P, ManualClock(5))
    m.record_and_decide("alice", "etl", 10)  # sensor ("", etl), made for alice
    m.update_quotas(table(({"client-id": "etl"}, {P: 500}), pair))
    assert limits(m) == {ETL: 500, QuotaTags("alice", "etl"): 1000}  # alice moved; bob would still count in ETL


def test_deleted_mutation_entry_falls_back():
    base = ({"user": "alice"}, {CONTROLLER_MUTATION_RATE: 2})
    pair = ({"user": "alice", "client-id": "admin"}, {CONTROLLER_MUTATION_RATE: 50})
    m = ControllerMutationQuotaManager(table(base, pair), ManualClock(5), QuotaWindow(2, 1))
    m.record_and_decide("alice", "admin", 1)
    m.update_quotas(table(base))
    assert {s.tags: s.limit for s, _ in m.buckets()} == {
        QuotaTags("alice", "admin"): math.inf,
        QuotaTags("alice", ""): 2,
    }
    assert m.tokens("alice", "admin") == 4  # the user quota's full bucket


def test_deleted_producer_id_entry_falls_back_to_the_default_or_to_none():
    user = ({"user": "alice"}, {PRODUCER_IDS_RATE: 50})
    m = ProducerIdQuotaManager(
        table(({"user": "<default>"}, {PRODUCER_IDS_RATE: 5}), user), window_num=1, window_size_s=10, expected_pids=10
    )
    m.record_and_decide("alice", 1, 0)
    m.update_quotas(table(({"user": "<default>"}, {PRODUCER_IDS_RATE: 5})))
    assert [s.limit for s in m.stats(0)] == [5]
    m.update_quotas(table(({"client-id": "x"}, {P: 1})))
    assert [s.limit for s in m.stats(0)] == [math.inf]
    m.update_quotas(table(user))
    assert [s.limit for s in m.stats(0)] == [50]
