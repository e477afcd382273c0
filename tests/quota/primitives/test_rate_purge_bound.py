"""A rate remembers until when none of its samples can be obsolete (``Rate._fresh_until``), so a purge's check is one
comparison until then: the same samples, measurements, headrooms and answers as looking at every sample each time,
whatever the order of records, measurements, seeds and clock moves (time going back included)."""

from hypothesis import example, given, settings
from hypothesis import strategies as st

from quota import QuotaWindow, Rate
from quota.primitives.rate import _NEVER

OPS = st.lists(
    st.tuples(
        st.sampled_from(["record", "unrecord", "measure", "total", "window", "headroom", "within", "seed"]),
        st.integers(-300, 4_000),  # the clock's move (back now and then)
        st.integers(1, 5_000),  # a value, or a limit
    ),
    max_size=60,
)


def run(ops, bound: bool) -> list:
    """Every answer and the samples after each step; ``bound`` False: the bound forgotten before every step, so each
    check looks at every sample, as before it was kept."""
    rate = Rate(QuotaWindow(num=3, size_seconds=1))
    now, seen = 10_000, []
    for op, move, value in ops:
        now = max(0, now + move)
        if not bound:
            rate._fresh_until = _NEVER
        if op == "record":
            answer: object = rate.record(value, now)
        elif op == "unrecord":
            answer = rate.record(-value / 2, now)
        elif op == "measure":
            answer = rate.measure(now)
        elif op == "total":
            answer = rate.total(now)
        elif op == "window":
            answer = rate.window_size_ms(now)
        elif op == "headroom":
            answer = rate.headroom(value, now)
        elif op == "within":
            answer = rate.surely_within(value, now)
        else:
            answer = rate.seed([(now - 2_500, now - 2_000, value), (now - 900, now - 100, value / 3)], now)
        seen.append((answer, repr(rate), rate.headroom_floor(value)))
    return seen


@settings(max_examples=200, deadline=None)
@given(ops=OPS)
@example(ops=[("record", 0, 10), ("measure", 0, 1), ("record", -300, 10), ("measure", 3_100, 1)])  # time back
def test_the_bound_changes_no_sample_measurement_or_answer(ops):
    assert run(ops, bound=True) == run(ops, bound=False)


def test_a_check_before_the_bound_looks_at_no_sample():
    """The bound is what lets a check skip the samples: none is obsolete before it, one may be at it."""
    rate = Rate(QuotaWindow(num=3, size_seconds=1))
    rate.record(10, 1_000)
    assert rate.measure(1_000) == 10 / 2  # the bound found: 1,000 + 3 s
    assert rate._fresh_until == 4_000
    rate.record(10, 2_500)
    assert rate.surely_within(1_000, 3_999) and rate._fresh_until == 4_000
    assert rate.total(4_000) == 10  # the first sample obsolete at its bound, purged
    assert rate.measure(4_001) == 10 / 2.501 and rate._fresh_until == 5_500  # found again from the samples left
