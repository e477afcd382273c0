"""A quota table made by with_changes refreshes only the sensors its changed entities can reach (quota.primitives.reach),
and ends exactly where a full refresh (a table made from scratch) ends: same sensors, same limits."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from quota.managers.client_quota import ClientQuotaManager
from quota.managers.producer_ids import ProducerIdQuotaManager
from quota.primitives.clock import ManualClock
from quota.primitives.entity import DEFAULT, PRODUCER_BYTE_RATE, PRODUCER_IDS_RATE, QuotaEntity, QuotaEntry
from quota.primitives.quota_table import QuotaTable

P = PRODUCER_BYTE_RATE
NAMES = ["alice", "bob", DEFAULT]
ENTITIES = [QuotaEntity(u, c) for u in NAMES + [None] for c in NAMES + [None] if (u, c) != (None, None)]
changes = st.lists(st.tuples(st.sampled_from(ENTITIES), st.one_of(st.none(), st.integers(1, 9))), max_size=4)
clients = st.lists(
    st.tuples(st.sampled_from(["alice", "bob", "carol"]), st.sampled_from(["alice", "bob", "x"])),
    min_size=1,
    max_size=8,
)


def apply(table: QuotaTable, batch) -> QuotaTable:
    return table.with_changes(
        {
            e: None
            if rate is None
            else QuotaEntry(e, {P: rate, **({PRODUCER_IDS_RATE: rate} if e.client_id is None else {})})
            for e, rate in batch
        }
    )


def sensors(m: ClientQuotaManager) -> dict:
    return {s.tags: (s.limit, s.entity) for s in m.stats()}


@settings(max_examples=300, deadline=None)
@given(changes, clients, st.lists(changes, min_size=1, max_size=3))
def test_a_partial_refresh_ends_where_a_full_one_does(start, who, steps):
    table = apply(QuotaTable(), start)
    partial = ClientQuotaManager(table, P, ManualClock(5))
    full = ClientQuotaManager(table, P, ManualClock(5))
    pids_partial = ProducerIdQuotaManager(table, window_num=1, window_size_s=10)
    pids_full = ProducerIdQuotaManager(table, window_num=1, window_size_s=10)
    for user, client in who:
        for m in (partial, full):
            m.record_and_decide(user, client, 10)
        for m in (pids_partial, pids_full):
            m.record_and_decide(user, hash(client) & 0xFFFF, 0)
    for batch in steps:
        table = apply(table, batch)
        partial.update_quotas(table)
        full.update_quotas(QuotaTable(table.entries))  # made from scratch: every sensor refreshed
        pids_partial.update_quotas(table)
        pids_full.update_quotas(QuotaTable(table.entries))
        assert sensors(partial) == sensors(full)
        assert [(s.tags, s.limit) for s in pids_partial.stats(0)] == [(s.tags, s.limit) for s in pids_full.stats(0)]


def test_a_named_change_looks_at_that_tenants_sensors_only():
    entries = [QuotaEntry(QuotaEntity(f"user-{i}"), {P: 100}) for i in range(5_000)]
    table = QuotaTable(entries + [QuotaEntry(QuotaEntity(DEFAULT), {P: 1})])
    m = ClientQuotaManager(table, P, ManualClock(5))
    for i in range(5_000):
        m.record_and_decide(f"user-{i}", "c", 10)
    m.keeper.refreshed = 0
    m.update_quotas(table.with_changes({QuotaEntity("user-7"): None}))
    assert m.keeper.refreshed == 1
    m.update_quotas(m.quotas.with_changes({QuotaEntity(DEFAULT): QuotaEntry(QuotaEntity(DEFAULT), {P: 2})}))
    assert m.keeper.refreshed == 1 + 5_000  # a default for every user reaches every sensor
    assert m.stats_for("user-7", "c").limit == 2
