"""The producer-id quota's ``hold`` enforcement (issue 23 item 3), with a fake clock: a new producer id the bucket
has no token for is held (until its token is there) or refused (past the hold bound), never let through early;
known ids and other users are never held."""

from __future__ import annotations

import pytest

from config.errors import ConfigError
from config.settings import parse_settings
from quota.managers.producer_ids import HOLD, THROTTLE, Hold, ProducerIdQuotaManager, Refuse
from quota.primitives.decision import FORWARD, Throttle
from quota.primitives.quota_table import QuotaTable
from tests.quota.producer_id_managers import WINDOW_S, manager


def test_past_the_burst_each_new_id_is_held_until_its_token_is_there_first_come_first_served():
    m = manager(rate=2, num=2)  # burst 4, a token every 5 s
    assert [m.record_and_decide("alice", pid, 0) for pid in range(4)] == [FORWARD] * 4
    assert m.record_and_decide("alice", 10, 0) == Hold(5_000)
    assert m.record_and_decide("alice", 11, 1_000) == Hold(10_000)  # behind the first: its own token
    (stats,) = m.stats(1_000)
    assert stats.new_pids_total == 6 and stats.held_count == 2 and stats.hold_time_ms_total == 5_000 + 9_000
    assert stats.throttled_count == 0


def test_known_ids_and_other_users_are_never_held():
    table = QuotaTable.from_values(
        [({"user": "alice"}, {"producer_ids_rate": 1}), ({"user": "bob"}, {"producer_ids_rate": 100})]
    )
    m = ProducerIdQuotaManager(table, window_num=1, window_size_s=WINDOW_S, expected_pids=100, enforcement=HOLD)
    assert m.record_and_decide("alice", 1, 0) is FORWARD
    assert isinstance(m.record_and_decide("alice", 2, 0), Hold)  # alice's bucket is below zero now
    assert m.record_and_decide("alice", 1, 1) is FORWARD  # known: never held, whatever the bucket
    assert [m.record_and_decide("bob", pid, 1) for pid in range(100, 150)] == [FORWARD] * 50
    assert m.record_and_decide("carol", 7, 1) is FORWARD  # no quota for carol


def test_a_held_id_is_counted_once_and_held_until_the_same_time_on_every_connection():
    m = manager(rate=2, num=1)  # burst 2
    m.record_and_decide("alice", 1, 0)
    m.record_and_decide("alice", 2, 0)
    assert m.record_and_decide("alice", 3, 0) == Hold(5_000)
    tokens = m.stats(0)[0].tokens
    # the same producer's Produce to another broker (another connection) while the first is held
    assert m.record_and_decide("alice", 3, 2_000) == Hold(5_000)
    assert m.stats(2_000)[0].new_pids_total == 3 and m.stats(0)[0].tokens == tokens
    assert m.record_and_decide("alice", 3, 5_000) is FORWARD  # its time has come: known, through
    assert m.stats(5_000)[0].new_pids_total == 3 and m.stats(5_000)[0].held_count == 1


def test_past_the_hold_bound_the_id_is_refused_not_counted_and_its_retry_judged_again():
    m = manager(rate=2, num=1, max_hold_ms=10_000, max_mute_ms=25_000)  # burst 2, a token every 5 s
    m.record_and_decide("alice", 1, 0)
    m.record_and_decide("alice", 2, 0)
    assert m.record_and_decide("alice", 3, 0) == Hold(5_000)
    assert m.record_and_decide("alice", 4, 0) == Hold(10_000)  # exactly the bound: held
    # 15 s away: refused; a retry in 5 s would be held 10 s; muted 5 s (mute + hold within quota.mute.max.ms)
    assert m.record_and_decide("alice", 5, 0) == Refuse(Throttle(5_000, 5_000))
    before = m.stats(0)[0]
    assert before.new_pids_total == 4 and before.refused_count == 1 and before.throttled_count == 1
    assert m.record_and_decide("alice", 5, 100) == Refuse(Throttle(4_900, 4_900))  # not known: judged again
    assert m.stats(100)[0].new_pids_total == 4  # refusals take no token
    assert m.record_and_decide("alice", 5, 5_000) == Hold(15_000)  # the retry after the reported time: held
    assert m.record_and_decide("alice", 5, 15_000) is FORWARD
    assert m.stats(15_000)[0].new_pids_total == 5


