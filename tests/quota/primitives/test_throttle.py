import pytest

from quota import INT32_MAX, QuotaWindow, Rate, bounded_throttle_time_ms, quota_acceptable, throttle_time_ms
from quota.primitives.throttle import java_round

MB = 1_000_000


def test_kip13_worked_example_is_two_seconds():
    # 5 MB/s quota, 10 s window: 9 s at exactly 5 MB/s, then a 15 MB batch -> 60 MB in 10 s = 6 MB/s,
    # (6 - 5) / 5 * 10 s = 2 s, i.e. the KIP's (60 - 50) / 5.
    rate = Rate(QuotaWindow(num=11, size_seconds=1))  # at least 10 full windows: the KIP's 10 s
    for second in range(9):
        rate.record(5 * MB, now_ms=second * 1000)
    rate.record(15 * MB, now_ms=9_000)
    observed = rate.measure(9_000)
    assert rate.window_size_ms(9_000) == 10_000
    assert observed == pytest.approx(6 * MB)
    assert not quota_acceptable(observed, 5 * MB)
    assert throttle_time_ms(observed, 5 * MB, rate.window_size_ms(9_000)) == 2_000


def test_quotautils_cases():
    # QuotaUtilsTest: the window of a fresh Rate with n samples of 1 s is (n - 1) s.
    assert throttle_time_ms(16.5, 16.5, 9_000) == 0
    assert throttle_time_ms(16.5, 20.4, 9_000) < 0
    assert throttle_time_ms(100.0, 50.0, 2_000) == 2_000
    assert bounded_throttle_time_ms(55.0, 50.0, 1_000, 500) == 100
    assert bounded_throttle_time_ms(100.0, 50.0, 9_000, 500) == 500


def test_acceptable_is_inclusive():
    assert quota_acceptable(100.0, 100.0)
    assert not quota_acceptable(100.0001, 100.0)


def test_rounds_half_up_like_java():
    assert java_round(0.5) == 1 and java_round(2.5) == 3 and java_round(2.4999) == 2
    assert throttle_time_ms(100.25, 100.0, 2_000) == 5


def test_zero_quota_means_maximum_throttle():
    assert throttle_time_ms(1.0, 0.0, 10_000) == INT32_MAX
    assert throttle_time_ms(0.0, 0.0, 10_000) == 0
    assert bounded_throttle_time_ms(1.0, 0.0, 10_000, 11_000) == 11_000
