"""``ClientQuotaManager.record_and_decide`` records and checks a Produce's bytes in one ``Rate.record_within`` call;
the same decisions, sensors and stats as recording and then asking ``surely_within`` as two calls (the path before
it, kept here as the reference), for clients with a quota, without one, binding or far from it, with usage shared
(a tap told) or not, smoothing on or off."""

from hypothesis import given, settings
from hypothesis import strategies as st

from quota import DEFAULT, FORWARD, ClientQuotaManager, ManualClock, QuotaTable, QuotaWindow, Throttle
from quota.primitives.usage_tap import NoTap

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
    """record_and_decide as it was: _count (the sensor, the tap, the bucket), then rate.surely_within unless a bucket
    decides, then _decide when not surely within."""
    sensors = m.keeper.for_record(user, client_id, now)
    m._count(sensors, user, client_id, value, now)
    if sensors.entity is not None and (sensors.smooth is None or not m.smoothing):
        if sensors.rate.surely_within(sensors.limit, now):
            return FORWARD
    throttle, observed = m._decide(sensors, now)
    if throttle <= 0:
        return FORWARD
    return Throttle(throttle, throttle, m.shadow or sensors.shadow, sensors.limit, observed)


class Told(NoTap):
    """A tap that keeps what it is told, in order (cluster mode's usage sharing)."""

    def __init__(self) -> None:
        self.told: list = []

    def add(self, quota_key, tags, user, client_id, value, limit=float("inf")) -> None:
        self.told.append((quota_key, tags, user, client_id, value, limit))


def run(steps, one_call: bool, tap: bool = False, smoothing: bool = False) -> list:
    window = QuotaWindow(num=3, size_seconds=1)
    m = ClientQuotaManager(QuotaTable.from_values(TABLE), P, ManualClock(), window, smoothing=smoothing)
    if tap:
        m.tap = Told()
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
                None if sensors.smooth is None else sensors.smooth.peek(now),
                list(m.tap.told) if tap else None,
            )
        )
    return seen


@settings(max_examples=150, deadline=None)
@given(steps=STEPS, tap=st.booleans(), smoothing=st.booleans())
def test_one_call_decides_and_counts_as_two(steps, tap, smoothing):
    assert run(steps, True, tap, smoothing) == run(steps, False, tap, smoothing)


def test_the_comparison_sees_throttles():
    """The property can fail: a throttle is among what both paths decide."""
    steps = [(0, ("carol", "x"), 100), (1, ("carol", "x"), 100), (1, ("alice", "etl"), 10)]
    seen = run(steps, one_call=True)
    assert seen[1][0] != FORWARD and seen[2][0] == FORWARD
    assert seen == run(steps, one_call=False)
    told = run(steps, one_call=True, tap=True)[-1][-1]
    assert [(user, value) for _, _, user, _, value, _ in told] == [("carol", 100), ("carol", 100), ("alice", 10)]
