"""A client sending as fast as it is allowed, honouring every throttle (KIP-219), against the quota."""

import pytest

from quota import DEFAULT, PRODUCER_BYTE_RATE, ClientQuotaManager, ManualClock, QuotaTable, QuotaWindow


def simulate(limit: int, batch: int, gap_ms: int, duration_ms: int, window: QuotaWindow = QuotaWindow()):
    clock = ManualClock()
    table = QuotaTable.from_values([({"user": DEFAULT}, {PRODUCER_BYTE_RATE: limit})])
    m = ClientQuotaManager(table, PRODUCER_BYTE_RATE, clock, window)
    sent: list[tuple[int, int]] = []
    max_throttle = 0
    while clock.now_ms() < duration_ms:
        sent_at = clock.now_ms()
        throttle = m.record_and_get_throttle_time_ms("alice", "etl", batch)
        sent.append((sent_at, batch))
        max_throttle = max(max_throttle, throttle)
        clock.advance(max(throttle, gap_ms))  # muted for the throttle time, else the next batch after gap_ms

    def ratio(start_ms: int, end_ms: int) -> float:
        total = sum(size for at, size in sent if start_ms <= at < end_ms)
        return total / ((end_ms - start_ms) / 1000) / limit

    return ratio, max_throttle, m.max_throttle_time_ms


def test_sixty_seconds_after_the_first_window_is_within_five_percent():
    ratio, max_throttle, cap = simulate(limit=1_048_576, batch=16_384, gap_ms=10, duration_ms=71_000)
    assert 0.95 <= ratio(11_000, 71_000) <= 1.05
    assert max_throttle <= cap


@pytest.mark.parametrize(
    "limit, batch, gap_ms",
    [
        (1_000_000, 16_384, 1),
        (1_000_000, 65_536, 1),
        (1_000_000, 1_048_576, 1),
        (10_000_000, 1_048_576, 10),
        (10_000_000, 65_536, 1),
    ],
)
def test_long_run_rate_is_within_five_percent(limit, batch, gap_ms):
    ratio, _, _ = simulate(limit, batch, gap_ms, duration_ms=311_000)
    assert 0.95 <= ratio(11_000, 311_000) <= 1.05


def test_start_up_burst_is_samples_minus_one_windows():
    ratio, _, _ = simulate(limit=1_000_000, batch=10_000, gap_ms=1, duration_ms=2_000)
    # Within the first second the client gets about 10 s of quota, then is throttled.
    assert 9.9 <= ratio(0, 1_000) <= 10.1
