"""What Produce consults for cluster volume usage, without sockets: records in, state and scaled quotas out."""

from __future__ import annotations

import pytest

from config.volume import VolumeUsageConfig
from proxy.volume import VolumeThrottle, scaled_produce_table
from quota.clock import ManualClock
from quota.entity import QuotaTable
from quota.rate import QuotaWindow
from quota.volume import OPEN, PAUSE, THROTTLE, Limit, Snapshot, Volume

GB = 1_000_000_000


def throttle(missing=PAUSE, quotas=QuotaTable()):
    clock = ManualClock(1_800_000_000_000)
    return VolumeThrottle(VolumeUsageConfig(missing_data_action=missing, produce_base_rate=1000), quotas, clock,
                          QuotaWindow(), 25_000), clock


def record(t, broker, used, at):
    snap = Snapshot(broker, at, Limit("ConsumedSpace", 50 * GB), Limit("ConsumedSpace", 90 * GB),
                    (Volume("/d", 100 * GB, used),))
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
    t.record(b"1", None)  # tombstone: broker 1 has no snapshot; it is still live, so the fallback applies
    t.brokers({1})
    assert t.state.state == PAUSE and t.state.missing_data == (1,)


def test_snapshots_go_stale_with_time():
    t, clock = throttle(missing=OPEN)
    t.brokers({1, 2})
    record(t, 1, 70 * GB, clock.now_ms())
    assert t.state.state == THROTTLE and t.state.missing_data == (2,)
    clock.advance(61_000)
    assert t.evaluate().state == OPEN  # stale: the OPEN fallback


def test_per_entity_produce_quotas_are_scaled_and_the_base_rate_covers_the_rest():
    quotas = QuotaTable.from_values([({"user": "alice"}, {"producer_byte_rate": 4000}),
                                     ({"user": "bob"}, {"consumer_byte_rate": 1})])
    table = scaled_produce_table(quotas, 0.25, 1000)
    assert table.limit("producer_byte_rate", "alice", "x") == 1000
    assert table.limit("producer_byte_rate", "bob", "x") == 250
