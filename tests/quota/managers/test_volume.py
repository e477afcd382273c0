"""Volume-usage policy with a fake clock: each limit type, the proportional factor, the worst volume, the hard
limit, stale and missing data with both fallbacks, and the snapshot format."""

from __future__ import annotations

import json

import pytest

from quota.managers.volume import (
    BAD,
    CLOCK_SKEW_MS,
    IGNORED,
    OPEN,
    PAUSE,
    TAKE,
    THROTTLE,
    Limit,
    Snapshot,
    SnapshotError,
    Volume,
    evaluate,
    judge,
    parse_snapshot,
    summarize,
)

GB = 1_000_000_000
NOW = 1_800_000_000_000


def snap(broker, *volumes, soft=Limit("MinFreePercentage", 20), hard=Limit("MinFreeBytes", GB), at=NOW):
    return Snapshot(broker, at, soft, hard, tuple(volumes))


def state(*snapshots, live=None, missing=PAUSE, now=NOW):
    return evaluate({s.broker_id: summarize(s, 10) for s in snapshots}, live, now, 60_000, missing)


@pytest.mark.parametrize(
    "soft,hard,consumed,factor",
    [
        (Limit("ConsumedSpace", 50 * GB), Limit("ConsumedSpace", 90 * GB), 70 * GB, 0.5),
        (Limit("MinFreeBytes", 40 * GB), Limit("MinFreeBytes", 10 * GB), 75 * GB, 0.5),  # free 25: halfway 40 -> 10
        (Limit("MinFreePercentage", 30), Limit("MinFreePercentage", 10), 80 * GB, 0.5),  # free 20 %: halfway
        (Limit("MinFreePercentage", 30), Limit("MinFreePercentage", 10), 60 * GB, 1.0),
    ],
)
def test_each_limit_type_gives_a_factor_proportional_between_soft_and_hard(soft, hard, consumed, factor):
    result = state(snap(1, Volume("/d", 100 * GB, consumed), soft=soft, hard=hard))
    assert result.factor == pytest.approx(factor)
    assert result.state == (THROTTLE if factor < 1 else OPEN)


def test_the_worst_volume_of_any_broker_wins_and_a_hard_breach_pauses():
    soft, hard = Limit("ConsumedSpace", 50 * GB), Limit("ConsumedSpace", 90 * GB)
    a = snap(1, Volume("/a", 100 * GB, 60 * GB), Volume("/b", 100 * GB, 10 * GB), soft=soft, hard=hard)
    b = snap(2, Volume("/c", 100 * GB, 80 * GB), soft=soft, hard=hard)
    assert state(a, b).factor == pytest.approx(0.25) and state(a, b).state == THROTTLE
    c = snap(3, Volume("/d", 100 * GB, 90 * GB), soft=soft, hard=hard)
    result = state(a, b, c)
    assert result.state == PAUSE and result.factor == 0
    assert [(r.name, r.breach) for r in result.nearest] == [
        ("/d", "hard"),
        ("/c", "soft"),
        ("/a", "soft"),
        ("/b", None),
    ]
    assert (result.volume_count, result.soft_breaches, result.hard_breaches) == (4, 3, 1)
    assert result.max_usage_ratio == pytest.approx(0.9)


def test_a_volume_may_override_the_snapshots_limits():
    volume = Volume("/a", 100 * GB, 60 * GB, hard_limit=Limit("ConsumedSpace", 55 * GB))
    assert (
        state(snap(1, volume, soft=Limit("ConsumedSpace", 50 * GB), hard=Limit("ConsumedSpace", 90 * GB))).state
        == PAUSE
    )


def test_stale_or_missing_snapshots_take_the_fallback():
    fresh = snap(1, Volume("/a", 100 * GB, 0))
    stale = snap(2, Volume("/b", 100 * GB, 0), at=NOW - 61_000)
    paused = state(fresh, stale)
    assert paused.state == PAUSE and paused.missing_data == (2,) and paused.snapshot_at_ms == {1: NOW, 2: NOW - 61_000}
    assert paused.volume_count == 1  # the stale snapshot's volumes count for nothing
    assert state(fresh, stale, missing=OPEN).state == OPEN
    assert state(fresh, live={1, 3}).missing_data == (3,) and state(fresh, live={1, 3}).state == PAUSE
    assert state(fresh, live={1, 3}, missing=OPEN).state == OPEN


