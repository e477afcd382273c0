import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quota import QuotaWindow, Rate


def test_defaults_are_kafkas():
    window = QuotaWindow()
    assert (window.num, window.size_seconds, window.size_ms) == (11, 1, 1000)
    assert window.span_ms == 11_000 and window.min_elapsed_ms == 10_000


@pytest.mark.parametrize("bad", [dict(num=0), dict(size_seconds=0), dict(num=1.5), dict(num=True)])
def test_window_settings_are_checked(bad):
    with pytest.raises(ValueError):
        QuotaWindow(**bad)


def test_a_fresh_rate_divides_by_samples_minus_one_windows():
    rate = Rate(QuotaWindow(num=11, size_seconds=1))
    rate.record(10_000, now_ms=0)
    assert rate.window_size_ms(0) == 10_000
    assert rate.measure(0) == 1_000.0  # 10 s of a 1000/s quota in the first millisecond is still "within"
    assert rate.window_size_ms(2_500) == 10_500  # 2 full windows elapsed -> pad 8, plus the 500 ms fraction


def test_elapsed_time_is_real_once_enough_windows_have_passed():
    rate = Rate(QuotaWindow(num=3, size_seconds=1))
    for t in range(0, 4_900, 100):
        rate.record(1, now_ms=t)
    # Three slots plus the overlapping one: the oldest kept sample started at 1000 ms, last event at 1900.
    assert rate.window_size_ms(4_850) == 3_850
    assert rate.total(4_850) == 39
    # At 4_900 that sample's last event is 3 s old: purged, and the window starts at 2000.
    assert rate.window_size_ms(4_900) == 2_900
    assert rate.total(4_900) == 29


def test_empty_rate_measures_zero_over_at_least_one_ms():
    rate = Rate(QuotaWindow(num=1, size_seconds=1))
    assert rate.measure(0) == 0.0
    assert rate.window_size_ms(0) == 1


def test_samples_expire_after_num_windows_without_events():
    rate = Rate(QuotaWindow(num=11, size_seconds=1))
    rate.record(500, now_ms=0)
    assert rate.total(10_999) == 500
    assert rate.total(11_000) == 0  # now - lastEvent >= samples * window
    assert rate.window_size_ms(11_000) == 10_000  # back to a fresh start


def test_overlapping_sample_is_kept_while_it_has_a_recent_event():
    rate = Rate(QuotaWindow(num=2, size_seconds=1))
    rate.record(1, now_ms=0)
    rate.record(1, now_ms=900)  # same sample, started at 0
    rate.record(1, now_ms=1_000)
    # At 2_500 the first sample started 2.5 s ago (> num * size) but its last event is 1.6 s old: kept.
    assert rate.total(2_500) == 3
    assert rate.window_size_ms(2_500) == 2_500
    assert rate.total(2_900) == 1  # its last event is now 2 s old: purged


def test_kafka_comment_example_first_window():
    # Rate.java: 1 s windows, 2 samples; the elapsed window is at least one full window.
    rate = Rate(QuotaWindow(num=2, size_seconds=1))
    rate.record(1, 0)
    rate.record(1, 30)
    rate.record(1, 60)
    assert rate.measure(60) == pytest.approx(3 / 1.060)


def test_samples_are_recycled_not_grown():
    window = QuotaWindow(num=11, size_seconds=1)
    rate = Rate(window)
    for t in range(0, 600_000, 37):
        rate.record(1, t)
    assert rate.sample_count == window.num + 1
    assert rate.measure(600_000) == pytest.approx(1000 / 37, rel=0.02)


@settings(max_examples=15, deadline=None)
@given(
    steps=st.lists(st.tuples(st.integers(0, 4_000), st.integers(-50, 5_000)), max_size=30),
    gap=st.integers(0, 40_000),
)
def test_headroom_is_the_limit_over_the_window_less_the_total(steps, gap):
    # what the Fetch budget is made of: limit * window_size_ms / 1000 - total, one purge, whatever came before
    window = QuotaWindow(num=3, size_seconds=1)
    a, b = Rate(window), Rate(window)
    now = 0
    for advance, value in steps:
        now += advance
        a.record(value, now)
        b.record(value, now)
    now += gap
    expected = 1_000 * b.window_size_ms(now) / 1000.0 - b.total(now)
    assert a.headroom(1_000, now) == expected
    assert a.samples(now) == b.samples(now)  # the same purge


@settings(max_examples=25, deadline=None)
@given(
    steps=st.lists(st.tuples(st.integers(0, 4_000), st.integers(-3_000, 5_000)), max_size=40),
    gaps=st.lists(st.integers(0, 40_000), min_size=1, max_size=4),
    limit=st.sampled_from([0.0, 100.0, 1_000.0, 1e9]),
)
def test_headroom_floor_is_never_above_the_headroom_until_the_next_record(steps, gaps, limit):
    # what lets a consumer's Fetch skip measuring: the floor is a bound at any later time, not at one instant
    window = QuotaWindow(num=3, size_seconds=1)
    rate = Rate(window)
    now = 0
    for advance, value in steps:
        now += advance
        rate.record(value, now)
        floor = rate.headroom_floor(limit)
        later = now
        for gap in gaps:
            later += gap
            assert floor <= rate.headroom(limit, later)
            assert rate.headroom_floor(limit) >= floor  # a purge only takes from what is held


def test_headroom_floor_tells_a_quota_far_from_binding_and_no_more():
    rate = Rate(QuotaWindow(num=11, size_seconds=1))
    rate.record(4_000, 0)
    assert rate.headroom_floor(1_000) == pytest.approx(6_000, rel=1e-5)  # 10 s at 1,000 B/s, less 4,000 held
    assert rate.headroom_floor(1_000) < rate.headroom(1_000, 0)
    rate.record(7_000, 1_500)
    assert rate.headroom_floor(1_000) < 0 < rate.headroom(1_000, 11_500)  # the first sample gone: measure


@settings(max_examples=25, deadline=None)
@given(
    steps=st.lists(st.tuples(st.integers(0, 4_000), st.integers(-3_000, 5_000)), max_size=40),
    limit=st.sampled_from([0.0, 100.0, 1_000.0, 1e9]),
)
def test_surely_within_never_says_so_of_a_rate_over_its_limit_and_purges_as_measure(steps, limit):
    # the charge's shortcut: a record far below the quota decided without measuring, the samples left as measuring
    # would leave them (the next record starts a sample, or not, the same way)
    window = QuotaWindow(num=3, size_seconds=1)
    asked, measured = Rate(window), Rate(window)
    now = 0
    for advance, value in steps:
        now += advance
        asked.record(value, now)
        measured.record(value, now)
        if asked.surely_within(limit, now):
            assert measured.measure(now) <= limit
        else:
            measured.measure(now)
        assert repr(asked) == repr(measured)
