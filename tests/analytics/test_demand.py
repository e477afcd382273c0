"""The demand a throttle hid, and the replay, as plain Python: the estimator on synthetic tenants whose true demand
is known (analytics.generate's THROTTLED, throttled by the proxy's own quota), the recommendation that rests on it,
and the replay's client through the quota/ core. No Spark: tests/analytics/test_job.py runs the same in the job."""

import pytest

from analytics import demand, recommend, replay
from analytics.generate import THROTTLED, Options, generate_records
from quota.primitives.rate import QuotaWindow


def tenant_rows(seed: int, intervals: int = 360) -> dict:
    """The THROTTLED tenants' records of a generated log, by (user, client_id)."""
    out: dict = {}
    for batch in generate_records(Options(entities=2, intervals=intervals, seed=seed, misbehaving=False)):
        for r in batch:
            if (r["user"], r["client_id"]) in THROTTLED:
                out.setdefault((r["user"], r["client_id"]), []).append(r)
    return out


def p99(values: list[float]) -> float:
    """Linear interpolation between closest ranks, as Spark SQL's percentile."""
    ordered, rank = sorted(values), 0.99 * (len(values) - 1)
    low = int(rank)
    return ordered[low] + (ordered[min(low + 1, len(ordered) - 1)] - ordered[low]) * (rank - low)


def stats_row(records: list[dict], quota: float) -> dict:
    """What entity_stats says of a Produce tenant, computed in plain Python (one record per interval, k = 1)."""
    rates = [r["request_bytes"] / r["interval_s"] for r in records]
    held = [min(r["held_ms"], r["interval_s"] * 1000) for r in records]
    return {
        "user": records[0]["user"],
        "client_id": records[0]["client_id"],
        "api": "Produce",
        "intervals": len(records),
        "request_rate_p99": p99(rates),
        "held_intervals": sum(h > 0 for h in held),
        "quota_rate": quota,
        "held_share": sum(held) / sum(r["interval_s"] * 1000 for r in records),
        "request_demand": demand.demand_rate(
            ((r["interval_s"], r["request_bytes"], r["requests"], r["throttles"], r["held_ms"]) for r in records), quota
        ),
    }


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_estimate_is_within_10_percent_and_the_advice_at_most_1_5x_the_true_demand(seed):
    """A tenant 3x over its quota all the time (held ~98 % of it) and one 2x over for a minute in five: their rates
    are what the quota let through (and the per-interval p99 is a catch-up burst); the estimate recovers the demand
    the throttle hid, and the recommendation, marked constrained, is never above 1.5 x the true demand."""
    for name, records in tenant_rows(seed).items():
        quota, _, true_demand, _, _ = THROTTLED[name]
        row = stats_row(records, quota)
        assert row["request_demand"] == pytest.approx(true_demand, rel=0.10), name
        value, basis = recommend.byte_rate_basis(row, "request", recommend.Rules())
        assert basis.startswith("constrained by the current quota") and "estimated demand" in basis, basis
        assert true_demand < value <= 1.5 * true_demand, (name, value)


def test_a_tenant_held_through_every_interval_has_no_estimate_and_no_burst_advice():
    """Held through each interval (free less than a tenth of it): its demand is not measurable, and the advice is
    the quota in force with headroom, said as such, not its catch-up bursts."""
    intervals = [(10.0, 6_000_000, 5, 1, 9_500.0), (10.0, 0, 0, 0, 10_000.0)] * 30
    assert demand.demand_rate(intervals, 1_000_000) is None
    row = {
        "intervals": 60,
        "request_rate_p99": 600_000.0,
        "held_intervals": 60,
        "quota_rate": 1_048_576.0,
        "held_share": 0.97,
        "request_demand": None,
    }
    value, basis = recommend.byte_rate_basis(row, "request", recommend.Rules())
    assert value == 1_600_000 and "demand not measurable" in basis


