"""Which brokers may receive no new replica at PAUSE, and which reassignment targets add one there
(quota.managers.reassignment). Pure: snapshots summarized, a fixed time."""

from __future__ import annotations

from quota.managers.reassignment import EVERY_BROKER, NO_BROKER, FullBrokers, full_brokers, refused_targets
from quota.managers.volume import OPEN, PAUSE, Limit, Snapshot, Volume, evaluate, summarize

GB = 1 << 30
NOW = 1_000_000_000
FRESH = 60_000


def usage(broker: int, *consumed: int, at: int = NOW):
    volumes = tuple(Volume(f"/data/{i}", 100 * GB, c * GB) for i, c in enumerate(consumed))
    return summarize(Snapshot(broker, at, Limit("ConsumedSpace", 80 * GB), Limit("ConsumedSpace", 95 * GB), volumes), 5)


def full_of(usages, live, action=OPEN):
    state = evaluate({u.broker_id: u for u in usages}, live, NOW, FRESH, action)
    return full_brokers(state, {u.broker_id: u for u in usages}, action)


def test_a_broker_is_full_when_any_of_its_volumes_is_at_its_hard_limit():
    """A JBOD broker with one full log dir of two counts: the broker picks the dir a new replica lands in. A volume
    past its soft limit only throttles."""
    full = full_of([usage(1, 10), usage(2, 10, 96), usage(3, 90)], {1, 2, 3})
    assert full == FullBrokers(frozenset({2}))


def test_a_live_broker_without_fresh_data_counts_as_full_only_when_missing_data_pauses():
    stale = usage(2, 99, at=NOW - FRESH - 1)  # a full disk reported long ago proves nothing now
    assert full_of([usage(1, 10), stale], {1, 2, 3}, PAUSE) == FullBrokers(frozenset({2, 3}))
    assert full_of([usage(1, 10), stale], {1, 2, 3}, OPEN) == NO_BROKER


def test_with_nothing_heard_every_broker_is_full_under_the_fail_safe():
    assert full_of([], None, PAUSE) == EVERY_BROKER
    assert 7 in EVERY_BROKER
    assert full_of([], None, OPEN) == NO_BROKER


FULL = FullBrokers(frozenset({3}))


def test_a_target_adding_a_replica_on_a_full_broker_is_refused():
    assert refused_targets([1, 2], [1, 3], FULL) == [3]
    assert refused_targets([1, 2], [3, 3, 1], FULL) == [3]  # a broker named twice is named once
    assert refused_targets([1, 2], [4, 5, 3], FullBrokers(frozenset({3, 5}))) == [5, 3]  # in the target's order


def test_moves_off_a_full_broker_reorderings_and_cancellations_go_on():
    assert refused_targets([3, 1], [1, 2], FULL) == []  # off the full broker
    assert refused_targets([1, 3, 2], [3, 2, 1], FULL) == []  # a new preferred leader, the same replicas
    assert refused_targets([1, 2, 3, 4], [3, 4], FULL) == []  # a pending reassignment's adding replicas kept
    assert refused_targets([1, 2], None, FULL) == []  # cancelled
    assert refused_targets([1, 2], [2, 4], FULL) == []  # onto a broker with room


def test_a_partition_whose_replicas_are_unknown_is_refused_any_full_broker():
    assert refused_targets(None, [1, 3], FULL) == [3]
    assert refused_targets(None, [1, 2], FULL) == []
