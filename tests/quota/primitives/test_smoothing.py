"""``quota.smoothing``: a client sending as fast as it is allowed, with a fake clock, per second against its quota.

The simulated client sends one request of ``batch`` bytes, is held for the throttle it gets (KIP-219 or a mute, the
same here), waits ``broker_ms`` for the answer and ``gap_ms`` more, and sends again. Kafka's algorithm (smoothing
off) runs it stop-and-go; with smoothing on, every second after the first window span is within 0.5-1.5 x.
"""

import math

import pytest

from quota import (
    CONSUMER_BYTE_RATE,
    DEFAULT,
    PRODUCER_BYTE_RATE,
    ClientQuotaManager,
    ManualClock,
    QuotaTable,
    QuotaWindow,
    Throttle,
)

WINDOW = QuotaWindow()  # Kafka's default: 11 x 1 s
SPAN_S = WINDOW.num * WINDOW.size_seconds


def manager(
    limit: float,
    clock: ManualClock,
    smoothing: bool,
    key: str = PRODUCER_BYTE_RATE,
    shadow: bool = False,
    max_throttle_ms: int = 25_000,
) -> ClientQuotaManager:
    table = QuotaTable.from_values([({"user": DEFAULT}, {key: limit})])
    return ClientQuotaManager(table, key, clock, WINDOW, max_throttle_ms, smoothing=smoothing, shadow=shadow)


