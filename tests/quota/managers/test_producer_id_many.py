"""A Produce whose batches carry several producer ids (issue 35: a crafted request; a real producer has one): every
new one is counted and held as one would be, all or nothing, with a fake clock."""

from __future__ import annotations

from quota.managers.producer_ids import THROTTLE, Hold, Refuse
from quota.primitives.decision import FORWARD, Throttle
from tests.quota.producer_id_managers import manager


def test_every_new_id_of_a_request_takes_a_token_and_the_request_waits_for_the_last():
    m = manager(rate=2, num=1)  # burst 2, a token every 5 s
    assert m.record_and_decide_all("alice", (1, 2), 0) is FORWARD  # the burst, both counted
    assert m.record_and_decide_all("alice", (1, 3, 4), 0) == Hold(10_000)  # 1 known; 3 and 4 wait 5 s and 10 s
    (stats,) = m.stats(0)
    assert stats.new_pids_total == 4 and stats.tokens == -2 and stats.held_count == 1
    assert m.record_and_decide("alice", 3, 1_000) == Hold(10_000)  # 3 is held with the request: not counted again
    assert m.record_and_decide_all("alice", (1, 2, 3, 4), 9_000) == Hold(10_000)  # the held ones' time, no new id
    assert m.record_and_decide_all("alice", (3, 4), 10_000) is FORWARD  # known once the hold ends
    assert m.stats(10_000)[0].new_pids_total == 4


def test_a_request_past_the_hold_bound_is_refused_with_none_of_its_ids_counted():
    m = manager(rate=2, num=1, max_hold_ms=10_000)
    many = tuple(range(100, 500))  # 400 new ids in one request (issue 35's probe)
    refusal = m.record_and_decide_all("alice", many, 0)
    assert isinstance(refusal, Refuse) and refusal.throttle == Throttle(5_000, 5_000)  # as the first id past 4
    (stats,) = m.stats(0)
    assert stats.new_pids_total == 0 and stats.tokens == 2 and stats.refused_count == 1
    assert m.record_and_decide("alice", 100, 0) is FORWARD  # none of them known: each is judged as new again


def test_abandoning_a_held_request_releases_every_id_it_brought_and_only_those():
    m = manager(rate=2, num=1)
    m.record_and_decide_all("alice", (1, 2), 0)
    other = m.record_and_decide("alice", 3, 0)  # held 5 s on another connection
    hold = m.record_and_decide_all("alice", (3, 4), 0)
    assert other == Hold(5_000) and hold == Hold(10_000)
    m.abandon_all(hold, (3, 4), 1_000)
    (stats,) = m.stats(1_000)
    assert stats.abandoned_count == 1 and stats.tokens == -0.8  # 4's token back; 3 still waited for
    assert m.record_and_decide("alice", 3, 5_000) is FORWARD  # through at its time
    assert isinstance(m.record_and_decide("alice", 4, 5_000), Hold)  # 4 never reached the broker: new again


def test_throttle_enforcement_counts_every_new_id_and_throttles_once():
    m = manager(rate=1, num=1, enforcement=THROTTLE)  # burst 1, a token every 10 s
    assert m.record_and_decide_all("alice", (1, 2, 3), 0) == Throttle(20_000, 20_000)
    (stats,) = m.stats(0)
    assert stats.new_pids_total == 3 and stats.throttled_count == 1
