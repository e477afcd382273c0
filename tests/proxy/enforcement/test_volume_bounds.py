"""Volume-usage records stay cheap whatever a writer publishes: bounded records (size, volumes), evaluations only
when a snapshot changes or goes stale, and metrics bounded in cardinality. Pure: records in, state and Prometheus
samples out; time is a fake clock (and, for the background timer, a loop whose time is virtual)."""

from __future__ import annotations

import pytest

from config.errors import ConfigError
from config.loader import parse_config

BASE = {"upstream": {"bootstrap_servers": ["b:1"]}, "listeners": [{"name": "L", "bind": "h:2"}]}


def volume_config(**keys):
    return parse_config({**BASE, "volume_usage": keys}).volume_usage


def test_the_bounds_have_defaults_that_fit_a_real_cluster():
    config = volume_config()
    assert (config.max_record_bytes, config.max_volumes_per_snapshot, config.metrics_top_volumes) == (
        1_048_576,
        10_000,
        10,
    )
    config = volume_config(max_record_bytes=65536, max_volumes_per_snapshot=50, metrics_top_volumes=0)
    assert (config.max_record_bytes, config.max_volumes_per_snapshot, config.metrics_top_volumes) == (65536, 50, 0)


@pytest.mark.parametrize(
    "key,value,message",
    [
        ("max_record_bytes", 100, "volume_usage.max_record_bytes: must be at least 1024"),
        ("max_record_bytes", "1MiB", "volume_usage.max_record_bytes: expected an integer"),
        ("max_volumes_per_snapshot", 0, "volume_usage.max_volumes_per_snapshot: must be at least 1"),
        ("max_volumes_per_snapshot", 1.5, "volume_usage.max_volumes_per_snapshot: expected an integer"),
        ("metrics_top_volumes", -1, "volume_usage.metrics_top_volumes: must be at least 0"),
    ],
)
def test_bad_bounds_name_the_key(key, value, message):
    with pytest.raises(ConfigError) as info:
        volume_config(**{key: value})
    assert message in str(info.value)


# --- records in, state and metrics out --------------------------------------------------------------------------

import asyncio  # noqa: E402
import selectors  # noqa: E402

from config.volume import VolumeUsageConfig  # noqa: E402
from proxy.enforcement.volume_throttle import VolumeThrottle  # noqa: E402
from quota.managers.volume import OPEN, PAUSE, Limit, Snapshot, Volume  # noqa: E402
from quota.primitives.clock import ManualClock  # noqa: E402
from quota.primitives.quota_table import QuotaTable  # noqa: E402
from quota.primitives.rate import QuotaWindow  # noqa: E402

GB = 1_000_000_000
START_MS = 1_800_000_000_000


def throttle(clock=None, **keys) -> VolumeThrottle:
    clock = clock or ManualClock(START_MS)
    config = VolumeUsageConfig(freshness_seconds=60, missing_data_action=PAUSE, produce_base_rate=1000, **keys)
    return VolumeThrottle(config, QuotaTable(), clock, QuotaWindow(), 25_000)


def snapshot_value(at_ms: int, volumes: int, used=lambda i: (i % 90) * GB) -> bytes:
    """A broker's snapshot listing ``volumes`` volumes (about 60 bytes each, as in the issue's measurement)."""
    return Snapshot(
        1,
        at_ms,
        Limit("ConsumedSpace", 50 * GB),
        Limit("ConsumedSpace", 95 * GB),
        tuple(Volume(f"/data/{i}", 100 * GB, used(i)) for i in range(volumes)),
    ).to_json()


def scrape(t: VolumeThrottle) -> dict[str, list]:
    """The volume metrics Prometheus would scrape: family name -> samples."""
    from proxy.ops.volume_metrics import volume_families

    return {f.name: f.samples for f in volume_families(t)}