def test_before_any_broker_list_or_snapshot_the_missing_data_action_applies():
    """Issue 23 item 6: at start-up nothing is known, so the state of the cluster's brokers cannot be determined:
    the seed's fail-safe (missing_data_action, PAUSE by default), not OPEN. The broker list, or a first snapshot,
    ends the wait; a live broker with no snapshot is then missing as any other."""
    waiting = state(live=None)
    assert (waiting.state, waiting.factor, waiting.awaiting_data, waiting.missing_data) == (PAUSE, 0.0, True, ())
    assert waiting.next_evaluation_ms is None  # only data ends it, not time
    opened = state(live=None, missing=OPEN)
    assert (opened.state, opened.factor, opened.awaiting_data) == (OPEN, 1.0, True)
    listed = state(live={1, 2})
    assert (listed.state, listed.awaiting_data, listed.missing_data) == (PAUSE, False, (1, 2))
    assert state(live={1, 2}, missing=OPEN).state == OPEN
    fresh = state(snap(1, Volume("/a", 100 * GB, 0)), live=None)
    assert (fresh.state, fresh.awaiting_data) == (OPEN, False)
    assert not state(snap(1, Volume("/a", 100 * GB, 0)), live={1}).awaiting_data


def test_snapshot_round_trip_and_errors_name_the_field():
    original = snap(7, Volume("/dev/sda1", 100 * GB, 42 * GB, soft_limit=Limit("MinFreeBytes", 5 * GB)))
    assert parse_snapshot(b"7", original.to_json()) == original
    assert parse_snapshot(b"7", None) is None  # tombstone
    value = json.loads(original.to_json())
    for broken, field in (
        (dict(value, SnapshotAt="yesterday"), "SnapshotAt"),
        (dict(value, HardLimit={"type": "Lots", "level": 1}), "HardLimit"),
        (dict(value, Volumes=[{"VolumeName": "x"}]), "Volumes[0]"),
    ):
        with pytest.raises(SnapshotError, match=field.replace("[", r"\[")):
            parse_snapshot(b"7", json.dumps(broken).encode())
    with pytest.raises(SnapshotError, match="record key"):
        parse_snapshot(b"broker-7", original.to_json())


def test_a_snapshot_dated_beyond_the_clock_skew_allowance_is_bad():
    disk = Volume("/a", 100 * GB, 10 * GB)
    assert judge(snap(1, disk, at=NOW + CLOCK_SKEW_MS), {}, {1}, NOW).action == TAKE
    verdict = judge(snap(1, disk, at=NOW + CLOCK_SKEW_MS + 1), {}, {1}, NOW)
    assert verdict.action == BAD and "future" in verdict.reason
    year_2099 = parse_snapshot(
        b"1", json.dumps(dict(json.loads(snap(1, disk).to_json()), SnapshotAt="2099-01-01T00:00:00+00:00")).encode()
    )
    assert judge(year_2099, {}, {1}, NOW).action == BAD


def test_a_snapshot_without_volumes_is_bad():
    verdict = judge(snap(1), {1: snap(1, Volume("/a", 100 * GB, 95 * GB))}, {1}, NOW)
    assert verdict.action == BAD and "Volumes" in verdict.reason


def test_a_broker_id_the_cluster_does_not_list_is_not_taken():
    disk = Volume("/a", 100 * GB, 95 * GB)
    verdict = judge(snap(9, disk), {}, {1, 2}, NOW)
    assert verdict.action == IGNORED and "9" in verdict.reason
    assert judge(snap(9, disk), {}, None, NOW).action == TAKE  # live brokers not known yet: nothing to check against
    crowd = {b: snap(b, disk) for b in range(1000)}
    assert judge(snap(5000, disk), crowd, None, NOW).action == IGNORED  # bounded until they are known


