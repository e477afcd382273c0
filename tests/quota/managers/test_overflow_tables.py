"""The cap on tracked entities (``quota.max.tracked.entities``, issue 35) beyond the byte-rate sensors: the producer-id
quota's users, the mutation quota's buckets and the per-IP connection rates. Each evicts as the byte-rate sensors do
(issue 44): producer-id users (they shared one ``<overflow>`` state, the flood's), mutation buckets (a bucket made in
a full table starting empty) and IP rates (one connection, then the rate). The tables stay at the cap, and a named entity is always tracked. Pure, with fake clocks."""

from __future__ import annotations

from quota.managers.connection import ADMIT, Admit, ConnectionLimits, ConnectionQuotas
from quota.managers.connection import Hold as ConnectionHold
from quota.managers.mutation import ControllerMutationQuotaManager
from quota.managers.producer_ids import HOLD, Hold, ProducerIdQuotaManager, Refuse
from quota.primitives.clock import ManualClock
from quota.primitives.decision import FORWARD
from quota.primitives.overflow import OVERFLOW
from quota.primitives.quota_table import QuotaTable
from quota.primitives.rate import QuotaWindow
from quota.sharing.usage_share import UsageTap

CAP = 100


def producer_ids(cap=CAP, **quotas):
    table = QuotaTable.from_values(
        [({"user": "<default>"}, {"producer_ids_rate": 2})]
        + [({"user": u}, {"producer_ids_rate": r}) for u, r in quotas.items()]
    )
    return ProducerIdQuotaManager(
        table, window_num=1, window_size_s=10, enforcement=HOLD, max_hold_ms=6_000, max_tracked_entities=cap
    )


def test_rotating_users_keep_the_producer_id_table_at_the_cap():
    m = producer_ids()
    for i in range(20 * CAP):
        m.record_and_decide(f"rotating-{i}", i, i)
    assert len(m) == CAP  # room made by evicting: no shared <overflow> state any more
    assert m.overflowed == 19 * CAP
    assert OVERFLOW not in {s.tags.user for s in m.stats(20 * CAP)}


def test_users_made_in_a_full_table_get_one_id_at_once_then_their_own_rate():
    """2 new ids per 10 s (0.2/s), holds of at most 6 s. Past the cap a flood user used to count in the one
    <overflow> state the whole flood shared. Now each has its own bucket, made with one token and no burst: its
    first id goes through, its second is held 5 s (its rate), its third would wait 10 s and is refused; a flood of
    users thus gains one id per user, never a burst each. Tracked and named users keep their own buckets."""
    m = producer_ids(named=50)
    for i in range(CAP):
        assert m.record_and_decide(f"tenant-{i}", 1, 0) is FORWARD
    for i in range(10):
        assert m.record_and_decide(f"flood-{i}", 1000 + i, 0) is FORWARD
        held = m.record_and_decide(f"flood-{i}", 2000 + i, 0)
        assert isinstance(held, Hold) and held.until_ms == 5000
        assert isinstance(m.record_and_decide(f"flood-{i}", 3000 + i, 0), Refuse)
    assert m.record_and_decide("named", 5, 0) is FORWARD  # named in the quotas: always tracked
    assert m.record_and_decide("named", 6, 0) is FORWARD  # with its own burst (50 x 1)
    assert len(m) == CAP + 1 and m.overflowed == 10


def test_a_user_in_use_is_evicted_after_the_one_off_users_of_a_flood():
    """A user asked about since it was made (or last moved) gets a second chance: a flood's one-off users go first,
    so a tenant producing all along keeps its cache (its known ids are not counted again) and its bucket."""
    m = producer_ids()
    assert m.record_and_decide("steady", 7, 0) is FORWARD
    for i in range(CAP - 1):
        m.record_and_decide(f"tenant-{i}", 1, 0)
    for t in range(1, 5 * CAP):
        assert m.record_and_decide("steady", 7, t) is FORWARD  # its one producer, known
        m.record_and_decide(f"flood-{t}", t, t)
    steady = next(s for s in m.stats(5 * CAP) if s.tags.user == "steady")
    assert steady.new_pids_total == 1 and len(m) == CAP


def test_an_evicted_user_comes_back_owing_what_it_used():
    """A user that spent its burst and is pushed out by a flood owes, when made again, what its bucket still lacked:
    being evicted gives no fresh burst. (2 ids per 10 s: spent at 0, it lacks 2 tokens, paid off at 10 s.)"""
    m = producer_ids()
    assert m.record_and_decide("spender", 1, 0) is FORWARD
    assert m.record_and_decide("spender", 2, 0) is FORWARD
    for i in range(2 * CAP):
        m.record_and_decide(f"flood-{i}", 1000 + i, 1)
    assert "spender" not in {s.tags.user for s in m.stats(1)}
    back = m.record_and_decide("spender", 3, 1000)  # 1 s later: 0.2 refilled of the 2 it lacked
    assert isinstance(back, Hold) and back.until_ms == 5000  # as if never evicted: a token is 5 s away (at 0.2/s)