def per_second(
    limit: int, batch: int, smoothing: bool, seconds: int = 71, gap_ms: int = 1, broker_ms: int = 0
) -> list[float]:
    """The client's bytes per second / quota, for each whole second of the run."""
    clock = ManualClock()
    m = manager(limit, clock, smoothing)
    sent = [0] * seconds
    while clock.now_ms() < seconds * 1000:
        sent[clock.now_ms() // 1000] += batch
        throttle = m.record_and_get_throttle_time_ms("alice", "etl", batch)
        clock.advance(broker_ms + max(throttle, gap_ms))
    return [s / limit for s in sent]


def in_band(ratios: list[float]) -> float:
    return sum(0.5 <= r <= 1.5 for r in ratios) / len(ratios)


@pytest.mark.parametrize(
    "limit, batch, broker_ms",
    [
        (262_144, 16_384, 2),  # kafka-python's default batch under 256 KiB/s
        (262_144, 65_536, 5),
        (1_048_576, 262_144, 3),
        (4_194_304, 1_000_000, 5),  # librdkafka's default 1 MB request, under a quota four times that
    ],
)
def test_smoothing_on_keeps_every_second_near_the_quota(limit, batch, broker_ms):
    ratios = per_second(limit, batch, smoothing=True, broker_ms=broker_ms)[SPAN_S:]
    assert in_band(ratios) >= 0.9, ratios
    assert 0.95 <= sum(ratios) / len(ratios) <= 1.05


@pytest.mark.parametrize("limit, batch, broker_ms", [(262_144, 16_384, 2), (4_194_304, 1_000_000, 5)])
def test_smoothing_off_is_kafkas_stop_and_go(limit, batch, broker_ms):
    """The same client under Kafka's sampled rate: most seconds far below the quota, a burst of several times it
    once per window span; the same long-run average."""
    ratios = per_second(limit, batch, smoothing=False, broker_ms=broker_ms)[SPAN_S:]
    assert in_band(ratios) < 0.5, ratios
    assert max(ratios) > 5 and min(ratios) < 0.2, ratios
    assert 0.9 <= sum(ratios) / len(ratios) <= 1.15


def test_granularity_is_one_request():
    """A 1 MB request under 256 KiB/s cannot be spread within a second: one request every ~3.8 s, as its size
    says; the long-run rate is still the quota."""
    ratios = per_second(262_144, 1_000_000, smoothing=True, seconds=311)[SPAN_S:]
    assert max(ratios) > 3 and in_band(ratios) < 0.5
    assert 0.95 <= sum(ratios) / len(ratios) <= 1.05


def test_throttle_is_the_buckets_debt_over_the_rate():
    clock = ManualClock()
    m = manager(1000, clock, smoothing=True)  # R = 1000 B/s, B = 1000 B (one 1 s sample)
    assert m.record_and_decide("a", "c", 1000) == m.record_and_decide("a", "c", 0)  # the burst: no throttle yet
    assert m.record_and_decide("a", "c", 500) == Throttle(500, 500)  # 500 B in debt: 0.5 s
    clock.advance(200)
    assert m.record_and_decide("a", "c", 100) == Throttle(400, 400)  # 200 ms refilled 200 B, 100 taken
    stats = m.stats_for("a", "c")
    assert stats.throttled_count == 2 and stats.throttle_time_ms_total == 900
    assert stats.value_total == 1600 and stats.rate > 0  # the sampled rate is still recorded, for metrics


def test_debt_past_the_mute_cap_is_paid_by_the_next_requests():
    clock = ManualClock()
    m = manager(1000, clock, smoothing=True, max_throttle_ms=2000)
    assert m.record_and_get_throttle_time_ms("a", "c", 6000) == 2000  # 5 s of debt, capped at 2 s
    clock.advance(2000)
    assert m.record_and_get_throttle_time_ms("a", "c", 0) == 2000  # 3 s left
    clock.advance(3000)
    assert m.record_and_get_throttle_time_ms("a", "c", 0) == 0


def test_headroom_is_the_buckets_tokens():
    """What a Fetch may get now (max_bytes and the trimming budget): a full bucket for a new entity, then what is
    left, never below 0; never above Kafka's max_value_in_quota_window."""
    clock = ManualClock()
    m = manager(1000, clock, smoothing=True, key=CONSUMER_BYTE_RATE)
    assert m.remaining_in_quota_window("a", "c") == 1000
    m.record_no_throttle("a", "c", 700)
    assert m.remaining_in_quota_window("a", "c") == 300
    m.record_and_decide("a", "c", 800)
    assert m.remaining_in_quota_window("a", "c") == 0
    clock.advance(1000)
    assert m.remaining_in_quota_window("a", "c") == 500
    m.unrecord("a", "c", 10_000)  # given back, never above the burst
    assert m.remaining_in_quota_window("a", "c") == 1000


def test_shadow_forgives_the_debt_and_each_decision_says_its_own_wait():
    """Not applied, so the client was not held: each decision is the wait that request alone would need, and they
    add up to the time the client would have lost (here 2 KB/s offered against 1 KB/s: half of every second)."""
    clock = ManualClock()
    m = manager(1000, clock, smoothing=True, shadow=True)
    decisions = []
    for _ in range(200):  # 20 s, 100 B every 50 ms
        decisions.append(m.record_and_decide("a", "c", 100))
        clock.advance(50)
    assert all(d.shadow for d in decisions if isinstance(d, Throttle))
    waits = [d.throttle_time_ms for d in decisions if isinstance(d, Throttle)]
    assert max(waits) <= 100
    assert 9_000 <= sum(waits) <= 10_000
    assert m.stats_for("a", "c").shadow_throttle_time_ms_total == sum(waits)


def test_switching_live_and_a_new_limit():
    clock = ManualClock()
    m = manager(1000, clock, smoothing=False)
    assert m.record_and_get_throttle_time_ms("a", "c", 5000) == 0  # Kafka's fresh-entity burst: 10 windows
    m.smoothing = True
    assert m.record_and_get_throttle_time_ms("a", "c", 1500) == 500  # a full bucket from now on
    m.update_quotas(QuotaTable.from_values([({"user": DEFAULT}, {PRODUCER_BYTE_RATE: 2000})]))
    assert m.record_and_get_throttle_time_ms("a", "c", 500) == 500  # -1000 B at 2000 B/s
    m.smoothing = False
    assert m.record_and_get_throttle_time_ms("a", "c", 0) == 0  # back to the sampled rate, under 2000 B/s


def test_unlimited_entities_have_no_bucket():
    clock = ManualClock()
    m = manager(math.inf, clock, smoothing=True)
    assert m.record_and_get_throttle_time_ms("a", "c", 10**9) == 0
    assert m.remaining_in_quota_window("a", "c") == math.inf
