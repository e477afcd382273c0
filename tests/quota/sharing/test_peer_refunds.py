"""A peer gives back at most what it charged (issue 44, T8): mutation refunds (KIP-599) and producer ids given back
(an abandoned hold) travel as negative usage, which a record written straight to the usage topic could make as large
as it liked. Pure: the records are encoded and decoded as they travel; fake clocks."""

from __future__ import annotations

from quota.managers.client_quota import ClientQuotaManager
from quota.managers.connection import ConnectionLimits, ConnectionQuotas
from quota.managers.mutation import ControllerMutationQuotaManager
from quota.managers.producer_ids import HOLD, ProducerIdQuotaManager, Refuse
from quota.primitives.clock import ManualClock
from quota.primitives.decision import FORWARD
from quota.primitives.entity import PRODUCER_BYTE_RATE
from quota.primitives.peer_refunds import PeerRefunds
from quota.primitives.quota_table import QuotaTable
from quota.primitives.rate import QuotaWindow
from quota.sharing.remote_usage import record_remote
from quota.sharing.usage_delta import UsageDelta
from quota.sharing.usage_encoding import decode, encode
from quota.sharing.usage_share import UsageTap


def test_a_refund_is_cut_to_what_the_peer_charged_within_the_reach():
    refunds = PeerRefunds(reach_ms=1000)
    assert refunds.judge("a", "bob", 5.0, 0) == 5.0
    assert refunds.judge("a", "bob", -3.0, 100) == -3.0
    assert refunds.judge("a", "bob", -3.0, 200) == -2.0  # 2 left of the 5 it charged
    assert refunds.judge("b", "bob", -1.0, 200) == 0.0  # another peer charged nothing
    assert refunds.judge("a", "alice", -1.0, 200) == 0.0  # nor did it charge another entity
    assert refunds.refused == 3.0 and refunds.refused_records == 3
    refunds.judge("a", "bob", 4.0, 300)
    assert refunds.judge("a", "bob", -4.0, 1900) == -4.0  # within one to two reaches: still given back
    refunds.judge("a", "bob", 4.0, 2000)
    assert refunds.judge("a", "bob", -4.0, 4100) == 0.0  # past two reaches: forgotten, refused
    assert len(refunds) == 0


def test_charges_remembered_are_bounded_and_a_refund_of_one_forgotten_is_refused():
    refunds = PeerRefunds(reach_ms=1000, max_entries=3)
    for i in range(10):
        refunds.judge("a", i, 1.0, 0)
    assert len(refunds) == 3
    assert refunds.judge("a", 2, -1.0, 0) == -1.0 and refunds.judge("a", 7, -1.0, 0) == 0.0


def mutation_quotas(clock):
    table = QuotaTable.from_values([({"client-id": "<default>"}, {"controller_mutation_rate": 1})])
    return ControllerMutationQuotaManager(table, clock, QuotaWindow(2, 1))  # 1 a second, a burst of 2


def producer_id_quotas():
    table = QuotaTable.from_values([({"user": "<default>"}, {"producer_ids_rate": 2})])
    return ProducerIdQuotaManager(table, window_num=1, window_size_s=10, enforcement=HOLD, max_hold_ms=1_000)


def receive(delta: UsageDelta, now_ms: int, mutations, producer_ids) -> None:
    """A peer's record as a sidecar reads it off the usage topic: its bytes decoded, recorded."""
    clock = ManualClock(now_ms)
    table = QuotaTable.from_values([])
    record_remote(
        decode(encode(delta, compress=True)),
        now_ms,
        produce=ClientQuotaManager(table, PRODUCER_BYTE_RATE, clock),
        fetch=ClientQuotaManager(table, PRODUCER_BYTE_RATE, clock),
        mutations=mutations,
        producer_ids=producer_ids,
        connections=ConnectionQuotas(["L"], QuotaWindow(2, 1), ConnectionLimits()),
    )


def test_a_forged_mutation_refund_gives_a_tenant_no_tokens_it_did_not_spend_through_that_peer():
    """The direct-write attack: a tenant's creates leave its bucket 98 tokens in debt (throttled 98 s); a record
    written straight to the usage topic, from a made-up peer, gives back 1,000 tokens. It used to refill the bucket
    to its burst, and the tenant created again at once (written again and again: 5 x its quota); now it is refused,
    and a real peer's refund of what it charged still goes back."""
    clock = ManualClock(0)
    mutations, producer_ids = mutation_quotas(clock), producer_id_quotas()
    assert mutations.admit("", "tenant", [100]).all_admitted
    receive(UsageDelta("forger", mutations=(("", "tenant", -1000.0),)), 0, mutations, producer_ids)
    assert mutations.tokens("", "tenant") == -98
    assert not mutations.admit("", "tenant", [1]).all_admitted
    assert mutations.peer_refunds.refused == 1000.0
    receive(UsageDelta("peer-b", mutations=(("", "tenant", 10.0),)), 0, mutations, producer_ids)
    receive(UsageDelta("peer-b", mutations=(("", "tenant", -1000.0),)), 0, mutations, producer_ids)
    assert mutations.tokens("", "tenant") == -98  # its 10 charged, its 10 given back: no more
    assert mutations.peer_refunds.refused == 1990.0 and mutations.peer_refunds.refused_records == 2


def test_a_forged_producer_id_release_gives_a_user_no_new_ids():
    """A user that spent its 2 new ids is refused a third (its wait is past the 1 s hold bound); a made-up peer's
    record giving back 1,000 held ids used to refill its bucket; now the third is still refused."""
    clock = ManualClock(0)
    mutations, producer_ids = mutation_quotas(clock), producer_id_quotas()
    producer_ids.tap = UsageTap()
    assert producer_ids.record_and_decide("alice", 1, 0) is FORWARD
    assert producer_ids.record_and_decide("alice", 2, 0) is FORWARD
    receive(UsageDelta("forger", producer_ids=(("alice", -1000, ()),)), 0, mutations, producer_ids)
    assert isinstance(producer_ids.record_and_decide("alice", 3, 0), Refuse)
    receive(UsageDelta("peer-b", producer_ids=(("alice", 1, ()),)), 0, mutations, producer_ids)
    receive(UsageDelta("peer-b", producer_ids=(("alice", -1, ()),)), 0, mutations, producer_ids)  # its hold released
    assert producer_ids.peer_refunds.refused == 1000 and producer_ids.peer_refunds.refused_records == 1