def test_a_user_holding_an_id_is_not_evicted_and_its_abandon_gives_its_own_token_back():
    m = producer_ids()
    for i in range(CAP - 1):
        m.record_and_decide(f"tenant-{i}", 1, 0)
    m.record_and_decide("holder", 11, 0)
    m.record_and_decide("holder", 12, 0)
    hold = m.record_and_decide("holder", 13, 0)
    assert isinstance(hold, Hold)
    for i in range(3 * CAP):
        m.record_and_decide(f"flood-{i}", 1000 + i, 0)
    assert "holder" in {s.tags.user for s in m.stats(0)}
    m.abandon(hold, 13, 100)
    holder = next(s for s in m.stats(100) if s.tags.user == "holder")
    assert holder.abandoned_count == 1 and holder.tokens > -0.5


def test_a_newcomers_ids_are_admitted_as_its_own_bucket_allows_while_a_flood_of_users_fills_the_table():
    """T4's attack on the producer-id table: under {user: <default>} producer_ids_rate 10 per 10 s window (1/s, burst
    10), 2,400 users each bring a new id into a 2,000-user table, and 100 more come every second. A newcomer
    starting a new idempotent producer every second for 30 s has every one admitted (forwarded, or held 1 s at
    most), its own quota: sharing the flood's <overflow> bucket (1 id a second for the whole flood) it had almost
    all of them refused."""
    table = QuotaTable.from_values([({"user": "<default>"}, {"producer_ids_rate": 10})])
    m = ProducerIdQuotaManager(
        table, window_num=1, window_size_s=10, enforcement=HOLD, max_hold_ms=1_000, max_tracked_entities=2_000
    )
    now = 0
    for i in range(2_400):
        m.record_and_decide(f"flood-{i}", i, now)
        now += 1 if i % 10 == 0 else 0
    flood, outcomes = 2_400, []
    for tick in range(30):
        for _ in range(100):
            m.record_and_decide(f"flood-{flood}", flood, now)
            flood += 1
        outcome = m.record_and_decide("newcomer", 100 + tick, now)
        outcomes.append(outcome is FORWARD or (isinstance(outcome, Hold) and outcome.until_ms - now <= 1000))
        now += 1000
    assert all(outcomes), outcomes
    assert len(m) == 2_000


def test_peers_users_past_the_cap_keep_the_producer_id_table_at_the_cap():
    m = producer_ids()
    m.tap = UsageTap()
    for i in range(3 * CAP):
        m.record_remote(f"remote-{i}", 1, (i,), 0)
    assert len(m) == CAP


def mutations(cap=CAP):
    table = QuotaTable.from_values([({"client-id": "<default>"}, {"controller_mutation_rate": 1})])
    return ControllerMutationQuotaManager(table, ManualClock(0), QuotaWindow(2, 1), max_tracked_entities=cap)


def test_rotating_client_ids_keep_the_mutation_buckets_at_the_cap_and_get_no_burst():
    """1 mutation/s, a burst of 2. Before the cap, every new client id had a full bucket of its own: creating topics
    under a fresh client id each time was never throttled. Past it, a new id's bucket starts empty: its first topic
    is admitted (a bucket at 0 admits one), which leaves it in debt, and rotating ids gains nothing more."""
    m = mutations()
    for i in range(CAP):
        assert m.admit("", f"tenant-{i}", [1]).all_admitted
    floods = [m.admit("", f"flood-{i}", [1, 1]) for i in range(50)]
    assert all(f.admitted == (True, False) for f in floods)  # one each, from an empty bucket, never two
    assert len(m) == CAP and m.overflowed == 50


