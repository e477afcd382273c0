"""What Produce consults for cluster volume usage, without sockets: records in, state and scaled quotas out."""

from __future__ import annotations

import pytest

from config.volume import VolumeUsageConfig
from proxy.enforcement.volume_throttle import VolumeThrottle
from quota.managers.volume import OPEN, PAUSE, THROTTLE, Limit, Snapshot, Volume
from quota.managers.volume_scaling import scaled_produce_table
from quota.primitives.clock import ManualClock
from quota.primitives.quota_table import QuotaTable
from quota.primitives.rate import QuotaWindow

GB = 1_000_000_000


def throttle(missing=PAUSE, quotas=QuotaTable()):
    clock = ManualClock(1_800_000_000_000)
    return VolumeThrottle(
        VolumeUsageConfig(missing_data_action=missing, produce_base_rate=1000), quotas, clock, QuotaWindow(), 25_000
    ), clock


def record(t, broker, used, at):
    snap = Snapshot(
        broker, at, Limit("ConsumedSpace", 50 * GB), Limit("ConsumedSpace", 90 * GB), (Volume("/d", 100 * GB, used),)
    )
    t.record(str(broker).encode(), snap.to_json())


def test_states_follow_the_records_and_a_bad_record_keeps_the_last_good_snapshot():
    t, clock = throttle()
    record(t, 1, 10 * GB, clock.now_ms())
    assert t.state.state == OPEN
    record(t, 1, 70 * GB, clock.now_ms())
    assert t.state.state == THROTTLE and t.state.factor == pytest.approx(0.5)
    assert t.produce.resolve("u", "c").limit == pytest.approx(500)  # the base rate, scaled
    t.record(b"1", b"{not json")
    assert t.bad_records == 1 and t.state.state == THROTTLE
    record(t, 1, 95 * GB, clock.now_ms())
    assert t.paused


def test_snapshots_go_stale_with_time():
    t, clock = throttle(missing=OPEN)
    t.brokers({1, 2})
    record(t, 1, 70 * GB, clock.now_ms())
    assert t.state.state == THROTTLE and t.state.missing_data == (2,)
    clock.advance(61_000)
    assert t.evaluate().state == OPEN  # stale: the OPEN fallback


def test_per_entity_produce_quotas_are_scaled_and_the_base_rate_covers_the_rest():
    quotas = QuotaTable.from_values(
        [({"user": "alice"}, {"producer_byte_rate": 4000}), ({"user": "bob"}, {"consumer_byte_rate": 1})]
    )
    table = scaled_produce_table(quotas, 0.25, 1000)
    assert table.limit("producer_byte_rate", "alice", "x") == 1000
    assert table.limit("producer_byte_rate", "bob", "x") == 250


def test_volume_throttle_keeps_a_shadow_entry_shadow():
    """Issue 23 item 6a: under THROTTLE a ``mode: shadow`` producer_byte_rate is scaled and metered, not applied
    (before: the scaled quota dropped the shadow flag and was enforced)."""
    quotas = QuotaTable.from_values(
        [({"user": "alice"}, {"producer_byte_rate": 4000}, True), ({"user": "bob"}, {"producer_byte_rate": 4000})]
    )
    t, clock = throttle(quotas=quotas)
    t.brokers({1})
    record(t, 1, 70 * GB, clock.now_ms())
    assert t.throttling and t.state.factor == pytest.approx(0.5)
    alice = t.produce.record_and_decide("alice", "c", 100_000)
    bob = t.produce.record_and_decide("bob", "c", 100_000)
    assert alice.shadow and alice.throttle_time_ms > 0 and not bob.shadow and bob.throttle_time_ms > 0


def test_records_that_cannot_be_verified_change_nothing_and_the_brokers_next_publication_does():
    """A hostile writer's tombstone, empty snapshot, snapshot from the future or for a broker the cluster does
    not have: the state stays, each is counted; the broker's own next snapshot changes it."""
    t, clock = throttle(missing=PAUSE)
    t.brokers({1})
    record(t, 1, 95 * GB, clock.now_ms())
    assert t.paused
    empty = Snapshot(1, clock.now_ms(), Limit("ConsumedSpace", 50 * GB), Limit("ConsumedSpace", 90 * GB), ())
    t.record(b"1", empty.to_json())  # would lift a real PAUSE if taken
    assert t.paused
    record(t, 1, 10 * GB, clock.now_ms() + 3_600_000)  # dated an hour ahead: would stay fresh for an hour
    assert t.paused
    t.record(b"1", None)  # tombstone
    assert t.paused
    record(t, 7, 10 * GB, clock.now_ms())  # no broker 7
    assert t.paused and 7 not in t.snapshots
    assert t.bad_records == 4
    record(t, 1, 10 * GB, clock.now_ms())
    assert t.state.state == OPEN


def test_a_tombstone_does_not_pause_everyone():
    t, clock = throttle(missing=PAUSE)
    t.brokers({1})
    record(t, 1, 10 * GB, clock.now_ms())
    t.record(b"1", None)
    assert t.state.state == OPEN  # the broker's snapshot stays until it goes stale
    clock.advance(61_000)
    assert t.evaluate().state == PAUSE and t.state.missing_data == (1,)


def test_bad_records_are_logged_rate_limited_and_truncated(caplog):
    from proxy.enforcement import volume_throttle

    volume_throttle.BAD_RECORD_LOG._peers.clear()
    t, clock = throttle()
    huge = b"x" * 1_000_000
    for _ in range(100):
        t.record(huge, b"{}")
    lines = [r for r in caplog.records if "volume usage record" in r.getMessage()]
    assert len(lines) == 1 and len(lines[0].getMessage()) < 600
    assert t.bad_records == 100


def test_snapshots_are_judged_in_wall_time_with_the_production_clocks():
    """Snapshots cross hosts, so they are dated and judged in wall time; the quota windows stay monotonic. (Judged
    against the monotonic clock, every snapshot, even one from hours ago or from 2099, looked fresh for ever.)"""
    import time

    from config.loader import parse_config
    from proxy.enforcement.proxy_quotas import ProxyQuotas
    from quota.managers.volume import Limit, Snapshot, Volume

    config = parse_config(
        {
            "upstream": {"bootstrap_servers": ["b:1"]},
            "listeners": [{"name": "L", "bind": "h:2"}],
            "volume_usage": {"freshness_seconds": 60, "missing_data_action": "PAUSE"},
        }
    )
    volume = ProxyQuotas(config).volume
    volume.brokers({1})
    now_ms = int(time.time() * 1000)

    def snapshot(at_ms: int) -> Snapshot:
        return Snapshot(
            1, at_ms, Limit("MinFreePercentage", 50), Limit("MinFreePercentage", 10), (Volume("/d", 100, 10),)
        )

    volume.accept(snapshot(now_ms - 5_000))
    assert volume.state.state == "OPEN"
    volume.accept(snapshot(now_ms - 120_000))  # two minutes old: stale, the fail-safe PAUSE
    assert volume.state.state == "PAUSE" and volume.state.missing_data
