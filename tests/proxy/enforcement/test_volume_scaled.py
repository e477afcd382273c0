"""The volume-scaled produce quotas are a view of the configured table: a table made by with_changes costs nothing
to take (no copy) and refreshes only the sensors the changed entities reach; they resolve as the table scaled whole
(scaled_produce_table) does."""

from __future__ import annotations

import pytest

from config.volume import VolumeUsageConfig
from proxy.enforcement.volume_throttle import VolumeThrottle
from quota.managers.volume_scaling import scaled_produce_table
from quota.primitives.clock import ManualClock
from quota.primitives.entity import CONSUMER_BYTE_RATE, DEFAULT, PRODUCER_BYTE_RATE, QuotaEntity, QuotaEntry
from quota.primitives.quota_table import QuotaTable
from quota.primitives.rate import QuotaWindow

pytestmark = pytest.mark.long_running(seconds=10)

P = PRODUCER_BYTE_RATE


def test_the_scaled_quotas_follow_what_changed():
    table = QuotaTable(QuotaEntry(QuotaEntity(f"user-{i}"), {P: 100 + i}) for i in range(20_000))
    volume = VolumeThrottle(
        VolumeUsageConfig(missing_data_action="OPEN", produce_base_rate=1000),
        table,
        ManualClock(0),
        QuotaWindow(),
        1000,
    )
    for i in range(0, 20_000, 10):
        volume.produce.record_and_decide(f"user-{i}", "c", 1)
    client_default = QuotaEntity(client_id=DEFAULT)
    for changes in (
        {QuotaEntity("user-30"): QuotaEntry(QuotaEntity("user-30"), {P: 5}), QuotaEntity("user-40"): None},
        {client_default: QuotaEntry(client_default, {P: 50, CONSUMER_BYTE_RATE: 9})},
        {QuotaEntity("user-50"): QuotaEntry(QuotaEntity("user-50"), {CONSUMER_BYTE_RATE: 9})},
        {client_default: None},
    ):
        table = table.with_changes(changes)
        volume.produce.keeper.refreshed, sensors = 0, len(volume.produce)
        volume.update_quotas(table)
        reaches_all = client_default in changes  # a default for every client-id: every sensor (~2,000)
        assert volume.produce.keeper.refreshed == (sensors if reaches_all else sum(e.user is not None for e in changes))
        whole = scaled_produce_table(table, 1.0, 1000)
        for user in ("user-30", "user-40", "user-50", "user-60", "nobody"):
            assert volume.produce.resolve(user, "c") == whole.resolve(P, user, "c")
        assert {s.tags: s.limit for s in volume.produce.stats()}[("user-30", "")] == whole.limit(P, "user-30", "c")
    assert volume.produce.resolve("nobody", "c").limit == 1000  # the base rate back