def test_the_refusals_mute_leaves_room_for_the_retrys_hold_within_quota_mute_max():
    m = manager(rate=1, num=1, max_hold_ms=10_000, max_mute_ms=12_000)  # a token every 10 s
    m.record_and_decide("alice", 1, 0)
    m.record_and_decide("alice", 2, 0)  # held 10 s
    refusal = m.record_and_decide("alice", 3, 0)  # 20 s away
    assert refusal == Refuse(Throttle(10_000, 2_000))  # reported: retry in 10 s; muted: 12 - 10 s
    never = manager(rate=0)
    assert never.record_and_decide("alice", 1, 0) == Refuse(Throttle(25_000, 15_000))  # a zero quota: never through


def test_a_zero_hold_bound_refuses_instead_of_holding():
    m = manager(rate=2, num=1, max_hold_ms=0)
    m.record_and_decide("alice", 1, 0)
    m.record_and_decide("alice", 2, 0)
    assert m.record_and_decide("alice", 3, 0) == Refuse(Throttle(5_000, 5_000))


def test_a_restart_loop_gets_new_ids_through_at_the_rate_plus_the_burst():
    """Issue 23's restart loop, simulated: a new producer (new id) every 50 ms of its own time, each waiting for
    its message (held, or refused and retried 100 ms later); the times ids are let through, per window."""
    rate, num = 2, 2
    m = manager(rate=rate, num=num)
    through: list[int] = []
    now, pid = 0, 0
    while now < 120_000:
        pid += 1
        while True:
            decision = m.record_and_decide("alice", pid, now)
            if isinstance(decision, Refuse):
                now += max(100, decision.throttle.mute_ms)
                continue
            now = decision.until_ms if isinstance(decision, Hold) else now
            through.append(now)
            break
        now += 50
    for start in range(0, 120_000, 1_000):
        in_window = sum(start <= t < start + WINDOW_S * 1000 for t in through)
        assert in_window <= rate * 1.1 + rate * num, (start, in_window)
    assert len(through) >= 120 // WINDOW_S * rate  # and the loop still makes progress at the rate


def test_shadow_and_throttle_enforcement_hold_nothing():
    shadow = manager(rate=1, num=1, shadow=True)
    shadow.record_and_decide("alice", 1, 0)
    assert shadow.record_and_decide("alice", 2, 0) == Throttle(10_000, 10_000, True)
    kip = manager(rate=1, num=1, enforcement=THROTTLE)
    kip.record_and_decide("alice", 1, 0)
    assert kip.record_and_decide("alice", 2, 0) == Throttle(10_000, 10_000)
    assert kip.record_and_decide("alice", 3, 0) == Throttle(20_000, 20_000)  # never refused: the KIP's way


def test_the_settings_default_to_hold_for_at_most_ten_seconds_and_are_checked():
    values = parse_settings(None, "settings").values
    assert values["producer.id.quota.enforcement"] == "hold" and values["producer.id.quota.max.hold.ms"] == 10_000
    assert (
        parse_settings({"producer.id.quota.enforcement": "throttle"}, "settings").values[
            "producer.id.quota.enforcement"
        ]
        == "throttle"
    )
    with pytest.raises(ConfigError, match="settings.producer.id.quota.enforcement"):
        parse_settings({"producer.id.quota.enforcement": "delay"}, "settings")
    with pytest.raises(ConfigError, match="at most quota.mute.max.ms"):
        parse_settings({"producer.id.quota.max.hold.ms": 20_000, "quota.mute.max.ms": 15_000}, "settings")
    lower = parse_settings({"quota.mute.max.ms": 3_000}, "settings").values  # the default fits a lower mute cap
    assert lower["producer.id.quota.max.hold.ms"] == 3_000
    quick = parse_settings({"upstream.response.timeout.ms": 1_000}, "settings").values  # and a short upstream timeout
    assert quick["producer.id.quota.max.hold.ms"] == 500
    with pytest.raises(ConfigError, match="below upstream.response.timeout.ms"):
        parse_settings({"producer.id.quota.max.hold.ms": 5_000, "upstream.response.timeout.ms": 5_000}, "settings")


