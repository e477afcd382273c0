"""``Rate.record_within`` (a Produce's ``producer_byte_rate`` record and check in one call) leaves the samples as
``record`` then ``surely_within`` leave them and answers what the second answers, whatever the order of records,
measurements and clock moves (time going back included)."""

from hypothesis import example, given, settings
from hypothesis import strategies as st

from quota import QuotaWindow, Rate

OPS = st.lists(
    st.tuples(
        st.sampled_from(["record", "unrecord", "measure", "headroom"]),
        st.integers(-300, 4_000),  # the clock's move (back now and then)
        st.integers(0, 5_000),  # a value
        st.sampled_from([0.0, 1.0, 100.0, 1_000.0, 1e9, float("inf")]),  # the limit
    ),
    max_size=60,
)


def run(ops, one_call: bool) -> list:
    """Every answer and the whole state after each step (samples, the held sum, the purge bound, the current slot)."""
    rate = Rate(QuotaWindow(num=3, size_seconds=1))
    now, seen = 10_000, []
    for op, move, value, limit in ops:
        now = max(0, now + move)
        answer: object
        if op in ("record", "unrecord"):
            value = value if op == "record" else -value / 2
            if one_call:
                answer = rate.record_within(value, now, limit)
            else:
                rate.record(value, now)
                answer = rate.surely_within(limit, now)
        elif op == "measure":
            answer = rate.measure(now)
        else:
            answer = rate.headroom(limit, now)
        seen.append((answer, repr(rate), rate._s.tolist(), rate._held, rate._fresh_until, rate._current))
    return seen


@settings(max_examples=300, deadline=None)
@given(ops=OPS)
@example(ops=[("record", 0, 10, 1.0), ("measure", 0, 1, 1.0), ("record", -300, 10, 1.0), ("record", 3_100, 1, 1.0)])
@example(ops=[("record", 0, 5_000, 1_000.0), ("record", 3_000, 1, 1_000.0), ("record", 1, 1, 1_000.0)])
def test_record_within_is_record_then_surely_within(ops):
    assert run(ops, one_call=True) == run(ops, one_call=False)


def test_record_within_answers_both_ways():
    """The property can fail: the answer is True far below the limit and False near it, as surely_within's."""
    rate = Rate(QuotaWindow(num=3, size_seconds=1))
    assert rate.record_within(10, 1_000, 1_000.0)  # 10 B held, 2,000 B allowed at least
    assert not rate.record_within(1_990, 1_000, 1_000.0)  # 2,000 B held: not surely within
    assert rate.total(1_000) == 2_000
