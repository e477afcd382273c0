"""One quota state across processes (quota.sharing.usage_share, quota.sharing.remote_usage): what a process gathers between syncs,
its encoding, and a peer's usage recorded as remote usage, with fake clocks. Two managers stand for two workers;
one manager that saw everything stands for the single process whose decisions they must reproduce."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from quota.managers.client_quota import ClientQuotaManager
from quota.managers.connection import Admit, ConnectionLimits, ConnectionQuotas, Hold
from quota.managers.mutation import ControllerMutationQuotaManager
from quota.managers.producer_ids import ProducerIdQuotaManager
from quota.primitives.clock import ManualClock
from quota.primitives.decision import FORWARD
from quota.primitives.entity import PRODUCER_BYTE_RATE
from quota.primitives.quota_table import QuotaTable
from quota.primitives.rate import QuotaWindow
from quota.sharing.remote_usage import record_remote
from quota.sharing.usage_delta import MAX_PRODUCER_IDS_PER_USER, UsageDelta
from quota.sharing.usage_encoding import UsageDeltaError, decode, encode
from quota.sharing.usage_share import UsageTap

WINDOW = QuotaWindow(11, 1)


def produce_manager(clock, rate=1000):
    table = QuotaTable.from_values([({"user": "<default>"}, {PRODUCER_BYTE_RATE: rate})])
    return ClientQuotaManager(table, PRODUCER_BYTE_RATE, clock, WINDOW)


def tapped(manager):
    manager.tap = UsageTap()
    return manager


def test_a_delta_survives_its_encoding_and_a_bad_one_names_the_field():
    delta = UsageDelta(
        "w1",
        scope="3",
        produce=(("alice", "etl", 1234.5),),
        fetch=(("bob", "", 10.0),),
        mutations=(("alice", "admin", -2.0),),
        producer_ids=(("alice", 3, (7, 2**62)),),
        listeners=(("PLAINTEXT", 4),),
        ips=(("10.0.0.1", 2),),
    )
    assert decode(encode(delta)) == delta
    assert decode(encode(UsageDelta("w2"))).empty
    assert decode(encode(delta, compress=True)) == delta
    bad = encode(delta).replace(b"[1234.5]", b'["x"]')
    with pytest.raises(UsageDeltaError, match=r"produce\[2\]\[0\]: expected a finite number"):
        decode(bad)
    with pytest.raises(UsageDeltaError, match=r"\.scope: expected a string"):
        decode(b'{"v":2,"source":"w","scope":3}')
    with pytest.raises(UsageDeltaError, match=r"\.v: expected 2"):
        decode(b'{"v":9,"source":"w"}')
    with pytest.raises(UsageDeltaError, match="not JSON"):
        decode(b"\xff")


def test_after_each_sync_both_processes_measure_the_rate_one_process_would():
    clock = ManualClock(1_000_000)
    one = produce_manager(clock)  # saw everything
    a, b = tapped(produce_manager(clock)), tapped(produce_manager(clock))
    throttled = {"one": 0, "shared": 0}
    for step in range(40):  # each process gets half the tenant's requests; a sync every 100 ms
        worker = a if step % 2 == 0 else b
        throttled["shared"] += worker.record_and_get_throttle_time_ms("alice", "p1", 600) > 0
        throttled["one"] += one.record_and_get_throttle_time_ms("alice", "p1", 600) > 0
        if step % 2 == 1:
            clock.advance(100)
            now = clock.now_ms()
            da, db = a.tap.take("a"), b.tap.take("b")
            b.record_remote(*da.produce[0], now)
            a.record_remote(*db.produce[0], now)
            expected = one.stats_for("alice", "p1", now).rate
            assert a.stats_for("alice", "p1", now).rate == pytest.approx(expected)
            assert b.stats_for("alice", "p1", now).rate == pytest.approx(expected)
    assert throttled["one"] > 0 and abs(throttled["shared"] - throttled["one"]) <= 2  # lagging one sync at most
    # per-process totals add up to what the tenant sent: remote usage is not counted twice
    assert a.stats_for("alice", "p1").value_total + b.stats_for("alice", "p1").value_total == 40 * 600


def test_a_tenant_over_its_quota_in_total_but_under_it_in_each_process_is_throttled_only_when_shared():
    clock = ManualClock(0)
    alone = [produce_manager(clock), produce_manager(clock)]
    shared = [tapped(produce_manager(clock)), tapped(produce_manager(clock))]
    throttled_alone = throttled_shared = 0
    for _ in range(300):  # 700 B/s through each process, 1400 B/s in all, against 1000 B/s
        for i in (0, 1):
            throttled_alone += alone[i].record_and_get_throttle_time_ms("alice", "p", 70) > 0
            throttled_shared += shared[i].record_and_get_throttle_time_ms("alice", "p", 70) > 0
        clock.advance(100)
        d0, d1 = shared[0].tap.take("0"), shared[1].tap.take("1")
        shared[1].record_remote(*d0.produce[0], clock.now_ms())
        shared[0].record_remote(*d1.produce[0], clock.now_ms())
    assert throttled_alone == 0
    assert throttled_shared > 0


def test_remote_usage_alone_throttles_no_one_and_an_unlimited_entity_is_not_recorded():
    clock = ManualClock(0)
    b = tapped(produce_manager(clock))
    b.record_remote("alice", "p", 10**9, 0)
    assert b.stats_for("alice", "p").value_total == 0
    assert b.tap.take("b").empty  # a peer's usage is never sent on again
    assert b.record_and_get_throttle_time_ms("alice", "p", 1) > 0  # the next local record pays for the total
    unlimited = ClientQuotaManager(
        QuotaTable.from_values([({"user": "x"}, {PRODUCER_BYTE_RATE: 1})]), PRODUCER_BYTE_RATE, clock, WINDOW
    )
    unlimited.record_remote("alice", "p", 10**9, 0)
    assert len(unlimited) == 0


def test_the_tap_sends_only_what_came_of_something_once():
    clock = ManualClock(0)
    a = tapped(produce_manager(clock))
    a.record_no_throttle("alice", "p", 100)
    a.unrecord("alice", "p", 100)  # a throttled fetch taken back: nothing net
    a.record_no_throttle("bob", "p", 5)
    delta = a.tap.take("a")
    assert delta.produce == (("bob", "", 5),)
    assert a.tap.take("a").empty


def test_mutation_tokens_and_refunds_reach_the_peers_bucket():
    clock = ManualClock(0)
    table = QuotaTable.from_values([({"user": "<default>"}, {"controller_mutation_rate": 1})])
    a = tapped(ControllerMutationQuotaManager(table, clock, QuotaWindow(10, 1)))
    b = tapped(ControllerMutationQuotaManager(table, clock, QuotaWindow(10, 1)))
    assert a.admit("alice", "admin", [8]).all_admitted
    a.refund("alice", "admin", 3)
    delta = a.tap.take("a")
    assert delta.mutations == (("alice", "", 5),)  # by its tags: alice's every client
    record_remote(
        delta,
        0,
        produce=produce_manager(clock),
        fetch=produce_manager(clock),
        mutations=b,
        producer_ids=ProducerIdQuotaManager(table),
        connections=ConnectionQuotas([], WINDOW),
    )
    assert b.tokens("alice", "admin", 0) == a.tokens("alice", "admin", 0) == 5
    assert b.admit("alice", "admin", [6, 1]).admitted == (True, False)  # b's own client finds what a left
    b.record_remote("alice", "", -2, 0, peer="a")  # a's net refund is given back (a charged 5), never above the burst
    assert b.tokens("alice", "admin", 0) == 1


def test_a_peers_new_producer_ids_take_tokens_and_are_known():
    table = QuotaTable.from_values([({"user": "alice"}, {"producer_ids_rate": 3})])
    a = tapped(ProducerIdQuotaManager(table, window_num=1, window_size_s=3600))
    b = tapped(ProducerIdQuotaManager(table, window_num=1, window_size_s=3600))
    assert a.record_and_decide("alice", 11, 0) is FORWARD
    assert a.record_and_decide("alice", 12, 0) is FORWARD
    delta = a.tap.take("a")
    assert delta.producer_ids == (("alice", 2, (11, 12)),)
    b.record_remote("alice", 2, (11, 12), 0)
    assert b.record_and_decide("alice", 11, 1) is FORWARD  # known: not counted again
    assert b.new_pids_counted == 0
    assert b.record_and_decide("alice", 13, 1) is FORWARD  # the third and last token
    assert b.record_and_decide("alice", 14, 1) is not FORWARD  # the bucket is the tenant's, not b's alone


def test_the_ids_sent_per_user_are_bounded_and_the_count_is_not():
    tap = UsageTap()
    for pid in range(MAX_PRODUCER_IDS_PER_USER + 10):
        tap.producer_id("alice", pid)
    [(user, count, ids)] = tap.take("a").producer_ids
    assert (user, count, len(ids)) == ("alice", MAX_PRODUCER_IDS_PER_USER + 10, MAX_PRODUCER_IDS_PER_USER)


def test_connections_accepted_by_a_peer_count_in_the_ip_rate():
    limits = ConnectionLimits(ip_rates=MappingProxyType({"10.0.0.1": 2.0}))
    a, b = ConnectionQuotas(["L"], QuotaWindow(2, 1), limits), ConnectionQuotas(["L"], QuotaWindow(2, 1), limits)
    a.tap = UsageTap()
    for _ in range(2):
        a.accept_delay_ms("L", 0)
        assert isinstance(a.admit("L", "10.0.0.1", 0), Admit)
    delta = a.tap.take("a")
    assert delta.listeners == (("L", 2),) and delta.ips == (("10.0.0.1", 2),)
    b.accept_delay_ms("L", 0)
    assert isinstance(b.admit("L", "10.0.0.1", 0), Admit)  # alone, b would admit
    b.record_remote(delta.listeners, delta.ips, 0)
    assert b.listener_accept_rate("L", 0) == a.listener_accept_rate("L", 0) + 1  # 3 in the least elapsed 1 s, not 2
    b.accept_delay_ms("L", 0)
    assert isinstance(b.admit("L", "10.0.0.1", 0), Hold)  # with a's connections it is over


def test_a_hold_abandoned_on_one_worker_gives_the_token_back_on_its_peers_too():
    """Worker a holds alice's new id 13 (hold enforcement, burst 2): its peer b takes the token too. The client
    leaves while held: a releases the hold, and the next sync gives b the token back (a count of -1)."""
    from quota.managers.producer_ids import HOLD, Hold

    table = QuotaTable.from_values([({"user": "alice"}, {"producer_ids_rate": 2})])
    a = tapped(ProducerIdQuotaManager(table, window_num=1, window_size_s=10, enforcement=HOLD))
    b = tapped(ProducerIdQuotaManager(table, window_num=1, window_size_s=10, enforcement=HOLD))
    for pid in (11, 12):
        assert a.record_and_decide("alice", pid, 0) is FORWARD
    hold = a.record_and_decide("alice", 13, 0)
    assert isinstance(hold, Hold)
    for _, count, ids in a.tap.take("a").producer_ids:
        b.record_remote("alice", count, ids, 0)
    assert b.stats(0)[0].tokens == -1
    a.abandon(hold, 13, 1_000)
    delta = a.tap.take("a")
    assert delta.producer_ids == (("alice", -1, ()),)
    assert decode(encode(delta)).producer_ids == delta.producer_ids
    for _, count, ids in delta.producer_ids:
        b.record_remote("alice", count, ids, 1_000)
    assert b.stats(1_000)[0].tokens == pytest.approx(0.2) and a.stats(1_000)[0].tokens == pytest.approx(0.2)


def test_a_hold_abandoned_within_one_sync_is_not_sent_at_all():
    tap = UsageTap()
    tap.producer_id_held("alice")
    tap.producer_id_released("alice", 13)
    assert tap.take("a").producer_ids == ()


def test_an_entity_with_much_unsent_usage_asks_for_a_sync_once_until_the_next():
    woken = []
    clock = ManualClock(0)
    a = produce_manager(clock)  # 1000 B/s: past 50 B unsent (EAGER_SHARE of it) the tap wakes its owner
    a.tap = UsageTap(lambda: woken.append(clock.now_ms()))
    a.record_no_throttle("alice", "p", 40)
    assert woken == []
    a.record_no_throttle("alice", "p", 20)
    a.record_no_throttle("alice", "p", 20)
    assert woken == [0]  # once, however much more comes before the sync
    a.tap.take("a")
    a.record_no_throttle("alice", "p", 60)
    assert woken == [0, 0]
    unlimited = ClientQuotaManager(
        QuotaTable.from_values([({"user": "x"}, {PRODUCER_BYTE_RATE: 1})]), PRODUCER_BYTE_RATE, clock, WINDOW
    )
    unlimited.tap = UsageTap(lambda: woken.append("unlimited"))
    unlimited.record_no_throttle("alice", "p", 10**9)
    assert "unlimited" not in woken


def test_an_entity_without_a_quota_costs_the_sync_nothing():
    """Only entities with a quota are shared: alice has one, bob (no entry applies to him) is counted for his
    metrics only."""
    clock = ManualClock(0)
    table = QuotaTable.from_values([({"user": "alice"}, {PRODUCER_BYTE_RATE: 1000})])
    a = tapped(ClientQuotaManager(table, PRODUCER_BYTE_RATE, clock, WINDOW))
    a.record_and_get_throttle_time_ms("alice", "p", 10)
    a.record_and_get_throttle_time_ms("bob", "p", 10**6)
    a.record_no_throttle("bob", "p", 10)
    assert a.stats_for("bob", "p").value_total == 10**6 + 10
    assert a.tap.take("a").produce == (("alice", "", 10),)


def test_usage_travels_under_its_tags_and_lands_in_the_receivers_sensor_of_the_same_entry():
    """alice's etl client has an entry of its own; her other clients share /users/<default>'s sensor (tags
    ("alice", "")). Whichever client a sender saw, the receiver counts it where its own clients of that entry are."""
    clock = ManualClock(0)
    table = QuotaTable.from_values(
        [
            ({"user": "<default>"}, {PRODUCER_BYTE_RATE: 1000}),
            ({"user": "alice", "client-id": "etl"}, {PRODUCER_BYTE_RATE: 5000}),
        ]
    )
    a = tapped(ClientQuotaManager(table, PRODUCER_BYTE_RATE, clock, WINDOW))
    b = ClientQuotaManager(table, PRODUCER_BYTE_RATE, clock, WINDOW)
    a.record_no_throttle("alice", "web", 300)
    a.record_no_throttle("alice", "cli", 200)
    a.record_no_throttle("alice", "etl", 4000)
    delta = a.tap.take("a")
    assert sorted(delta.produce) == [("alice", "", 500), ("alice", "etl", 4000)]
    for row in decode(encode(delta, compress=True)).produce:
        b.record_remote(*row, 0)
    clock.advance(1000)
    assert b.stats_for("alice", "mobile").rate == a.stats_for("alice", "web").rate
    assert b.stats_for("alice", "etl").rate == a.stats_for("alice", "etl").rate
    assert len(b) == 2
