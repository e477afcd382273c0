"""Rate.peek and TokenBucket.peek: what metrics read. The same value as measuring, and nothing changed by reading, so
a scrape never alters a later quota decision (and may read from a thread other than the event loop's)."""

import copy
import random

from quota import QuotaWindow, Rate
from quota.managers.mutation import TokenBucket
from quota.primitives.entity import QuotaTags, ResolvedQuota
from quota.primitives.sensor import ClientSensors


def random_rate(rng: random.Random) -> tuple[Rate, int]:
    rate = Rate(QuotaWindow(num=rng.randint(1, 5), size_seconds=rng.randint(1, 3)))
    now = 0
    for _ in range(rng.randint(0, 40)):
        now += rng.choice((0, 1, 50, 400, 999, 1000, 2500, 7000, 20_000))
        rate.record(rng.randint(-5, 100), now)
    return rate, now


def test_peek_is_what_measure_says():
    rng = random.Random(7)
    for _ in range(3000):
        rate, now = random_rate(rng)
        at = now + rng.choice((0, 1, 999, 1000, 3000, 6000, 50_000))
        expected = copy.deepcopy(rate).measure(at)
        assert rate.peek(at) == expected


def test_peeking_changes_no_later_measurement():
    """Measuring resets obsolete samples to start at the time of measuring, which a later measurement divides by:
    a scrape that measured would change a later quota check. Peeking does not."""
    rng = random.Random(11)
    differs = 0
    for _ in range(3000):
        rate, now = random_rate(rng)
        scraped = now + rng.choice((1000, 6000, 20_000))
        recorded = scraped + rng.choice((0, 300, 1500, 4000))  # traffic after the scrape
        later = recorded + rng.choice((0, 700, 2500))
        untouched, measured = copy.deepcopy(rate), copy.deepcopy(rate)
        rate.peek(scraped)
        measured.measure(scraped)
        for r in (rate, untouched, measured):
            r.record(10, recorded)
        assert rate.measure(later) == untouched.measure(later)
        differs += measured.measure(later) != untouched.measure(later)
    assert differs  # the property is not vacuous: measuring at scrape time would have changed some


def test_sensor_stats_change_nothing():
    window = QuotaWindow(num=3, size_seconds=1)
    sensors = ClientSensors(ResolvedQuota(100.0, QuotaTags("u", "")), window, "u", "c", 0)
    sensors.record(500, 0)
    sensors.record(500, 2_500)
    before = copy.deepcopy(sensors.rate)
    sensors.stats(9_000)  # the first sample is obsolete by now: measuring would reset it
    assert repr(sensors.rate) == repr(before)


def test_token_bucket_peek_is_refill_without_the_update():
    bucket = TokenBucket(rate=2.0, burst=10.0, now_ms=0)
    bucket.take(8, 0)
    assert bucket.peek(1500) == 5.0 and bucket.tokens == 2.0
    assert bucket.refill(1500) == 5.0
    assert bucket.peek(100_000) == 10.0 and bucket.peek(1000) == 5.0  # the past: as refill, nothing added
