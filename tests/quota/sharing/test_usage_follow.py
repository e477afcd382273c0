"""A peer's usage record as a follower takes it (quota.sharing.remote_usage.record_remote_steps, ClientQuotaManager
.record_remote_rows, quota.sharing.usage_delta.Rows), with fake clocks: recorded in steps between turns of the event loop,
with known rows going straight to their sensor, it leaves every sensor as recording its rows one by one with
record_remote at the same times does; a change of the quota table makes every row resolve again; a decoded record
and a sync's rounding leave no object per row for the garbage collector."""

from __future__ import annotations

import gc

from quota.managers.client_quota import ClientQuotaManager
from quota.primitives.clock import ManualClock
from quota.primitives.entity import PRODUCER_BYTE_RATE, QuotaEntity, QuotaEntry
from quota.primitives.quota_table import QuotaTable
from quota.primitives.rate import QuotaWindow
from quota.sharing.remote_usage import record_remote_steps
from quota.sharing.usage_delta import Rows, UsageDelta
from quota.sharing.usage_encoding import decode, encode
from quota.sharing.usage_share import UsageTap

WINDOW = QuotaWindow(11, 1)
STEP_MS = 7  # the fake clock's advance between two steps (other work of the loop)
TABLE = QuotaTable.from_values(
    [
        ({"user": "<default>"}, {PRODUCER_BYTE_RATE: 1000}),
        ({"user": "bob", "client-id": "etl"}, {PRODUCER_BYTE_RATE: 300}),
    ]
)


def manager(clock, table=TABLE, smoothing=True) -> ClientQuotaManager:
    return ClientQuotaManager(table, PRODUCER_BYTE_RATE, clock, WINDOW, smoothing=smoothing)


def peer_record(n: int, seed: int) -> UsageDelta:
    """A peer's record of ``n`` tenants (and bob's etl), as the follower decodes it: rows named by their tags."""
    clock = ManualClock(0)
    sender = manager(clock)
    sender.tap = UsageTap()
    for i in range(n):
        sender.record_no_throttle(f"tenant-{i:05d}", f"app-{i}", 100 + (i * seed) % 977)
    sender.record_no_throttle("bob", "etl", 250 * seed)
    return decode(encode(sender.tap.take("peer"), compress=True))


class Counted:
    """How often a manager resolves a client (the cost the known rows skip)."""

    def __init__(self, target: ClientQuotaManager) -> None:
        self.n = 0
        resolve = target.keeper.resolve  # every resolve, the manager's own and its keeper's, goes through it

        def counting(user, client_id):
            self.n += 1
            return resolve(user, client_id)

        target.keeper.resolve = counting


def in_steps(receiver: ClientQuotaManager, clock: ManualClock, delta: UsageDelta, step: int) -> int:
    """As the follower does: a step at a time, the clock moving between steps; returns the steps taken."""
    steps = 0
    for _ in record_remote_steps(
        delta,
        clock.now_ms,
        produce=receiver,
        fetch=None,
        mutations=None,
        producer_ids=None,
        connections=None,
        step=step,
    ):
        steps += 1
        clock.advance(STEP_MS)
    return steps