def test_interval_demand_is_the_pace_of_the_requests_not_throttled_over_the_time_free():
    # 10 requests of 100 kB, 4 throttled, held 4 s of 10: 600 kB in 6 s free
    assert demand.interval_demand(10.0, 1_000_000, 10, 4, 4_000) == pytest.approx(100_000)
    assert demand.interval_demand(10.0, 1_000_000, 10, 0, 0) is None  # not held: its rate is its demand
    assert demand.interval_demand(10.0, 1_000_000, 10, 10, 4_000) is None  # every request throttled
    assert demand.interval_demand(10.0, 1_000_000, 10, 4, 9_500) is None  # held through it


def test_the_replay_client_is_held_to_the_quota_by_the_proxys_own_algorithm():
    """3 MB/s of demand under a 1 MB/s quota: over an hour it gets its quota (Kafka's sampled window lets the first
    window's allowance through) and is held most of the time; unlimited, it sends all of it and is never held."""
    wanted = [(10.0 * (k + 1), 10.0, 3_000_000.0) for k in range(360)]
    held = demand.replay(wanted, 1_000_000, QuotaWindow(11, 1), step_s=0.1)
    sent = sum(o.sent for o in held)
    assert 1_000_000 * 3600 <= sent <= 1_000_000 * 3600 + 3_000_000 * 11
    assert demand.summary(held)["held_s"] > 0.6 * 3600 and demand.summary(held)["throttles"] > 360
    free = demand.replay(wanted, None)
    assert sum(o.sent for o in free) == 3_000_000 * 3600 and demand.summary(free)["held_s"] == 0


def test_a_replay_task_shows_today_held_and_a_candidate_that_covers_the_demand_not():
    """One Spark task's work on plain rows: the steady tenant held under today's 1 MB/s, not under a candidate
    giving it 4.4 MB/s (its demand is 3 MB/s); a tenant the candidate does not name is unlimited there."""
    (records,) = [r for name, r in tenant_rows(1, intervals=60).items() if name == ("steady", "over-quota")]
    series = [
        {
            "time": r["time"],
            "interval_s": r["interval_s"],
            "bytes": r["request_bytes"],
            "requests": r["requests"],
            "held_requests": r["throttles"],
            "held_ms": r["held_ms"],
        }
        for r in records
    ]
    rows = [
        {"user": "steady", "client_id": "over-quota", "api": "Produce", "quota_rate": 1_000_000.0, "series": series},
        {"user": "other", "client_id": "x", "api": "Produce", "quota_rate": 1_000_000.0, "series": series},
    ]
    candidate = [
        {"entity": {"user": "steady", "client-id": "over-quota"}, "producer_byte_rate": 4_400_000},
        {"entity": {"ip": "192.0.2.1"}, "connection_creation_rate": 5.0},
    ]
    out = {r[0]: dict(zip(replay.RESULT, r)) for r in replay.replay_tenants(rows, candidate, 11, 1, 1.0)}
    steady = out["steady"]
    assert steady["quota_today"] == 1_000_000 and steady["quota_candidate"] == 4_400_000
    assert steady["today_held_s"] > 0.5 * 600 and steady["today_held_intervals"] >= 50
    assert steady["candidate_held_s"] == 0 and steady["candidate_throttles"] == 0
    assert out["other"]["quota_candidate"] is None and out["other"]["candidate_held_s"] == 0


@pytest.mark.parametrize(
    "text, reason",
    [
        (None, "cannot read it"),
        ("quotas: [", "not YAML"),
        ("upstream: {}\n", "no 'quotas:' list"),
        ("quotas:\n- entity: {user: a}\n  producer_byte_rate: -5\n", "producer_byte_rate"),
    ],
)
def test_a_replay_table_that_cannot_be_used_is_refused_naming_the_file_and_why(tmp_path, text, reason):
    path = tmp_path / "candidate.yaml"
    if text is not None:
        path.write_text(text)
    with pytest.raises(replay.ReplayError) as err:
        replay.load_table(str(path))
    assert str(err.value).startswith(f"--replay {path}: ") and reason in str(err.value)


