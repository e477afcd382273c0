"""A byte-rate quota's sensors stay bounded under rotating client ids (issue 35): past ``max_tracked_entities`` a new
entity is counted in its quota's one ``<overflow>`` sensor, local records and peers' usage alike; the tenants
already tracked keep their own. Pure, with a fake clock."""

from quota import DEFAULT, FORWARD, PRODUCER_BYTE_RATE, ClientQuotaManager, ManualClock, QuotaTable, QuotaTags, Throttle
from quota.primitives.overflow import OVERFLOW
from quota.sharing.usage_share import UsageTap

P = PRODUCER_BYTE_RATE
CAP = 100
HOUR_MS = 3_600_000


def manager(values, clock, cap=CAP) -> ClientQuotaManager:
    return ClientQuotaManager(QuotaTable.from_values(values), P, clock, max_tracked_entities=cap)


def clients_default(limit=1000):
    return [({"client-id": DEFAULT}, {P: limit})]


def test_rotating_client_ids_keep_the_table_at_the_cap():
    clock = ManualClock()
    m = manager(clients_default(), clock)
    for i in range(20 * CAP):
        m.record_and_decide("", f"rotating-{i}", 10)
        clock.advance(1)
    assert len(m) == CAP + 1  # the first CAP ids, and the one overflow sensor
    assert m.overflowed == 19 * CAP
    overflow = m.keeper.by_tags[QuotaTags("", OVERFLOW)]
    assert overflow.value_total == 19 * CAP * 10


def test_overflowing_ids_are_throttled_together_at_the_quota():
    # 1000 B/s, 11 x 1 s windows: a fresh entity may take about 10,000 B before it is throttled. Past the cap, 100
    # new ids of 500 B each (none of them over on its own) share one sensor: 50,000 B at once is throttled.
    clock = ManualClock()
    m = manager(clients_default(1000), clock)
    for i in range(CAP):
        assert m.record_and_decide("", f"tenant-{i}", 500) is FORWARD
    decisions = [m.record_and_decide("", f"flood-{i}", 500) for i in range(100)]
    assert decisions[0] is FORWARD
    assert isinstance(decisions[-1], Throttle) and decisions[-1].throttle_time_ms > 0
    assert sum(isinstance(d, Throttle) for d in decisions) >= 75
    # and a new id after them is held at once, as the flood is
    assert isinstance(m.record_and_decide("", "one-more", 1), Throttle)


def test_tracked_tenants_keep_their_own_sensors_and_budget_during_a_flood():
    clock = ManualClock()
    m = manager(clients_default(1000), clock)
    for i in range(CAP):
        m.record_and_decide("", f"tenant-{i}", 100)
    for i in range(10 * CAP):
        m.record_and_decide("", f"flood-{i}", 1000)
        clock.advance(1)
    for i in range(CAP):  # within quota on their own sensors, whatever the flood did
        assert m.record_and_decide("", f"tenant-{i}", 100) is FORWARD
        stats = m.stats_for("", f"tenant-{i}")
        assert stats.tags == QuotaTags("", f"tenant-{i}") and stats.value_total == 200
    assert len(m) == CAP + 1


def test_room_comes_back_as_idle_sensors_expire():
    clock = ManualClock()
    m = manager(clients_default(), clock)
    for i in range(2 * CAP):
        m.record_and_decide("", f"old-{i}", 10)
    clock.advance(HOUR_MS + 1)
    m.expire_idle_sensors()
    assert len(m) == 0
    m.record_and_decide("", "new", 10)
    assert m.stats_for("", "new").tags == QuotaTags("", "new")


def test_an_entity_the_quota_names_is_always_tracked():
    clock = ManualClock()
    m = manager(clients_default() + [({"client-id": "etl"}, {P: 5000})], clock)
    for i in range(CAP):
        m.record_and_decide("", f"tenant-{i}", 10)
    m.record_and_decide("", "etl", 10)
    assert m.stats_for("", "etl").tags == QuotaTags("", "etl")
    assert m.stats_for("", "etl").limit == 5000


def test_overflow_keeps_the_named_part_of_the_quota():
    # /users/alice/clients/<default>: alice's rotating ids overflow into (alice, <overflow>), bob's into his own
    clock = ManualClock()
    m = manager([({"user": "alice", "client-id": DEFAULT}, {P: 1000}),
                 ({"user": "bob", "client-id": DEFAULT}, {P: 1000})], clock, cap=10)
    for i in range(30):
        m.record_and_decide("alice", f"a-{i}", 10)
        m.record_and_decide("bob", f"b-{i}", 10)
    tags = set(m.keeper.by_tags)
    assert QuotaTags("alice", OVERFLOW) in tags and QuotaTags("bob", OVERFLOW) in tags
    assert len(m) == 12


def test_peers_usage_goes_through_the_same_cap():
    # A proxy that serves none of the traffic, receiving a peer's record of 10,000 rotating ids: bounded too.
    clock = ManualClock()
    m = manager(clients_default(1000), clock)
    n = 100 * CAP
    users, client_ids, values = [""] * n, [f"peer-{i}" for i in range(n)], [10] * n
    m.record_remote_rows(users, client_ids, values, clock.now_ms())
    assert len(m) == CAP + 1
    assert m.overflowed == n - CAP
    # the overflowed usage counts in the rate that throttles this proxy's own new clients
    assert isinstance(m.record_and_decide("", "local-new", 1), Throttle)
    # a peer's overflow sensor (named by its tags) lands in this one's, at any fill
    m.record_remote_rows([""], [OVERFLOW], [5], clock.now_ms())
    assert len(m) == CAP + 1


def test_usage_shared_with_peers_is_bounded_by_the_cap():
    clock = ManualClock()
    m = manager(clients_default(10**9), clock)
    m.tap = UsageTap()
    for i in range(50 * CAP):
        m.record_and_decide("", f"rotating-{i}", 10)
    gathered = m.tap.gather("me")
    assert gathered.entities == CAP + 1
    assert gathered.values[P][QuotaTags("", OVERFLOW)][2] == 49 * CAP * 10
