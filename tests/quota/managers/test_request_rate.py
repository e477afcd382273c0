"""Request-rate quotas on values, with a fake clock: Kafka's throttle from the overshoot of a request count, the
client entities' precedence, a group's quota shared by every member, and what a tenant making up names runs into."""

from __future__ import annotations

import pytest

from quota.managers.request_rate import RequestRateQuotas
from quota.primitives.clock import ManualClock
from quota.primitives.decision import FORWARD, Throttle
from quota.primitives.entity import DEFAULT, REQUEST_RATE
from quota.primitives.group_quotas import GroupEntity, group_table
from quota.primitives.quota_table import QuotaTable
from quota.primitives.rate import QuotaWindow

WINDOW = QuotaWindow(11, 1)  # Kafka's defaults: the rate of a new sensor is measured over 10 s
JOIN_GROUP = 11


def quotas(clients=(), groups=None, clock=None, max_throttle_ms=5000, cap=100_000) -> RequestRateQuotas:
    table = QuotaTable.from_values([(entity, {REQUEST_RATE: rate}) for entity, rate in clients])
    return RequestRateQuotas(
        table,
        group_table(groups or {}),
        frozenset({JOIN_GROUP}),
        clock or ManualClock(1_000_000),
        WINDOW,
        max_throttle_ms,
        cap,
    )


def throttle_ms(decision) -> int:
    return decision.throttle_time_ms if isinstance(decision, Throttle) else 0


def test_the_throttle_is_kafkas_from_the_overshoot_of_the_count():
    """2 requests/s over a 10 s window: 20 at once are within quota, the 21st is 2.1/s: (2.1 - 2) / 2 x 10 s."""
    rates = quotas([({"client-id": "storm"}, 2)])
    decisions = [rates.record_client("ANONYMOUS", "storm") for _ in range(21)]
    assert decisions[:20] == [FORWARD] * 20
    assert decisions[20] == Throttle(500, 500)
    assert decisions[20].by == "" and decisions[20].bound == 2.0  # proxy.apis names it; the quota it was held to
    assert throttle_ms(rates.record_client("ANONYMOUS", "storm")) == 1000  # 22 requests: 2.2/s


def test_the_throttle_is_bounded_so_heartbeats_on_the_connection_still_go():
    rates = quotas([({"client-id": "storm"}, 1)], max_throttle_ms=3000)
    for _ in range(200):
        last = rates.record_client("ANONYMOUS", "storm")
    assert last == Throttle(3000, 3000)


def test_the_rate_recovers_as_the_window_moves_on():
    clock = ManualClock(1_000_000)
    rates = quotas([({"client-id": "c"}, 2)], clock=clock)
    for _ in range(25):
        rates.record_client("ANONYMOUS", "c")
    assert throttle_ms(rates.record_client("ANONYMOUS", "c")) > 0
    clock.advance(30_000)  # every sample has left the window
    assert rates.record_client("ANONYMOUS", "c") is FORWARD


def test_a_user_quota_is_shared_by_every_client_id_so_rotating_them_escapes_nothing():
    rates = quotas([({"user": DEFAULT}, 2)])
    decisions = [rates.record_client("mallory", f"rotated-{i}") for i in range(21)]
    assert decisions[:20] == [FORWARD] * 20 and throttle_ms(decisions[20]) == 500
    assert rates.record_client("alice", "rotated-0") is FORWARD  # another user has its own
    assert len(rates.clients) == 2  # one sensor per user, not per client id


def test_the_most_specific_entity_wins_as_for_the_byte_rates():
    rates = quotas([({"user": "alice"}, 1), ({"user": "alice", "client-id": "etl"}, 100)])
    assert rates.clients.resolve("alice", "etl").limit == 100
    assert rates.clients.resolve("alice", "other").limit == 1
    assert rates.clients.resolve("bob", "etl").unlimited
    assert all(rates.record_client("alice", "etl") is FORWARD for _ in range(500))


def test_a_group_quota_counts_every_members_requests_whoever_sends_them():
    rates = quotas(groups={"storm": 1, DEFAULT: 50})
    assert all(rates.record_group("storm") is FORWARD for _ in range(10))
    assert throttle_ms(rates.record_group("storm")) == 1000  # 11 in 10 s at 1/s
    assert rates.record_group("calm") is FORWARD  # <default>: each group on its own, with its own 50/s
    assert rates.group_label("storm") == "storm" and rates.group_label("made-up") == DEFAULT
    assert rates.groups.resolve("", "storm").entity == GroupEntity.of("storm")


def test_a_group_no_quota_covers_leaves_nothing_behind():
    rates = quotas(groups={"storm": 1})
    assert all(rates.record_group(f"made-up-{i}") is FORWARD for i in range(1000))
    assert len(rates.groups) == 0 and rates.group_label("made-up-1") is None


def test_group_names_made_up_under_default_are_bounded_and_gain_no_fresh_burst():
    """A tenant naming a new group for every JoinGroup: the sensors stay within quota.max.tracked.entities, and
    once the table is full a new group starts without the burst a group seen first would have."""
    rates = quotas(groups={DEFAULT: 1}, cap=100)
    first = [throttle_ms(rates.record_group(f"g{i}")) for i in range(100)]
    assert first == [0] * 100  # each one's first request is within its own quota
    later = [throttle_ms(rates.record_group(f"h{i}")) for i in range(1000)]
    assert len(rates.groups) <= 100 and rates.groups.overflowed > 0
    assert all(t > 0 for t in later[-100:])


def test_a_shadow_entry_decides_and_marks_the_decision_shadow():
    table = QuotaTable.from_values([({"client-id": "c"}, {REQUEST_RATE: 1}, True)])
    rates = RequestRateQuotas(table, group_table({}), frozenset(), ManualClock(0), WINDOW, 5000, 1000)
    for _ in range(11):
        decision = rates.record_client("ANONYMOUS", "c")
    assert isinstance(decision, Throttle) and decision.shadow


def test_counts_only_the_listed_apis_and_only_when_a_quota_is_set():
    assert quotas().counted == frozenset()
    rates = quotas(groups={"g": 1})
    assert rates.counted == {JOIN_GROUP}
    rates.reconfigure(group_table({}), frozenset({JOIN_GROUP}))
    assert rates.counted == frozenset()
    rates.update_clients(QuotaTable.from_values([({"user": "u"}, {REQUEST_RATE: 1})]))
    assert rates.counted == {JOIN_GROUP}  # a client entry set by the dynamic config counts them again


@pytest.mark.parametrize("bad", [{"g": 0}, {"g": float("inf")}])
def test_a_bad_group_table_is_refused(bad):
    with pytest.raises(ValueError, match="rate > 0"):
        group_table(bad)