def test_an_unpaced_client_is_advised_a_step_not_its_catch_up_pace():
    """The demo's unpaced demo-limited producer: held 94 % by 1 MiB/s, and free it sends its backlog at 15 MB/s.
    The advice is capped at --max-raise (4) x the quota in force and says why, not 24 MB/s."""
    row = {
        "intervals": 32,
        "request_rate_p99": 1_300_000.0,
        "held_intervals": 31,
        "quota_rate": 1_048_576.0,
        "held_share": 0.94,
        "request_demand": 15_361_218.0,
    }
    value, basis = recommend.byte_rate_basis(row, "request", recommend.Rules())
    assert value == 4_200_000 and "capped at 4 x the current quota" in basis and "15,361,218" in basis
    assert recommend.byte_rate_basis(row, "request", recommend.Rules(max_raise=100))[0] == 24_000_000
    with pytest.raises(ValueError, match="max-raise"):
        recommend.Rules(max_raise=0.5)


def test_a_queueing_client_sends_what_a_hold_kept_back_and_is_held_until_it_has():
    """bench/planner_apply.py's hog: 3 MB/s under 1.6 MB/s. Once held it has a queue for the rest of the minute and is
    held almost all of it, as the proxy held the real librdkafka producer (47.6-52.7 s of 60); a client that queues
    nothing is free between its holds (the replay before this: 36-42 s). With librdkafka's bound (100,000 messages of
    1 kB) nothing is refused: what was handed is sent or still queued at the end."""
    wanted = [(2.0 * (k + 1), 2.0, 3_000_000.0) for k in range(30)]
    librdkafka = demand.Client(step_s=0.1, buffer_bytes=100_000_000)
    queueing = demand.replay(wanted, 1_600_000, QuotaWindow(11, 1), client=librdkafka)
    dropping = demand.replay(
        wanted, 1_600_000, QuotaWindow(11, 1), client=demand.Client(step_s=0.1, buffer_bytes=0, gap_ms=0)
    )
    assert demand.summary(queueing)["held_s"] >= 50 > 45 > demand.summary(dropping)["held_s"]
    sent = sum(o.sent for o in queueing)
    assert 1_600_000 * 60 <= sent <= 1_600_000 * 71  # the quota, and the window's first allowance at most
    assert sum(o.refused for o in queueing) == 0
    assert 0 < 3_000_000 * 60 - sent <= librdkafka.buffer_bytes  # the rest still queued
    assert sum(o.refused for o in dropping) > 0  # what it was handed while held


def test_past_its_buffer_a_client_refuses_what_it_is_handed():
    """10 MB/s under 1 MB/s with a 4 MB buffer: the queue fills in under a second of holds, and from then on what
    the application hands it is refused (librdkafka's QUEUE_FULL); sent + refused + queued is what it was handed."""
    wanted = [(1.0 * (k + 1), 1.0, 10_000_000.0) for k in range(30)]
    client = demand.Client(step_s=0.1, buffer_bytes=4_000_000)
    out = demand.replay(wanted, 1_000_000, QuotaWindow(11, 1), client=client)
    sent, refused = sum(o.sent for o in out), sum(o.refused for o in out)
    assert refused > 10_000_000 * 30 * 0.5
    assert 0 <= 10_000_000 * 30 - sent - refused <= client.buffer_bytes + 1


def test_after_a_peak_the_queue_is_sent_before_the_tenant_goes_free():
    """4 MB/s for 30 s under 2 MB/s, then 0.5 MB/s: the queueing client is held after the peak while it sends what
    it queued (at most its buffer, sent at 1.5 MB/s net: about 20 s more); one that queues nothing goes free within a
    window of the peak's end."""
    wanted = [(1.0 * (k + 1), 1.0, 4_000_000.0 if k < 30 else 500_000.0) for k in range(90)]
    queueing = demand.replay(wanted, 2_000_000, QuotaWindow(11, 1), client=demand.Client(step_s=0.1))
    dropping = demand.replay(
        wanted, 2_000_000, QuotaWindow(11, 1), client=demand.Client(step_s=0.1, buffer_bytes=0, gap_ms=0)
    )
    last_held = [max(k for k, o in enumerate(out) if o.held_ms > 0) + 1 for out in (queueing, dropping)]
    assert last_held[0] >= 30 + 15 and last_held[1] <= 30 + 11
    assert sum(o.refused for o in queueing) > 0  # 60 MB over a 32 MiB buffer: the bound was reached