def test_a_newcomers_creates_are_admitted_as_its_own_bucket_allows_while_empty_creates_fill_the_table():
    """T4 at scale: under {client-id: <default>} controller_mutation_rate 10/s (burst 50 with 5 x 1 s windows),
    CreateTopics with no topics under a new client id each fill a 10,000-bucket table; one 300-partition create
    under one more new id puts that bucket 300 in debt. A newcomer then creating a 1-partition topic every 50 ms
    for 15 s has them admitted as its own bucket allows: its rate, 10/s, about 150 (it got none: the shared
    <overflow> bucket was 139 s in debt)."""
    clock = ManualClock(0)
    table = QuotaTable.from_values([({"client-id": "<default>"}, {"controller_mutation_rate": 10})])
    m = ControllerMutationQuotaManager(table, clock, QuotaWindow(5, 1), max_tracked_entities=10_000)
    for i in range(12_000):
        assert m.admit("", f"empty-{i}", []).all_admitted
        clock.advance(1) if i % 10 == 0 else None
    assert not m.admit("", "big", [300, 1]).all_admitted  # the 300 are admitted, the next topic is not
    created = 0
    for _ in range(300):
        for i in range(5):  # the flood goes on meanwhile
            m.admit("", f"more-empty-{clock.now_ms()}-{i}", [])
        created += m.admit("", "newcomer", [1]).all_admitted
        clock.advance(50)
    assert 140 <= created <= 160, created
    assert len(m) == 10_000


def test_a_refund_goes_back_to_the_clients_own_bucket():
    m = mutations()
    for i in range(CAP):
        m.admit("", f"tenant-{i}", [1])
    m.admit("", "flood-0", [2])
    before = m.tokens("", "flood-0")
    m.refund("", "flood-0", 2)
    assert m.tokens("", "flood-0") == before + 2


def ip_quotas(cap=CAP):
    limits = ConnectionLimits(ip_rates={"<default>": 1.0, "10.9.9.9": 1000.0})
    quotas = ConnectionQuotas(["L"], QuotaWindow(2, 1), limits)
    quotas.max_tracked_entities = cap
    return quotas


def test_rotating_ips_keep_the_ip_rates_at_the_cap_and_gain_no_allowance():
    """IPv6 gives a tenant 2^64 addresses per prefix: each new one had a rate (and a fresh allowance) for an hour.
    Past the cap a new address starts at its limit: one connection now, then its rate (1/s here)."""
    quotas = ip_quotas()
    for i in range(CAP):
        assert isinstance(quotas.admit("L", f"2001:db8::{i:x}", 0), Admit)
    firsts = [quotas.admit("L", f"2001:db8::1:{i:x}", 0) for i in range(50)]
    seconds = [quotas.admit("L", f"2001:db8::1:{i:x}", 0) for i in range(40, 50)]
    assert all(o is ADMIT for o in firsts) and not any(o is ADMIT for o in seconds)
    assert quotas.tracked_ips == CAP and quotas.overflowed == 50
    assert isinstance(quotas.admit("L", "10.9.9.9", 0), Admit)  # named: always tracked, beyond the cap
    assert quotas.tracked_ips == CAP + 1


def test_a_new_address_is_served_at_its_rate_while_a_flood_of_addresses_keeps_the_table_full():
    """T6 at scale: {ip: <default>} connection_creation_rate 5/s (11 x 1 s windows); 2,000 addresses a second, each
    connecting once, keep a 5,000-rate table full and turning over; a new address connecting 4 times a second for
    15 s is served every time (it got 4 of 15 served sharing the flood's <overflow> rate)."""
    clock = ManualClock(0)
    quotas = ConnectionQuotas(["L"], QuotaWindow(11, 1), ConnectionLimits(ip_rates={"<default>": 5.0}))
    quotas.max_tracked_entities = 5_000
    flood = 0
    for _ in range(5_000):
        quotas.admit("L", f"10.1.{flood // 250}.{flood % 250}", clock.now_ms())
        flood += 1
    served = []
    for tick in range(15 * 1000):
        if tick % 2 == 0:  # 2 a millisecond: 2,000/s
            for _ in range(2):
                ip = f"2001:db8::{flood:x}"
                quotas.admit("L", ip, clock.now_ms())
                quotas.closed("L", ip) if ip in quotas.per_ip else None
                flood += 1
        if tick % 250 == 0:
            outcome = quotas.admit("L", "192.0.2.7", clock.now_ms())
            if isinstance(outcome, ConnectionHold):
                clock.advance(outcome.delay_ms)
                outcome = quotas.retry("L", "192.0.2.7", clock.now_ms())
            served.append(outcome is ADMIT)
            quotas.closed("L", "192.0.2.7") if outcome is ADMIT else None
        clock.advance(1)
    assert all(served) and len(served) == 60, served
    assert quotas.tracked_ips == 5_000


def test_peers_usage_past_the_cap_keeps_the_tables_at_the_cap():
    """A proxy that serves none of the flood still records its peers' usage: the same caps hold for it."""
    m = mutations()
    for i in range(3 * CAP):
        m.record_remote("", f"remote-{i}", 1.0, 0)
    assert len(m) == CAP
    quotas = ip_quotas()
    quotas.record_remote((), [(f"2001:db8::{i:x}", 1) for i in range(3 * CAP)], 0)
    assert quotas.tracked_ips == CAP