def test_a_hold_longer_than_half_a_window_does_not_make_the_id_count_twice():
    """Held 10 s in a 10 s window: the filter the id was written into when held is disposed when it is let
    through; it is known from its release on all the same (it reached the broker then)."""
    m = manager(rate=2, num=1)
    m.record_and_decide("alice", 1, 0)
    m.record_and_decide("alice", 2, 0)
    m.record_and_decide("alice", 3, 0)  # held until 5 s
    assert m.record_and_decide("alice", 4, 5_000) == Hold(10_000)
    assert m.record_and_decide("alice", 5, 5_000) == Hold(15_000)  # written into the filter created at 5 s
    assert m.cleanup(15_000) == 0  # the filter of 5 s is one window old: disposed; 5 goes through now
    assert m.record_and_decide("alice", 5, 20_000) is FORWARD  # the producer's next Produce: known
    assert m.stats(20_000)[0].new_pids_total == 5


def test_a_hold_abandoned_by_its_client_gives_its_token_back_and_the_id_is_not_known():
    """A restart loop that closes its producer while its id is held: the id never reached the broker, so the hold
    is released as if never made: the token is back (the next new id is held no longer than the abandoned one
    would have been) and the id, sent again later, is judged as new. Before, the token stayed taken and the id
    stayed known."""
    m = manager(rate=2, num=1)  # burst 2, a token every 5 s
    m.record_and_decide("alice", 1, 0)
    m.record_and_decide("alice", 2, 0)
    hold = m.record_and_decide("alice", 3, 0)
    assert hold == Hold(5_000) and m.stats(0)[0].tokens == -1
    m.abandon(hold, 3, 1_000)
    (stats,) = m.stats(1_000)
    assert stats.tokens == pytest.approx(0.2) and stats.abandoned_count == 1  # -1 + 0.2 refilled + 1 back
    assert m.record_and_decide("alice", 4, 1_000) == Hold(5_000)  # where 3 would have gone through, not 10 s
    assert m.record_and_decide("alice", 3, 6_000) == Hold(10_000)  # new again: counted, and held for a token
    assert m.stats(6_000)[0].new_pids_total == 5  # 3 counted twice: once per time it was held


def test_a_hold_still_awaited_on_another_connection_or_already_ended_is_not_released():
    m = manager(rate=2, num=1)
    m.record_and_decide("alice", 1, 0)
    m.record_and_decide("alice", 2, 0)
    first = m.record_and_decide("alice", 3, 0)
    second = m.record_and_decide("alice", 3, 1_000)  # the same producer on another connection
    m.abandon(first, 3, 2_000)
    assert m.stats(2_000)[0].abandoned_count == 0  # the other request still waits for it
    third = m.record_and_decide("alice", 3, 2_500)
    assert third == Hold(5_000)
    m.abandon(second, 3, 3_000)  # the third request's connection is still open: still held
    assert m.stats(3_000)[0].abandoned_count == 0
    assert m.record_and_decide("alice", 3, 5_000) is FORWARD  # its time came: known, through
    m.abandon(third, 3, 5_000)  # too late: the id was let through, nothing is undone
    (stats,) = m.stats(5_000)
    assert stats.abandoned_count == 0 and stats.tokens == pytest.approx(0)
    assert m.record_and_decide("alice", 3, 5_001) is FORWARD


def test_a_user_with_a_hold_is_not_dropped_by_cleanup():
    m = manager(rate=2, num=1)
    for pid in (1, 2):
        m.record_and_decide("alice", pid, 0)
    hold = m.record_and_decide("alice", 3, 0)
    assert m.cleanup(1) == 0 and len(m) == 1
    m.abandon(hold, 3, 2)
    assert m.stats(2)[0].abandoned_count == 1


def test_with_no_room_to_hold_a_would_be_hold_is_refused_for_its_wait_and_nothing_is_counted():
    """Issue 35: the held-byte bounds are full (``may_hold`` False): a new id that would be held is refused, reporting
    when its hold would have ended, and neither counted nor charged; a known or held id asks no room."""
    m = manager(rate=2, num=1)
    for pid in (1, 2):
        assert m.record_and_decide("alice", pid, 0, may_hold=False) == FORWARD  # the burst: no hold, no room needed
    refused = m.record_and_decide("alice", 3, 0, may_hold=False)
    assert isinstance(refused, Refuse) and refused.no_room
    assert refused.throttle.throttle_time_ms == WINDOW_S * 1000 // 2  # a token every W/2
    (stats,) = m.stats(0)
    assert stats.new_pids_total == 2 and stats.tokens == 0 and stats.refused_count == 1
    assert isinstance(m.record_and_decide("alice", 3, 0), Hold)  # room again: held as ever
    again = m.record_and_decide("alice", 3, 0, may_hold=False)  # the same id from another connection, no room there
    assert isinstance(again, Refuse) and again.no_room and m.stats(0)[0].new_pids_total == 3
