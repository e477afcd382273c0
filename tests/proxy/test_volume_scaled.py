"""The volume-scaled produce table follows a quota table made by with_changes by the entities that changed (a few
entries copied, not the table), and resolves as the table scaled whole does."""

from __future__ import annotations

from config.volume import VolumeUsageConfig
from proxy.volume_throttle import VolumeThrottle, scaled_produce_table
from quota.clock import ManualClock
from quota.entity import (CONSUMER_BYTE_RATE, DEFAULT, PRODUCER_BYTE_RATE, QuotaEntity, QuotaEntry, QuotaTable)
from quota.rate import QuotaWindow

P = PRODUCER_BYTE_RATE


def test_the_scaled_table_changes_by_what_changed():
    table = QuotaTable(QuotaEntry(QuotaEntity(f"user-{i}"), {P: 100 + i}) for i in range(20_000))
    clock = ManualClock(0)
    volume = VolumeThrottle(VolumeUsageConfig(missing_data_action="OPEN", produce_base_rate=1000), table, clock,
                            QuotaWindow(), 1000)
    client_default = QuotaEntity(client_id=DEFAULT)
    for changes in ({QuotaEntity("user-3"): QuotaEntry(QuotaEntity("user-3"), {P: 5}), QuotaEntity("user-4"): None},
                    {client_default: QuotaEntry(client_default, {P: 50, CONSUMER_BYTE_RATE: 9})},
                    {QuotaEntity("user-5"): QuotaEntry(QuotaEntity("user-5"), {CONSUMER_BYTE_RATE: 9})},
                    {client_default: None}):
        before = volume.produce.quotas
        table = table.with_changes(changes)
        volume.update_quotas(table)
        after = volume.produce.quotas
        assert after._entries.copied_from(before._entries) <= 2 * 1024  # a chunk or two, not 20,000 entries
        whole = scaled_produce_table(table, 1.0, 1000)
        for user in ("user-3", "user-4", "user-5", "user-6", "nobody"):
            assert after.resolve(P, user, "c") == whole.resolve(P, user, "c")
    assert volume.produce.quotas.limit(P, "nobody", "c") == 1000  # the base rate back
