"""The one way two stages' plans combine (``Plan.then``): nothing either stage said is dropped."""

from __future__ import annotations

import dataclasses

from proxy.apis.plan import PASS, AnswerLocally, ForwardRequest, HoldFor, LookUp, Plan
from proxy.apis.response_leg import NO_LEG, ResponseLeg
from proxy.apis.usage import Usage
from proxy.codec.apis import PRODUCE
from proxy.codec.frame import BUFFER, DROP
from proxy.codec.header import RequestHeader, encode_response_header, frame
from quota.primitives.decision import Throttle

HEADER = RequestHeader(100, PRODUCE, 9, 7, "c", 20, 1)


def test_every_field_of_both_plans_is_kept():
    calls: list = []
    earlier = Plan(
        leg=ResponseLeg(rewrite=lambda body: bytes(body) + b"+earlier", observe=lambda body: calls.append("observed")),
        throttle=Throttle(10, 40),
        abandon=lambda: calls.append("earlier released"),
        usage=Usage(shadow_throttle_ms=50, new_producer_ids=1),
    )
    later = Plan(
        action=BUFFER,
        leg=ResponseLeg(rewrite=lambda body: bytes(body) + b"+later"),
        throttle=Throttle(30, 20),
        abandon=lambda: calls.append("later released"),
        decide=lambda body: ForwardRequest(),
        usage=Usage(shadow_throttle_ms=20, new_producer_ids=2, partition_mutations=3),
    )
    plan = earlier.then(later, HEADER)
    assert plan.action is BUFFER and plan.decide is later.decide  # the strongest action; the only decision
    assert plan.throttle == Throttle(30, 40)  # the longest report and the longest mute
    assert plan.usage == Usage(shadow_throttle_ms=50, new_producer_ids=3, partition_mutations=3)  # counts add up
    assert plan.leg.rewrite(memoryview(b"broker")) == b"broker+earlier+later"  # the later on what the earlier made
    plan.leg.observe(memoryview(b"broker"))
    plan.abandon()
    assert calls == ["observed", "earlier released", "later released"]
    assert {f.name for f in dataclasses.fields(Plan)} == {
        "action",
        "leg",
        "local_response",
        "decide",
        "throttle",
        "abandon",
        "usage",
        "last",
    }, "a field added to Plan must be combined by Plan.then (and this test extended)"


def test_pass_is_the_identity_and_a_last_plan_takes_nothing_more():
    plan = Plan(throttle=Throttle(5, 5))
    assert PASS.then(plan, HEADER) is plan and plan.then(PASS, HEADER) is plan
    last = Plan(action=DROP, local_response=b"answer", last=True)
    assert last.then(plan, HEADER) is last
    assert plan.then(last, HEADER).last and plan.then(last, HEADER).action is DROP


def test_the_later_stage_decides_on_what_the_earlier_forwards_and_its_answer_gets_the_earlier_leg():
    seen: list = []
    earlier = Plan(
        action=BUFFER,
        decide=lambda body: ForwardRequest(
            body=b"rest", leg=ResponseLeg(rewrite=lambda answer: bytes(answer) + b"+refusals"), throttle=Throttle(9, 9)
        ),
    )

    def later_decides(body: memoryview):
        seen.append(bytes(body))
        return AnswerLocally(frame(encode_response_header(PRODUCE, 9, 7) + b"ours"), Throttle(3, 3))

    outcome = earlier.then(Plan(action=BUFFER, decide=later_decides), HEADER).decide(memoryview(b"whole"))
    assert seen == [b"rest"]
    assert isinstance(outcome, AnswerLocally) and outcome.throttle == Throttle(9, 9)
    assert outcome.frame == frame(encode_response_header(PRODUCE, 9, 7) + b"ours+refusals")


def test_a_lookup_or_a_hold_decides_the_later_stage_once_it_is_over():
    later = Plan(action=BUFFER, decide=lambda body: ForwardRequest(throttle=Throttle(4, 4)))
    looked = Plan(action=BUFFER, decide=lambda body: LookUp(3, 12, b"q", lambda answer: ForwardRequest()))
    lookup = looked.then(later, HEADER).decide(memoryview(b"whole"))
    assert isinstance(lookup, LookUp) and lookup.then(memoryview(b"")).throttle == Throttle(4, 4)
    held = Plan(action=BUFFER, decide=lambda body: HoldFor(50, lambda: ForwardRequest()))
    hold = held.then(later, HEADER).decide(memoryview(b"whole"))
    assert isinstance(hold, HoldFor) and hold.delay_ms == 50 and hold.then().throttle == Throttle(4, 4)
    answered = Plan(action=BUFFER, decide=lambda body: AnswerLocally(b"x"))
    assert answered.then(later, HEADER).decide(memoryview(b"whole")) == AnswerLocally(b"x")  # the chain ended


def test_a_plan_of_a_leg_alone_then_another_is_the_other_with_both_legs():
    # cluster mode's node endpoints, then a Fetch's consumer byte rate: the short way Plan.then takes is the rule's
    calls: list = []
    earlier = Plan(leg=ResponseLeg(rewrite=lambda body: bytes(body) + b"+earlier"))
    later = Plan(
        action=BUFFER,
        leg=ResponseLeg(
            rewrite=lambda body: bytes(body) + b"+later",
            observe=lambda body: calls.append("observed"),
            record_response=lambda size: calls.append(size) or None,
            settle=lambda throttle: throttle,
            accounted=lambda later: Usage(new_producer_ids=1),
        ),
        local_response=b"answer",
        decide=lambda body: ForwardRequest(),
        throttle=Throttle(30, 20),
        abandon=lambda: calls.append("released"),
        usage=Usage(shadow_throttle_ms=20),
        last=True,
    )
    plan = earlier.then(later, HEADER)
    for name in ("action", "local_response", "decide", "throttle", "abandon", "usage", "last"):
        assert getattr(plan, name) is getattr(later, name), name
    leg = plan.leg
    assert leg.rewrite(memoryview(b"broker")) == b"broker+earlier+later"
    assert (leg.observe, leg.record_response, leg.settle, leg.accounted, leg.lookup) == (
        later.leg.observe,
        later.leg.record_response,
        later.leg.settle,
        later.leg.accounted,
        None,
    )
    assert {f.name for f in dataclasses.fields(ResponseLeg)} == {
        "observe",
        "rewrite",
        "record_response",
        "settle",
        "lookup",
        "accounted",
        "rewrite_alone",  # derived from the others at construction, never given (below)
        "unless_tagged",  # a hint of one rewrite alone (below): a combined leg drops it, its rewrite checks itself
    }, "a field added to ResponseLeg must be combined by ResponseLeg.then, its short way too (and this test extended)"
    assert [f.name for f in dataclasses.fields(ResponseLeg) if not f.init] == ["rewrite_alone"]
    hinted = ResponseLeg(rewrite=lambda body: bytes(body) + b"+moved", unless_tagged=0)
    assert hinted.then(NO_LEG) is hinted and NO_LEG.then(hinted) is hinted
    combined = Plan(leg=hinted).then(later, HEADER).leg
    assert combined.unless_tagged is None and combined.rewrite(memoryview(b"broker")) == b"broker+moved+later"