def one_by_one(receiver: ClientQuotaManager, start_ms: int, delta: UsageDelta, step: int) -> None:
    """Each row with record_remote, at the time its step was recorded at."""
    for k, (user, client_id, value) in enumerate(delta.produce):
        receiver.record_remote(user, client_id, value, start_ms + STEP_MS * (k // step))


def state(receiver: ClientQuotaManager, now_ms: int) -> list:
    """Every sensor in the table's order: its stats (limit, rate, last record) and its bucket's headroom."""
    return [(stats, receiver.remaining_in_quota_window(*stats.tags, now_ms)) for stats in receiver.stats(now_ms)]


def test_a_record_taken_in_steps_leaves_every_sensor_as_recording_each_row_does_and_known_rows_skip_resolving():
    clock = ManualClock(1_000_000)  # the reference is given every time
    stepped, reference = manager(clock), manager(clock)
    counted = Counted(stepped)
    step = 100
    for sync, seed in enumerate((1, 3, 5, 7)):
        delta = peer_record(1234, seed)
        assert isinstance(delta.produce, Rows) and len(delta.produce) == 1235
        if sync == 3:  # a new table (bob's etl limit changed): every row resolves again, once
            table = TABLE.with_changes(
                {
                    QuotaEntity(user="bob", client_id="etl"): QuotaEntry(
                        QuotaEntity(user="bob", client_id="etl"), {PRODUCER_BYTE_RATE: 50}
                    )
                }
            )
            stepped.update_quotas(table)
            reference.update_quotas(table)
        counted.n = 0
        start = clock.now_ms()
        assert in_steps(stepped, clock, delta, step) == 13  # 12 steps of 100 rows, then the last 35
        one_by_one(reference, start, delta, step)
        now = clock.now_ms()
        assert state(stepped, now) == state(reference, now)
        assert counted.n == (1235 if sync in (0, 3) else 0)  # resolved when new, and after the table changed only
        assert stepped.record_and_get_throttle_time_ms(
            "tenant-00007", "x", 1, now
        ) == reference.record_and_get_throttle_time_ms("tenant-00007", "x", 1, now)
        clock.advance(1000)
    assert stepped.stats_for("bob", "etl").limit == 50


def test_a_row_whose_sensor_took_another_limit_since_resolves_again():
    """Two entries give the same tags (alice, ""): /users/alice for alice's clients, /users/alice/clients/"" for
    the client named "" (an entry naming the empty client id). A peer's row ("alice", "") is counted under the
    latter's limit every time, even when a local client of alice set the sensor to the former's in between; and a
    new /users/<default>/clients/"" entry, which reaches no sensor by its representative, still applies to a
    peer's row ("carol", "")."""
    table = QuotaTable.from_values(
        [
            ({"user": "<default>"}, {PRODUCER_BYTE_RATE: 1000}),
            ({"user": "alice"}, {PRODUCER_BYTE_RATE: 500}),
            ({"user": "alice", "client-id": ""}, {PRODUCER_BYTE_RATE: 100}),
        ]
    )
    clock = ManualClock(0)
    fast, slow = manager(clock, table, smoothing=False), manager(clock, table, smoothing=False)
    rows = Rows(["alice", "carol"], ["", ""], [40, 40])
    for receiver in (fast, slow):
        receiver.record_no_throttle("carol", "carol-app", 10, 0)  # carol's sensor, represented by her client
    for t in (0, 10, 20):
        fast.record_remote_rows(rows.users, rows.client_ids, rows.values, t)
        for user, client_id, value in rows:
            slow.record_remote(user, client_id, value, t)
        assert [s.limit for s in fast.stats(t)] == [s.limit for s in slow.stats(t)]
        assert fast.stats_for("alice", "").limit == 100
        for receiver in (fast, slow):
            receiver.record_no_throttle("alice", "app", 1, t)  # a local client: the sensor takes 500
        assert fast.stats_for("alice", "app").limit == 500
    changed = table.with_changes(
        {
            QuotaEntity(user="<default>", client_id=""): QuotaEntry(
                QuotaEntity(user="<default>", client_id=""), {PRODUCER_BYTE_RATE: 70}
            )
        }
    )
    fast.update_quotas(changed)
    slow.update_quotas(changed)
    fast.record_remote_rows(rows.users, rows.client_ids, rows.values, 30)
    for user, client_id, value in rows:
        slow.record_remote(user, client_id, value, 30)
    assert fast.stats_for("carol", "").limit == 70
    assert fast.stats(30) == slow.stats(30)


def tracked_objects_left_by(make) -> tuple[object, int]:
    """What ``make()`` returns, and how many more objects the cyclic garbage collector tracks while it is held."""
    gc.collect()
    before = len(gc.get_objects())
    made = make()
    gc.collect()
    return made, len(gc.get_objects()) - before


def test_a_decoded_record_and_a_syncs_rounding_leave_no_object_per_row_for_the_garbage_collector():
    n = 10_000
    tap = UsageTap()
    receiver = manager(ManualClock(0))
    receiver.tap = tap
    for i in range(n):
        receiver.record_no_throttle(f"tenant-{i:05d}", "", 12_345 + 100 * i)  # none round exactly
    gathered = tap.gather("a")
    delta, made = tracked_objects_left_by(lambda: gathered.top(coarse=True))  # the record: rounded, rest kept
    assert made < 50 and len(gathered.residuals) == n
    leftover, made = tracked_objects_left_by(lambda: gathered.leftover(n))
    assert made < 50 and len(leftover) == n
    data = encode(delta, compress=True)
    decoded, made = tracked_objects_left_by(lambda: decode(data))
    assert made < 50 and len(decoded.produce) == n
    assert decoded == delta and decoded.produce == tuple(delta.produce) and tuple(decoded.produce) == decoded.produce
    assert decoded.produce[3] == ("tenant-00003", "", 12_600) and decoded.produce[1:3] == tuple(delta.produce)[1:3]
