"""The C twin of a byte-rate manager's per-request methods (quota/primitives/native/hot_paths.c) against its reference,
``PureHotPaths``: two managers, one over each, through the same random records, floors, clock moves, quota tables
of every shape (swapped live, shadow entries, a table too small for its tenants), smoothing switched, usage shared
and not, idle sensors expired; after every step the same answer (value and type) and the same sensors, field by
field, the same table order and the same usage told. Skipped where the extension is not built (no compiler)."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from quota import DEFAULT, ManualClock, QuotaTable
from quota.managers.client_quota import ClientQuotaManager
from quota.managers.hot_paths import PureHotPaths
from quota.primitives.decision import FORWARD
from quota.primitives.sensor import ClientSensors
from quota.primitives.usage_tap import NO_TAP

pytest.importorskip("quota.primitives._rate", reason="the C extension is not built here")
if ClientQuotaManager.record_and_decide is PureHotPaths.record_and_decide:
    pytest.skip("the pure path runs (KAFKA_QUOTA_PROXY_PURE_PYTHON)", allow_module_level=True)

KEY = "consumer_byte_rate"
USERS = ["", "alice", "bob"]
CLIENTS = ["", "etl", "app"]
TABLES = [
    [({"user": DEFAULT}, {KEY: 1_000})],
    [({"user": DEFAULT}, {KEY: 10**9}), ({"user": "bob"}, {KEY: 500}, True)],
    [({"client-id": DEFAULT}, {KEY: 2_000})],
    [({"client-id": "etl"}, {KEY: 700})],
    [({"user": DEFAULT, "client-id": DEFAULT}, {KEY: 1_500})],
    [({"user": "alice", "client-id": "etl"}, {KEY: 300}), ({"user": DEFAULT}, {KEY: 5_000})],
    [({"user": "alice"}, {KEY: 800}), ({"client-id": "app"}, {KEY: 900})],  # mixed: found by no one lookup
    [({"user": DEFAULT}, {KEY: 1_000}, True)],  # shadow
    [],
]


class PureManager(ClientQuotaManager):
    """The manager over the pure methods (the twin's own class is ClientQuotaManager, over the C ones)."""

    record_and_decide = PureHotPaths.record_and_decide
    remaining_floor = PureHotPaths.remaining_floor


class Tap:
    """Usage shared with peers: what it was told, in order."""

    def __init__(self) -> None:
        self.told: list[tuple] = []

    def add(self, *args) -> None:
        self.told.append(args)


def manager(cls, table: int, cap: int):
    return cls(QuotaTable.from_values(TABLES[table]), KEY, ManualClock(1_000), max_tracked_entities=cap)


FIELDS = tuple(f for f in ClientSensors.__slots__ if f not in ("rate", "smooth"))  # those two compared apart


def state(m: ClientQuotaManager) -> list:
    """Every sensor, in the table's order, field by field (with each number's type), its rate and its bucket."""
    table = m.keeper.table
    out: list = [table.due_ms, m.keeper.overflowed, len(m.keeper._members)]
    for sensors in table.sensors.values():
        out.append([(getattr(sensors, f), type(getattr(sensors, f))) for f in FIELDS])
        bucket = sensors.smooth
        out.append((repr(sensors.rate), None if bucket is None else [getattr(bucket, f) for f in bucket.__slots__]))
    return out


def same(a, b) -> None:
    assert type(a) is type(b)
    assert a == b or (a != a and b != b)  # NaN never comes, but say so if it does


OPS = st.lists(
    st.tuples(
        st.sampled_from(["record"] * 6 + ["floor"] * 3 + ["record_at", "table", "smoothing", "tap", "expire", "float"]),
        st.integers(0, 2),
        st.integers(0, 2),
        st.one_of(st.integers(0, 3_000), st.sampled_from([0, 1, 29_999, 30_000, 3_600_001])),
        st.integers(0, 5_000),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(table=st.integers(0, len(TABLES) - 1), cap=st.sampled_from([2, 100]), ops=OPS)
@example(table=0, cap=100, ops=[("record", 1, 1, 0, 900)] * 3 + [("floor", 1, 1, 10, 0)])  # throttled
@example(table=0, cap=100, ops=[("tap", 0, 0, 0, 0), ("record", 1, 1, 10, 5)])  # usage told
@example(table=0, cap=100, ops=[("record", 1, 1, 0, 5), ("record", 1, 1, 30_000, 5)])  # the sensor moves back
@example(table=0, cap=100, ops=[("record", 1, 1, 0, 5), ("record", 1, 1, 3_600_001, 5)])  # expiry first
@example(table=5, cap=100, ops=[("record", 1, 1, 0, 5), ("floor", 1, 1, 0, 0), ("record", 1, 1, 1, 5)])  # by names
@example(table=2, cap=100, ops=[("record", 1, 1, 0, 5), ("record", 2, 1, 1, 5), ("floor", 0, 1, 0, 0)])
def test_the_twin_answers_and_records_as_the_pure_methods(table, cap, ops):
    twin, pure = manager(ClientQuotaManager, table, cap), manager(PureManager, table, cap)
    taps = (Tap(), Tap())
    for op, u, c, move, value in ops:
        user, client_id = USERS[u], CLIENTS[c]
        for m in (twin, pure):
            m._clock.advance(move)
        if op in ("record", "record_at", "float"):
            amount = value / 7 if op == "float" else value
            at = (twin._clock.now_ms(),) if op == "record_at" else ()
            a = twin.record_and_decide(user, client_id, amount, *at)
            b = pure.record_and_decide(user, client_id, amount, *at)
            assert (a is FORWARD) == (b is FORWARD)
            same(a, b)
        elif op == "floor":
            same(twin.remaining_floor(user, client_id), pure.remaining_floor(user, client_id))
        elif op == "table":
            for m in (twin, pure):
                m.update_quotas(QuotaTable.from_values(TABLES[value % len(TABLES)]))
        elif op == "smoothing":
            twin.smoothing = pure.smoothing = not twin.smoothing
        elif op == "tap":
            if twin.tap is NO_TAP:
                twin.tap, pure.tap = taps
            else:
                twin.tap = pure.tap = NO_TAP
        elif op == "expire":
            same(twin.expire_idle_sensors(), pure.expire_idle_sensors())
        assert state(twin) == state(pure)
        assert taps[0].told == taps[1].told


def test_a_manager_s_unusual_calls_go_to_the_pure_methods():
    """Keywords, a float time and a missing sensor class's slot: each answered as the pure method answers."""
    twin, pure = manager(ClientQuotaManager, 0, 100), manager(PureManager, 0, 100)
    for m in (twin, pure):
        m.record_and_decide("alice", "etl", 10, now_ms=5)
        m.record_and_decide("alice", "etl", 10, 6.5)
    same(twin.remaining_floor(user="alice", client_id="etl"), pure.remaining_floor(user="alice", client_id="etl"))
    assert state(twin) == state(pure)
    with pytest.raises(TypeError):
        twin.record_and_decide("alice")