def test_an_interval_right_after_one_held_through_does_not_tell_the_demand():
    """The client comes out of a hold with its queue and sends it at once: 9 MB in the 3 s it was free is its catch-up
    pace, not its demand, so only the first interval (its own pace, 1 MB/s over the 5 s free) tells."""
    intervals = [(10.0, 5_000_000, 10, 0, 5_000), (10.0, 0, 0, 0, 10_000), (10.0, 9_000_000, 10, 0, 7_000)]
    assert demand.demand_rate(intervals, 500_000) == pytest.approx(1_000_000)
    assert demand.demand_rate(intervals[2:], 500_000) == pytest.approx(3_000_000)  # read alone, it would


def test_a_held_interval_is_replayed_at_most_at_the_tenants_estimate_in_requests_as_large_as_its_own():
    """An interval's own d is its catch-up pace where its client sent a queue (40 MB/s here): replayed as a queue it
    would hold the tenant for minutes, so it is capped at the tenant's estimate; a lower d (its own pace) is kept, an
    interval not held is what it sent. The replay's requests are the tenant's mean in its held intervals, at least a
    tenth of a second of its highest demand."""
    series = [
        {"time": 10.0, "interval_s": 10.0, "bytes": 5_000_000, "requests": 50, "held_requests": 0, "held_ms": 0},
        {"time": 20.0, "interval_s": 10.0, "bytes": 20_000_000, "requests": 20, "held_requests": 0, "held_ms": 9_500},
        {"time": 30.0, "interval_s": 10.0, "bytes": 12_000_000, "requests": 12, "held_requests": 8, "held_ms": 8_000},
        {"time": 40.0, "interval_s": 10.0, "bytes": 10_000_000, "requests": 10, "held_requests": 5, "held_ms": 9_000},
    ]
    rates = [rate for _, _, rate in replay.interval_demands(series, 3_000_000, 1_000_000)]
    assert rates == [500_000, 3_000_000, 2_000_000, 3_000_000]  # held through: the estimate; d 2 MB/s; d 5 MB/s
    assert replay.request_bytes(series) == 1_000_000
    series[1]["requests"] = 200
    assert replay.request_bytes(series) == pytest.approx(42_000_000 / 222)
    # at least a tenth of a second of its highest demand: a held tenant costs at most ten decisions a second of log
    series[1]["requests"] = 20_000
    assert replay.request_bytes(series, [(10.0, 10.0, 3_000_000.0)]) == 300_000


@pytest.mark.parametrize("wanted, quota", [(20.0, 5.0), (8.0, 5.0), (3.0, 1.0), (50.0, 10.0)])
def test_a_request_rate_hides_demand_the_requests_it_held_tell(wanted, quota):
    """A client sending `wanted` requests/s (Metadata, JoinGroup: nothing queued while held) under a request_rate of
    `quota`, through the proxy's own sampled-rate throttle: held ~90 % of the time, it is let through the quota.
    With the usage log's held_by (m, the requests held) the estimate is within 12 % of what it wanted; read as
    held by nothing (m = 0, the log before held_by), its catch-up makes it 1.4 to 2 x too high."""
    series = [(10.0 * (k + 1), 10.0, wanted) for k in range(60)]
    client = demand.Client(step_s=1 / wanted, buffer_bytes=0, request_bytes=1, gap_ms=0)
    out = demand.replay(series, quota, QuotaWindow(11, 1), client=client)
    assert sum(o.requests for o in out) / 600 == pytest.approx(quota, rel=0.01)
    told = [(10.0, o.sent, o.requests, o.throttles, o.held_ms) for o in out]
    assert demand.demand_rate(told, None) == pytest.approx(wanted, rel=0.12)
    unheld = [(t, sent, n, 0, held) for t, sent, n, _, held in told]
    assert demand.demand_rate(unheld, None) > 1.3 * wanted
