"""Idle tenants expire in bounded batches: a record never drops more than a few idle sensors (the request path is not
held while a million of them expire), the housekeeping drops them a batch at a time until none is left, and the
producer-id cleanup looks at a slice of the users per call, going on where it stopped. Manual clock, no sleeping."""

from quota.managers.client_quota import ClientQuotaManager
from quota.managers.producer_ids import ProducerIdQuotaManager
from quota.primitives.clock import ManualClock
from quota.primitives.entity import DEFAULT, PRODUCER_BYTE_RATE
from quota.primitives.quota_table import QuotaTable
from quota.primitives.sensor_keeper import RECORD_EXPIRY_BATCH

HOUR_MS = 3_600_000


def many_idle(n: int) -> tuple[ClientQuotaManager, ManualClock]:
    clock = ManualClock()
    m = ClientQuotaManager(
        QuotaTable.from_values([({"client-id": DEFAULT}, {PRODUCER_BYTE_RATE: 1000})]), PRODUCER_BYTE_RATE, clock
    )
    for i in range(n):
        m.record_and_decide("", f"c-{i}", 1)
    clock.advance(HOUR_MS + 1)
    return m, clock


def test_a_record_drops_a_few_idle_sensors_not_all_of_them():
    m, _ = many_idle(1000)
    m.record_and_decide("", "new", 1)
    assert len(m) == 1000 + 1 - RECORD_EXPIRY_BATCH  # the new one made, the two oldest dropped
    for i in range(10):
        m.record_and_decide("", f"newer-{i}", 1)
    assert len(m) == 1000 + 11 - 11 * RECORD_EXPIRY_BATCH  # records alone outpace what they make


def test_expiry_with_a_limit_drops_the_oldest_batch_by_batch_until_none_is_left():
    m, _ = many_idle(1000)
    batches = []
    while dropped := m.expire_idle_sensors(limit=300):
        batches.append(dropped)
    assert batches == [300, 300, 300, 100] and len(m) == 0


def test_expiry_with_a_limit_keeps_the_active_ones():
    m, clock = many_idle(10)
    m.record_and_decide("", "c-9", 1)  # active again: kept (it went to the back)
    assert m.expire_idle_sensors(limit=100) == 10 - 1 - RECORD_EXPIRY_BATCH
    assert [s.tags.client_id for s in m.stats()] == ["c-9"]


def test_producer_id_cleanup_with_a_limit_sweeps_every_user_over_several_calls():
    table = QuotaTable.from_values([({"user": DEFAULT}, {"producer_ids_rate": 5})])
    m = ProducerIdQuotaManager(table, window_num=1, window_size_s=3600, expected_pids=100)
    for i in range(250):
        m.record_and_decide(f"user-{i}", 7, 0)
    assert [m.cleanup(HOUR_MS - 1, limit=100) for _ in range(3)] == [0, 0, 0] and len(m) == 250  # not yet
    dropped = [m.cleanup(HOUR_MS, limit=100) for _ in range(3)]
    assert dropped == [100, 100, 50] and len(m) == 0
    m.record_and_decide("user-x", 7, HOUR_MS)
    assert m.cleanup(2 * HOUR_MS, limit=100) == 1  # a new pass takes users made since


def test_tables_are_compacted_once_most_of_their_tenants_expired():
    """A dict keeps the room of the entries deleted from it: after most tenants expired, the manager's tables are
    new ones (the room returned), holding the same tenants in the same order."""
    m, clock = many_idle(1000)
    for i in range(30):
        m.record_and_decide("", f"c-{i}", 1)  # 30 active again (each record also drops 2 idle ones)
    table = m.keeper.by_tags
    while m.expire_idle_sensors(limit=100):
        pass
    assert m.keeper.by_tags is not table  # 30 left of 1,000: a sixteenth or less
    assert [tags.client_id for tags in m.keeper.by_tags] == [f"c-{i}" for i in range(30)]
    clock.advance(
        HOUR_MS // 120
    )  # a record moves its sensor back at most once per step (quota.primitives.sensor_table)
    m.record_and_decide("", "c-0", 1)
    assert [tags.client_id for tags in m.keeper.by_tags][-1] == "c-0"  # the order (oldest first) still kept
    table = m.keeper.by_tags
    assert m.expire_idle_sensors(limit=100) == 0 and m.keeper.by_tags is table  # nothing dropped: not copied


def test_producer_id_users_are_compacted_once_most_were_dropped():
    table = QuotaTable.from_values([({"user": DEFAULT}, {"producer_ids_rate": 5})])
    m = ProducerIdQuotaManager(table, window_num=1, window_size_s=3600, expected_pids=100)
    for i in range(320):
        m.record_and_decide(f"user-{i}", 7, 0)
    m.cleanup(0)  # the high mark: 320
    for i in range(10):
        m.record_and_decide(f"user-{i}", 8, HOUR_MS - 1)  # 10 users active again
    users = m._users
    assert m.cleanup(HOUR_MS) == 310 and len(m) == 10
    assert m._users is not users and sorted(s.tags.user for s in m.stats(HOUR_MS)) == sorted(
        f"user-{i}" for i in range(10)
    )