def test_a_100000_volume_record_adds_no_series_and_a_record_at_the_limit_adds_top_n():
    """Before: one record of 100,000 volumes made 400,000 series (used, free, two breach flags per volume), a
    32 MB /metrics. Now it is refused; a record at the limit (10,000 volumes) gives per-volume series for the
    10 volumes nearest their hard limit, and aggregates over all of them."""
    t = throttle()
    t.brokers({1})
    t.record(b"1", snapshot_value(START_MS, 1, used=lambda i: 10 * GB))
    before = sum(len(samples) for samples in scrape(t).values())
    huge = snapshot_value(START_MS, 100_000)
    assert len(huge) > 5_000_000
    t.record(b"1", huge)
    assert sum(len(samples) for samples in scrape(t).values()) == before
    at_limit = snapshot_value(START_MS, 10_000)
    assert len(at_limit) <= t.config.max_record_bytes
    t.record(b"1", at_limit)
    families = scrape(t)
    assert len(families["kafka_quota_proxy_volume_used_bytes"]) == 10
    assert len(families["kafka_quota_proxy_volume_limit_breached"]) == 20
    assert sum(len(samples) for samples in families.values()) < before + 50
    assert families["kafka_quota_proxy_volume_volumes"][0].value == 10_000
    assert families["kafka_quota_proxy_volume_max_usage_ratio"][0].value == pytest.approx(0.89)
    fullest = {s.labels["volume"] for s in families["kafka_quota_proxy_volume_used_bytes"]}
    assert fullest == {f"/data/{i}" for i in range(10_000) if i % 90 == 89 and i // 90 < 10}


def bad_records(t: VolumeThrottle) -> dict[str, float]:
    return {s.labels["reason"]: s.value for s in scrape(t)["kafka_quota_proxy_volume_bad_records"]}


def test_an_over_limit_record_is_counted_by_reason_and_the_pause_stays(caplog):
    from proxy.enforcement import volume_throttle

    volume_throttle.BAD_RECORD_LOG._peers.clear()
    t = throttle(max_record_bytes=64 * 1024, max_volumes_per_snapshot=100)
    t.brokers({1})
    t.record(b"1", snapshot_value(START_MS, 3, used=lambda i: 96 * GB))  # past the hard limit
    assert t.paused
    empty_disks = snapshot_value(START_MS, 101, used=lambda i: 0)  # would lift the PAUSE if taken
    assert len(empty_disks) < 64 * 1024
    t.record(b"1", empty_disks)
    assert t.paused
    t.record(b"1", snapshot_value(START_MS, 2000, used=lambda i: 0))  # past max_record_bytes too
    assert t.paused
    assert bad_records(t) == {"too_large": 1, "too_many_volumes": 1, "invalid": 0, "not_verified": 0}
    lines = [r.getMessage() for r in caplog.records if "volume usage record" in r.getMessage()]
    assert len(lines) == 2 and all(len(line) < 600 for line in lines)
    assert "max_volumes_per_snapshot (100)" in lines[0] and "max_record_bytes (65536)" in lines[1]
    t.record(b"1", snapshot_value(START_MS, 3, used=lambda i: 0))  # the broker's next good snapshot is taken
    assert t.state.state == OPEN


def test_a_throttle_evaluates_on_a_new_snapshot_and_on_the_staleness_deadline_only():
    clock = ManualClock(START_MS)
    t = throttle(clock)
    t.brokers({1})
    t.record(b"1", snapshot_value(START_MS, 3, used=lambda i: 10 * GB))
    assert t.due_in_ms() == 60_001
    taken = t.evaluations
    for _ in range(60):  # a minute of a timer waking every second: nothing is due
        clock.advance(1000)
        t.evaluate_if_due()
    assert t.evaluations == taken
    clock.advance(1)
    t.evaluate_if_due()
    assert t.evaluations == taken + 1 and t.paused and t.due_in_ms() is None  # stale: the PAUSE fallback
    assert scrape(t)["kafka_quota_proxy_volume_evaluations"][0].value == t.evaluations


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop whose clock jumps to the next timer instead of waiting for it: a timer of a minute takes no
    real time. Its ``clock`` (a ManualClock) follows the loop's time, so the throttle's wall clock does too."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.virtual_s = 0.0
        loop = self

        class Selector(selectors.DefaultSelector):
            def select(self, timeout=None):
                ready = super().select(0)
                if not ready and timeout:
                    loop.virtual_s += timeout
                    clock.set(START_MS + int(loop.virtual_s * 1000))
                return ready

        super().__init__(Selector())

    def time(self) -> float:
        return self.virtual_s


def test_the_background_timer_evaluates_once_in_ten_minutes_for_one_snapshot(monkeypatch):
    """The follower's timer as it runs (before: ``evaluate()`` every second, 600 evaluations for nothing in ten
    minutes). A snapshot taken at the start goes stale once; that is the one evaluation due. Evaluations are
    counted where the throttle calls the pure ``evaluate``."""
    from config.model import Address
    from proxy.cluster.kafka_clients import OwnKafka
    from proxy.enforcement import volume_throttle
    from proxy.observers.volume_sources import VolumeFollower

    evaluations = [0]
    pure_evaluate = volume_throttle.evaluate

    def counted(*args, **kwargs):
        evaluations[0] += 1
        return pure_evaluate(*args, **kwargs)

    monkeypatch.setattr(volume_throttle, "evaluate", counted)
    clock = ManualClock(START_MS)
    t = throttle(clock)
    t.brokers({1})
    follower = VolumeFollower(t, OwnKafka((Address("unused", 9092),)))  # only its timer runs
    loop = VirtualTimeLoop(clock)

    async def ten_minutes() -> int:
        timer = asyncio.get_running_loop().create_task(follower._tick())
        await asyncio.sleep(0)
        t.record(b"1", snapshot_value(clock.now_ms(), 3, used=lambda i: 10 * GB))
        taken = evaluations[0]
        assert t.state.state == OPEN
        await asyncio.sleep(600)
        timer.cancel()
        with pytest.raises(asyncio.CancelledError):
            await timer
        return evaluations[0] - taken

    try:
        assert loop.run_until_complete(ten_minutes()) == 1
    finally:
        loop.close()
    assert t.paused and t.state.missing_data == (1,)  # the deadline's evaluation: stale, the PAUSE fallback


def test_before_any_data_the_fail_safe_applies_and_says_why(caplog):
    """Issue 23 item 6: at start-up (no broker list, no snapshot) the missing-data action applies, the metric and
    the log line say it is waiting for data; the first broker list ends the wait (each live broker then missing
    until its snapshot), and its snapshot opens."""
    caplog.set_level("WARNING", logger="kafka_quota_proxy.volume")
    t = throttle()
    assert t.paused and t.state.awaiting_data
    assert scrape(t)["kafka_quota_proxy_volume_awaiting_data"][0].value == 1
    assert any("no broker list or snapshot yet" in r.getMessage() for r in caplog.records)
    t.brokers({1})
    assert t.paused and t.state.missing_data == (1,)
    assert scrape(t)["kafka_quota_proxy_volume_awaiting_data"][0].value == 0
    t.record(b"1", snapshot_value(START_MS, 1, used=lambda i: 10 * GB))
    assert t.state.state == OPEN
