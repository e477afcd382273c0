"""``ClientQuotaManager.record_and_decide`` records and checks a Produce's bytes in one ``Rate.record_within`` call;
the same decisions, sensors and stats as recording and then asking ``surely_within`` as two calls (the path before
it, kept here as the reference), for clients with a quota, without one, binding or far from it."""

from hypothesis import given, settings
from hypothesis import strategies as st

from quota import DEFAULT, FORWARD, ClientQuotaManager, ManualClock, QuotaTable, QuotaWindow, Throttle

P = "producer_byte_rate"
TABLE = [({"user": "alice"}, {P: 1_000}), ({"user": "carol", "client-id": DEFAULT}, {P: 10})]
STEPS = st.lists(
    st.tuples(
        st.integers(-200, 3_000),  # the clock's move (back now and then)
        st.sampled_from([("alice", "etl"), ("alice", "web"), ("bob", "etl"), ("carol", "x")]),  # quota'd or not
        st.integers(0, 6_000),  # the Produce's size
    ),
    max_size=50,
)


def two_calls(m: ClientQuotaManager, user: str, client_id: str, value: float, now: int):
    """record_and_decide as it was: sensors.record, then rate.surely_within, then _decide when not surely within."""
    sensors = m.keeper.for_record(user, client_id, now)
    sensors.record(value, now)
    if sensors.entity is not None and sensors.rate.surely_within(sensors.limit, now):
        return FORWARD
    throttle, observed = m._decide(sensors, now)
    if throttle <= 0:
        return FORWARD
    return Throttle(throttle, throttle, m.shadow or sensors.shadow, sensors.limit, observed)


def run(steps, one_call: bool) -> list:
    m = ClientQuotaManager(QuotaTable.from_values(TABLE), P, ManualClock(), QuotaWindow(num=3, size_seconds=1))
    now, seen = 10_000, []
    for move, (user, client_id), size in steps:
        now = max(0, now + move)
        if one_call:
            decision = m.record_and_decide(user, client_id, size, now)
        else:
            decision = two_calls(m, user, client_id, size, now)
        sensors = m.keeper.get(m.resolve(user, client_id).tags)
        seen.append(
            (
                decision,
                repr(sensors.rate),
                sensors.rate._held,
                sensors.rate._fresh_until,
                sensors.value_total,
                sensors.last_record_ms,
                m.stats_for(user, client_id, now),
            )
        )
    return seen


@settings(max_examples=150, deadline=None)
@given(steps=STEPS)
def test_one_call_decides_and_counts_as_two(steps):
    assert run(steps, one_call=True) == run(steps, one_call=False)


def test_the_comparison_sees_throttles():
    """The property can fail: a throttle is among what both paths decide."""
    steps = [(0, ("carol", "x"), 100), (1, ("carol", "x"), 100), (1, ("alice", "etl"), 10)]
    seen = run(steps, one_call=True)
    assert seen[1][0] != FORWARD and seen[2][0] == FORWARD
    assert seen == run(steps, one_call=False)
