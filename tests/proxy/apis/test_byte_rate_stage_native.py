"""The C twin of the byte-rate stage every Produce asks (native/stages.c's ProducerByteRate) against
proxy.apis.byte_rate's pure_plan_producer_byte_rate: drawn scopes, sessions and headers (the quota on and off, client
ids empty or not, decisions within quota, shadow, throttles, errors; objects missing what is read) give the same
answer or error, the same record_and_decide calls, and the same hand-overs to the over-quota rest. Skipped where the
extension is not built."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import proxy.connection.compiled  # noqa: F401  (configures the extension: the FORWARD it compares with)
from proxy.apis import byte_rate
from quota.primitives.compiled import load_compiled
from quota.primitives.decision import FORWARD, Forward, Throttle
from tests.twins import asked_outcomes

native, _ = load_compiled("proxy.connection._native")
if native is None:
    pytest.skip("the C extension is not built here (or the pure path is chosen)", allow_module_level=True)

DECISIONS = [FORWARD, FORWARD, Forward(shadow=True), Throttle(120, 120), Throttle(0, 5, shadow=True), "odd", None]


class Manager:
    """A producer_byte_rate manager that says what it was asked."""

    def __init__(self, enabled, decision, seen) -> None:
        self.enabled = enabled
        self.decision = decision
        self.seen = seen

    def record_and_decide(self, user, client_id, size):
        self.seen.append(("record", user, client_id, size))
        if self.decision is None:
            raise ValueError("the manager refused")
        return self.decision


@st.composite
def situations(draw):
    return {
        "enabled": draw(st.sampled_from([True, False, 0, 1, "", "yes"])),
        "decision": draw(st.sampled_from(DECISIONS)),
        "has_produce": draw(st.booleans() | st.just(True)),
        "user": draw(st.sampled_from(["alice", "", None, "missing"])),
        "client_id": draw(st.sampled_from(["producer-1", "", None, 0, "missing"])),
        "size": draw(st.sampled_from([0, 1, 4096, 2**40, "missing"])),
    }


def build(s, seen):
    quotas = SimpleNamespace()
    if s["has_produce"]:
        quotas.produce = Manager(s["enabled"], s["decision"], seen)
    session = SimpleNamespace() if s["user"] == "missing" else SimpleNamespace(user=s["user"])
    header = SimpleNamespace()
    if s["client_id"] != "missing":
        header.client_id = s["client_id"]
    if s["size"] != "missing":
        header.size = s["size"]
    return SimpleNamespace(quotas=quotas), session, header


@settings(max_examples=400, deadline=None)
@given(situations())
def test_the_twin_answers_records_and_hands_over_as_the_pure_stage(s):
    seen_pure, seen_twin = [], []

    def over(header, decision):
        (seen_twin if over.twin else seen_pure).append(("over", id(header), decision))
        return ("plan", decision)

    got_pure, got_twin = asked_outcomes(
        byte_rate,
        byte_rate.pure_plan_producer_byte_rate,
        "over_producer_byte_rate",
        native.ProducerByteRate,
        over,
        lambda twin: build(s, seen_twin if twin else seen_pure),
    )
    assert got_twin == got_pure
    strip = [(e[0], *e[2:]) if e[0] == "over" else e for e in seen_pure]
    assert [(e[0], *e[2:]) if e[0] == "over" else e for e in seen_twin] == strip


def test_the_module_stage_is_the_twin_over_the_pure_parts():
    assert type(byte_rate.plan_producer_byte_rate) is native.ProducerByteRate
    assert byte_rate.plan_producer_byte_rate.__qualname__ == "pure_plan_producer_byte_rate"  # reuse's errors name it
    header = SimpleNamespace(client_id="c", size=10)
    seen = []
    scope = SimpleNamespace(quotas=SimpleNamespace(produce=Manager(True, Throttle(50, 50), seen)))
    plan = byte_rate.plan_producer_byte_rate(scope, SimpleNamespace(user="u"), header)
    assert plan == byte_rate.over_producer_byte_rate(header, Throttle(50, 50))
    assert seen == [("record", "u", "c", 10)]


def test_other_calls_go_to_the_pure_stage():
    calls = []
    twin = native.ProducerByteRate(lambda *a: calls.append(("over", a)), lambda *a, **k: calls.append((a, k)) or "p")
    assert twin(1, 2) == "p" and twin(1, 2, 3, extra=4) == "p"
    assert calls == [((1, 2), {}), ((1, 2, 3), {"extra": 4})]