def test_a_tombstone_is_not_taken():
    assert judge(None, {1: snap(1, Volume("/a", 100 * GB, 95 * GB))}, {1}, NOW).action == IGNORED


def test_a_record_past_max_record_bytes_is_refused_before_it_is_decoded():
    from quota.managers.volume import TOO_LARGE, Bounds, RecordTooLarge

    bounds = Bounds(max_record_bytes=1024, max_volumes_per_snapshot=10)
    with pytest.raises(RecordTooLarge, match="max_record_bytes") as info:
        parse_snapshot(b"1", b"{" * 2000, bounds)  # not JSON either: the size is what is checked first
    assert info.value.reason == TOO_LARGE
    with pytest.raises(RecordTooLarge):
        parse_snapshot(b"1" * 1025, None, bounds)  # the key counts too
    small = snap(1, Volume("/a", 100 * GB, 10 * GB))
    assert parse_snapshot(b"1", small.to_json(), bounds) == small


def test_a_snapshot_with_too_many_volumes_is_refused_before_any_volume_is_read():
    from quota.managers.volume import TOO_MANY_VOLUMES, Bounds, TooManyVolumes

    value = json.loads(snap(1, Volume("/a", 100 * GB, 0)).to_json())
    value["Volumes"] = [{"broken": i} for i in range(11)]  # each would fail on its own; their number fails first
    with pytest.raises(TooManyVolumes, match=r"11 volumes, more than max_volumes_per_snapshot \(10\)") as info:
        parse_snapshot(b"1", json.dumps(value).encode(), Bounds(max_volumes_per_snapshot=10))
    assert info.value.reason == TOO_MANY_VOLUMES
    value["Volumes"] = [{"VolumeName": f"/v{i}", "Capacity": 100, "Consumed": i} for i in range(10)]
    assert len(parse_snapshot(b"1", json.dumps(value).encode(), Bounds(max_volumes_per_snapshot=10)).volumes) == 10


def test_a_summary_keeps_the_volumes_nearest_their_hard_limit_and_aggregates_the_rest():
    soft, hard = Limit("ConsumedSpace", 50 * GB), Limit("ConsumedSpace", 90 * GB)
    volumes = [Volume(f"/v{i}", 100 * GB, i * GB) for i in range(100)]  # /v99 fullest
    usage = summarize(snap(1, *volumes, soft=soft, hard=hard), 3)
    assert [r.name for r in usage.nearest] == ["/v99", "/v98", "/v97"]
    assert (usage.volume_count, usage.soft_breaches, usage.hard_breaches) == (100, 49, 10)
    assert usage.factor == 0 and usage.max_usage_ratio == pytest.approx(0.99)
    other = summarize(snap(2, Volume("/w", 100 * GB, 60 * GB), soft=soft, hard=hard), 3)
    result = evaluate({1: usage, 2: other}, None, NOW, 60_000, PAUSE, top=4)
    assert [r.name for r in result.nearest] == ["/v99", "/v98", "/v97", "/w"]
    assert result.volume_count == 101


def test_the_state_says_when_it_must_be_evaluated_again():
    a = summarize(snap(1, Volume("/a", 100 * GB, 0), at=NOW - 10_000), 10)
    b = summarize(snap(2, Volume("/b", 100 * GB, 0), at=NOW - 30_000), 10)
    result = evaluate({1: a, 2: b}, None, NOW, 60_000, PAUSE)
    assert result.next_evaluation_ms == NOW + 30_001  # broker 2's snapshot goes stale first
    later = evaluate({1: a, 2: b}, None, NOW + 30_001, 60_000, PAUSE)
    assert later.state == PAUSE and later.next_evaluation_ms == NOW + 50_001
    assert evaluate({1: a, 2: b}, None, NOW + 50_001, 60_000, PAUSE).next_evaluation_ms is None  # all stale
    assert evaluate({}, {1}, NOW, 60_000, PAUSE).next_evaluation_ms is None
