"""The C twin of the sampled rate (quota/primitives/native/rate.c) against its reference, ``PureRate``: the same
random records, checks, measurements, seeds, copies and clock moves (back now and then; ints and floats for times,
values and limits) through both, and after every step the same answer (value and type) and the same state: samples,
current slot, held sum, purge bound, repr. Skipped where the extension is not built (no compiler)."""

from __future__ import annotations

import copy
import math
import pickle

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from quota.primitives import rate as rate_module
from quota.primitives.rate import PureRate, QuotaWindow

twin = pytest.importorskip("quota.primitives._rate", reason="the C extension is not built here")
twin.configure(rate_module._DEFAULT_WINDOW)  # as quota.primitives.rate does when it chooses the twin
CRate = twin.Rate if rate_module._TWIN is None else rate_module.Rate  # the class over the twin, when in use

NUMBERS = st.one_of(
    st.integers(-50, 6_000),
    st.floats(-50.0, 6_000.0).map(lambda v: round(v, 2)),
    st.sampled_from([0, 0.0, 1, 1e9, 2**60, 10**20]),
)
LIMITS = st.one_of(
    st.integers(0, 10_000),
    st.floats(0.0, 10_000.0),
    st.sampled_from([0, 0.0, 1e9, float("inf"), 2**60, 10**20]),
)
MOVES = st.one_of(st.integers(-300, 4_000), st.sampled_from([0, 1, 999, 1_000, 11_000, 40_000]))
OPS = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "record",
                "record",
                "record_within",
                "record_within",
                "surely_within",
                "headroom_floor",
                "total",
                "window_size_ms",
                "headroom",
                "measure",
                "peek",
                "peek_with_window",
                "samples",
                "seed",
                "seed_own",
                "copy",
                "pickle",
                "purge",
                "forget_bound",
            ]
        ),
        MOVES,
        NUMBERS,
        LIMITS,
        st.booleans(),  # keywords rather than positions; a time with a fraction
    ),
    max_size=80,
)
WINDOWS = st.builds(QuotaWindow, num=st.integers(1, 5), size_seconds=st.integers(1, 3))


def same(answer: object) -> object:
    """An answer as compared: its type and repr, all the way down (-0.0 is not 0.0, nan is nan, 1 is not 1.0)."""
    if isinstance(answer, (list, tuple)):
        return type(answer).__name__, [same(a) for a in answer]
    return type(answer).__name__, repr(answer)


def state(rate: PureRate) -> tuple:
    """Every field the pure class holds, read the same way from either."""
    return (
        repr(rate),
        rate._s.tolist(),
        same(rate._held),  # an int after a sum of no positive value, as the pure class's
        rate._fresh_until,
        rate._current,
        rate.sample_count,
        rate.window,
        rate._shape,
    )


def step(rate: PureRate, op: str, now: float, value: float, limit: float, keywords: bool) -> tuple[PureRate, object]:
    """One operation on ``rate``: (the rate to go on with, the answer or the exception's class)."""
    try:
        if op == "record":
            return rate, rate.record(value=value, now_ms=now) if keywords else rate.record(value, now)
        if op == "record_within":
            if keywords:
                return rate, rate.record_within(limit=limit, value=value, now_ms=now)
            return rate, rate.record_within(value, now, limit)
        if op == "surely_within":
            return rate, rate.surely_within(limit, now_ms=now) if keywords else rate.surely_within(limit, now)
        if op == "headroom_floor":
            return rate, rate.headroom_floor(limit=limit) if keywords else rate.headroom_floor(limit)
        if op == "headroom":
            return rate, rate.headroom(limit, now)
        if op in ("total", "window_size_ms", "measure", "peek", "peek_with_window", "samples"):
            method = getattr(rate, op)
            return rate, method(now_ms=now) if keywords else method(now)
        if op == "purge":
            return rate, rate._purge_obsolete_samples(now)
        if op == "seed":
            samples = [(now - 2_500, now - 2_000, value), (now - 900, now - 100, limit), (now, now - 1, 5), (3, 2, 1)]
            return rate, rate.seed(samples, now)
        if op == "seed_own":  # a peer's samples into a fresh rate (a restarted worker), or into this one
            into = type(rate)(rate.window) if keywords else rate
            into.seed(rate.samples(now), now)
            return into, None
        if op == "copy":
            return (copy.deepcopy(rate) if keywords else copy.copy(rate)), None
        if op == "pickle":
            return pickle.loads(pickle.dumps(rate)), None
        rate._fresh_until = rate_module._NEVER  # forget_bound: every check looks at every sample
        return rate, None
    except (OverflowError, ValueError, ZeroDivisionError, TypeError) as failed:
        return rate, type(failed)


def run(cls: type[PureRate], window: QuotaWindow, ops: list) -> list:
    rate, now, seen = cls(window), 10_000, []
    for op, move, value, limit, keywords in ops:
        now = max(0, now + move)
        at = now + 0.5 if keywords and op in ("measure", "window_size_ms", "peek_with_window", "record") else now
        rate, answer = step(rate, op, at, value, limit, keywords)
        seen.append((op, same(answer), state(rate)))
    return seen


@settings(max_examples=300, deadline=None)
@given(window=WINDOWS, ops=OPS)
@example(window=QuotaWindow(3, 1), ops=[("record", 0, 10, 1.0, False), ("measure", 3_100, 1, 1.0, False)])
@example(window=QuotaWindow(3, 1), ops=[("record", 0, 10, 1, False), ("record", -300, 10, 1, False)] * 3)
@example(window=QuotaWindow(2, 1), ops=[("record_within", 1_000, 5_000, 1_000.0, False)] * 12)
@example(window=QuotaWindow(1, 1), ops=[("seed_own", 0, 1, 1, True), ("record", 5, -3, 1, True)])
def test_the_twin_answers_and_holds_what_the_pure_rate_does(window, ops):
    assert run(CRate, window, ops) == run(PureRate, window, ops)


def test_the_comparison_can_fail():
    """The state compared tells two rates apart that differ by one sample's value, or only in the purge bound."""
    a, b = CRate(QuotaWindow(3, 1)), PureRate(QuotaWindow(3, 1))
    a.record(10, 1_000)
    b.record(10.5, 1_000)
    assert state(a) != state(b)
    b = PureRate(QuotaWindow(3, 1))
    b.record(10, 1_000)
    assert state(a) == state(b)
    a.measure(1_000)
    assert state(a) != state(b)
    assert same(1) != same(1.0) and same(-0.0) != same(0.0) and same(math.nan) == same(math.nan)


def test_the_default_window_is_kafkas_and_misuse_raises_as_the_pure_one_does():
    assert CRate().window == PureRate().window == QuotaWindow()
    for rate in (CRate(), PureRate()):
        with pytest.raises(TypeError):
            rate.record(1)  # type: ignore[call-arg]
        with pytest.raises(TypeError):
            rate.record(1, 2, 3)  # type: ignore[call-arg]
        with pytest.raises(TypeError):
            rate.measure(when=1)  # type: ignore[call-arg]
        with pytest.raises(TypeError):
            rate.record("1", 2)  # type: ignore[arg-type]
