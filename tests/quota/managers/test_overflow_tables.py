"""The cap on tracked entities (``quota.max.tracked.entities``, issue 35) beyond the byte-rate sensors: the producer-id
quota's users, the mutation quota's buckets and the per-IP connection rates. Past the cap a new entity a quota names
only as ``<default>`` is counted in its quota's one ``<overflow>`` entity: the table stays at the cap, the flood is
limited together at the quota, the entities already tracked keep their own, and a named entity is always tracked.
Pure, with fake clocks."""

from __future__ import annotations

import math

from quota.managers.connection import ADMIT, Admit, ConnectionLimits, ConnectionQuotas
from quota.managers.mutation import ControllerMutationQuotaManager
from quota.managers.producer_ids import HOLD, Hold, ProducerIdQuotaManager, Refuse
from quota.primitives.clock import ManualClock
from quota.primitives.decision import FORWARD
from quota.primitives.entity import QuotaTable, QuotaTags
from quota.primitives.overflow import OVERFLOW
from quota.primitives.rate import QuotaWindow
from quota.sharing.usage_share import UsageTap

CAP = 100


def producer_ids(cap=CAP, **quotas):
    table = QuotaTable.from_values([({"user": "<default>"}, {"producer_ids_rate": 2})]
                                   + [({"user": u}, {"producer_ids_rate": r}) for u, r in quotas.items()])
    return ProducerIdQuotaManager(table, window_num=1, window_size_s=10, enforcement=HOLD, max_hold_ms=6_000,
                                  max_tracked_entities=cap)


def test_rotating_users_keep_the_producer_id_table_at_the_cap():
    m = producer_ids()
    for i in range(20 * CAP):
        m.record_and_decide(f"rotating-{i}", i, i)
    assert len(m) == CAP + 1  # the first CAP users, and <overflow>
    assert m.overflowed == 19 * CAP
    assert QuotaTags(OVERFLOW, "") in {s.tags for s in m.stats(20 * CAP)}


def test_overflowing_users_share_one_bucket_and_the_tracked_keep_theirs():
    m = producer_ids(named=50)
    for i in range(CAP):
        assert m.record_and_decide(f"tenant-{i}", 1, 0) is FORWARD
    flood = [m.record_and_decide(f"flood-{i}", 1000 + i, 0) for i in range(10)]
    assert flood[:2] == [FORWARD, FORWARD]  # the <default> burst of 2, once for the whole flood
    assert all(isinstance(d, (Hold, Refuse)) for d in flood[2:])
    assert m.record_and_decide("tenant-7", 2, 0) is FORWARD  # a tracked tenant's second id: its own burst
    assert m.record_and_decide("named", 5, 0) is FORWARD  # named in the quotas: always tracked
    assert len(m) == CAP + 2


def test_an_overflowed_users_hold_is_abandoned_in_the_overflow_bucket():
    m = producer_ids()
    for i in range(CAP):
        m.record_and_decide(f"tenant-{i}", 1, 0)
    m.record_and_decide("flood-a", 11, 0)
    m.record_and_decide("flood-b", 12, 0)
    hold = m.record_and_decide("flood-c", 13, 0)
    assert isinstance(hold, Hold)
    m.abandon(hold, 13, 100)
    overflow = next(s for s in m.stats(100) if s.tags.user == OVERFLOW)
    assert overflow.abandoned_count == 1 and overflow.tokens > -0.5


def test_peers_users_past_the_cap_go_to_the_overflow_state_too():
    m = producer_ids()
    m.tap = UsageTap()
    for i in range(3 * CAP):
        m.record_remote(f"remote-{i}", 1, (i,), 0)
    assert len(m) == CAP + 1


def mutations(cap=CAP):
    table = QuotaTable.from_values([({"client-id": "<default>"}, {"controller_mutation_rate": 1})])
    return ControllerMutationQuotaManager(table, ManualClock(0), QuotaWindow(2, 1), max_tracked_entities=cap)


def test_rotating_client_ids_keep_the_mutation_buckets_at_the_cap_and_share_one_burst():
    """1 mutation/s, a burst of 2. Before, every new client id had a full bucket of its own: creating topics under
    a fresh client id each time was never throttled."""
    m = mutations()
    for i in range(CAP):
        assert m.admit("", f"tenant-{i}", [1]).all_admitted
    admitted = sum(m.admit("", f"flood-{i}", [1]).all_admitted for i in range(50))
    assert admitted <= 3  # the one <overflow> bucket's burst (and one more: a non-empty bucket admits a topic)
    assert len(m) == CAP + 1 and m.overflowed == 50
    assert m.admit("", "tenant-3", [1]).all_admitted  # tracked: its own bucket


def test_a_refund_of_an_overflowed_client_goes_back_to_the_overflow_bucket():
    m = mutations()
    for i in range(CAP):
        m.admit("", f"tenant-{i}", [1])
    m.admit("", "flood-0", [2])
    before = m.tokens("", "flood-1")
    m.refund("", "flood-0", 2)
    assert m.tokens("", "flood-1") == before + 2


def ip_quotas(cap=CAP):
    limits = ConnectionLimits(ip_rates={"<default>": 1.0, "10.9.9.9": 1000.0})
    quotas = ConnectionQuotas(["L"], QuotaWindow(2, 1), limits)
    quotas.max_tracked_entities = cap
    return quotas


def test_rotating_ips_keep_the_ip_rates_at_the_cap_and_are_limited_together():
    """IPv6 gives a tenant 2^64 addresses per prefix: each new one had a rate (and a fresh allowance) for an hour."""
    quotas = ip_quotas()
    for i in range(CAP):
        assert isinstance(quotas.admit("L", f"2001:db8::{i:x}", 0), Admit)
    outcomes = [quotas.admit("L", f"2001:db8::1:{i:x}", 0) for i in range(50)]
    assert sum(o is ADMIT for o in outcomes) <= 3  # the one <overflow> rate at 1/s
    assert quotas.tracked_ips == CAP + 1 and quotas.overflowed == 50
    assert isinstance(quotas.admit("L", "10.9.9.9", 0), Admit)  # named: always tracked
    assert quotas.tracked_ips == CAP + 2
    assert not math.isinf(quotas.ip_accept_rate(OVERFLOW, 0))


def test_peers_usage_past_the_cap_goes_to_the_overflow_bucket_and_rate():
    """A proxy that serves none of the flood still records its peers' usage: the same caps hold for it."""
    m = mutations()
    for i in range(3 * CAP):
        m.record_remote("", f"remote-{i}", 1.0, 0)
    assert len(m) == CAP + 1
    quotas = ip_quotas()
    quotas.record_remote((), [(f"2001:db8::{i:x}", 1) for i in range(3 * CAP)], 0)
    assert quotas.tracked_ips == CAP + 1
