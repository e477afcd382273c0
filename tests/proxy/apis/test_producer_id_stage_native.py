"""The C twin of the producer-id stage every Produce asks (native/stages.c's ProducerIdStage) against
proxy.apis.producer_ids' pure_plan_produce: drawn scopes, sessions and headers (no producer ids, one or several, the
connection's own or another, checked within the recheck interval, at its edge or long ago; the quota on and off;
ints past 64 bits, floats, NaN, bools, lists; objects missing what is read; a clock that fails) give the same answer or
error, the same clock reads and the same hand-overs to the counting rest. Skipped where the extension is not built."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from proxy.apis import producer_ids
from quota.primitives.compiled import load_compiled
from tests.twins import asked_outcomes

native, _ = load_compiled("proxy.connection._native")
if native is None:
    pytest.skip("the C extension is not built here (or the pure path is chosen)", allow_module_level=True)

BIG = 2**70
NAN = float("nan")  # the same object on both sides: equal by identity, not by ==
IDS = [7, 8, -1, BIG, 7.0, True, NAN]
TIMES = [0, 1000, 1249, 1250, 1251, 5000, BIG, -BIG, 1000.5, "missing"]


class Clock:
    """A clock that says when it was read."""

    def __init__(self, now, seen) -> None:
        self.now, self.seen = now, seen

    def now_ms(self):
        self.seen.append(("now",))
        if self.now == "fails":
            raise RuntimeError("the clock stopped")
        return self.now


@st.composite
def situations(draw):
    pids = draw(
        st.sampled_from([(), (7,), (8,), (BIG,), (7, 8), (7.0,), (NAN,), "missing", None])
        | st.lists(st.sampled_from(IDS), max_size=3).map(tuple)
        | st.lists(st.sampled_from(IDS), max_size=2)
    )
    return {
        "pids": pids,
        "enabled": draw(st.sampled_from([True, False, 0, 1, "", "missing"])),
        "now": draw(st.sampled_from([1000, 1249, 1250, 1251, 2**63 - 1, BIG, 1249.5, "fails", "missing"])),
        "last": draw(st.sampled_from([*IDS, "missing"])),
        "checked": draw(st.sampled_from(TIMES + [-(2**63)])),
        "recheck": draw(st.sampled_from([250, 0, -1, BIG, 250.0, "missing"])),
    }


def build(s, seen):
    quota = SimpleNamespace()
    for name, key in (("enabled", "enabled"), ("recheck_ms", "recheck")):
        if s[key] != "missing":
            setattr(quota, name, s[key])
    quotas = SimpleNamespace(producer_ids=quota)
    if s["now"] != "missing":
        quotas.clock = Clock(s["now"], seen)
    session = SimpleNamespace()
    if s["last"] != "missing":
        session.producer_id = s["last"]
    if s["checked"] != "missing":
        session.producer_id_checked_ms = s["checked"]
    header = SimpleNamespace()
    if s["pids"] != "missing":
        header.producer_ids = s["pids"]
    return SimpleNamespace(quotas=quotas), session, header


EDGE = {"pids": (7,), "enabled": True, "last": 7, "checked": 1000, "recheck": 250}  # the recheck interval's edge


@settings(max_examples=600, deadline=None)
@given(situations())
@example({**EDGE, "now": 1249})
@example({**EDGE, "now": 1250})
def test_the_twin_answers_and_hands_over_as_the_pure_stage(s):
    seen_pure, seen_twin = [], []

    def count(scope, session, header, now):
        (seen_twin if count.twin else seen_pure).append(("count", now))
        return ("plan", now)

    got_pure, got_twin = asked_outcomes(
        producer_ids,
        producer_ids.pure_plan_produce,
        "count_produce",
        native.ProducerIdStage,
        count,
        lambda twin: build(s, seen_twin if twin else seen_pure),
    )
    assert got_twin == got_pure
    assert seen_twin == seen_pure


def test_the_module_stage_is_the_twin_over_the_pure_parts():
    assert type(producer_ids.plan_produce) is native.ProducerIdStage
    assert producer_ids.plan_produce.__qualname__ == "pure_plan_produce"  # reuse's errors name it
    seen = []
    quota = SimpleNamespace(enabled=True, recheck_ms=250)
    scope = SimpleNamespace(quotas=SimpleNamespace(producer_ids=quota, clock=Clock(1000, seen)))
    session = SimpleNamespace(producer_id=7, producer_id_checked_ms=900)
    assert producer_ids.plan_produce(scope, session, SimpleNamespace(producer_ids=(7,))) is None
    assert seen == [("now",)]


def test_other_calls_go_to_the_pure_stage():
    calls = []
    twin = native.ProducerIdStage(lambda *a: calls.append(("count", a)), lambda *a, **k: calls.append((a, k)) or "p")
    assert twin(1, 2) == "p" and twin(1, 2, 3, extra=4) == "p"
    assert calls == [((1, 2), {}), ((1, 2, 3), {"extra": 4})]
