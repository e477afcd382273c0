"""The response leg (proxy.apis.response_leg): what a forwarded request's response goes through, combined
in one place so that no stage is dropped."""

import dataclasses

import pytest

from proxy.apis import PASS, ForwardRequest, Plan
from proxy.apis.response_leg import NO_LEG, ResponseLeg
from proxy.apis.usage import Usage
from quota.primitives.decision import FORWARD, Throttle


def test_a_plan_and_its_outcome_combine_with_every_stage_kept():
    calls = []
    plan = Plan(
        leg=ResponseLeg(
            observe=lambda body: calls.append(("plan observes", bytes(body))),
            rewrite=lambda body: bytes(body) + b"+plan",
            record_response=lambda n: calls.append(("charged", n)) or Throttle(30, 30),
            accounted=lambda later: Usage(partition_mutations=2),
        )
    )
    outcome = ForwardRequest(
        leg=ResponseLeg(
            observe=lambda body: calls.append(("outcome observes", bytes(body))),
            rewrite=lambda body: bytes(body) + b"+outcome",
            settle=lambda t: calls.append(("settled", t.throttle_time_ms)) or Throttle(10, 10),
            accounted=lambda later: later(Usage(new_producer_ids=1)) or Usage(partition_mutations=-1),
        )
    )
    leg = plan.leg.then(outcome.leg)
    # every stage kept (a lookup does not combine; unless_tagged is a hint of one rewrite alone, not a stage)
    assert all(
        getattr(leg, f.name) is not None for f in dataclasses.fields(leg) if f.name not in ("lookup", "unless_tagged")
    ), leg
    body, throttle = leg.run(memoryview(b"broker"), lambda rewritten: len(rewritten), Throttle(20, 20))
    assert body == b"broker+plan+outcome"  # the outcome's rewrite applies to what the plan's produced
    assert calls == [
        ("plan observes", b"broker"),
        ("outcome observes", b"broker"),  # both see the broker's body
        ("charged", len(b"broker+plan+outcome")),  # as the client gets it
        ("settled", 30),
    ]  # the longest of the request's and the charge's, then settled
    assert throttle == Throttle(10, 10)
    later: list[Usage] = []
    assert leg.accounted(later.append) == Usage(partition_mutations=1)  # both legs' usage, added
    assert later == [Usage(new_producer_ids=1)]  # what one learns after the response, handed where it is recorded


def test_no_leg_is_the_identity_and_what_nothing_needs():
    assert PASS.leg is NO_LEG and ForwardRequest().leg is NO_LEG
    leg = ResponseLeg(observe=lambda body: None)
    assert leg.then(NO_LEG) is leg and NO_LEG.then(leg) is leg
    assert NO_LEG.run(memoryview(b"x"), len, None) == (None, None)


def test_two_response_charges_both_count_and_the_longest_throttle_wins():
    first = ResponseLeg(record_response=lambda n: Throttle(5, 5))
    second = ResponseLeg(record_response=lambda n: FORWARD)
    third = ResponseLeg(record_response=lambda n: Throttle(7, 3))
    assert first.then(second).record_response(1) == Throttle(5, 5)
    assert second.then(first).record_response(1) == Throttle(5, 5)
    assert first.then(third).record_response(1) == Throttle(7, 5)


def test_a_lookup_leg_does_not_combine():
    with pytest.raises(ValueError):
        ResponseLeg(lookup=lambda body: None).then(ResponseLeg(observe=lambda body: None))


@pytest.mark.parametrize("part", ("observe", "record_response", "settle", "accounted", "lookup"))
def test_a_rewrite_alone_is_one_with_nothing_else_and_runs_as_its_rewrite(part):
    """``rewrite_alone`` (what the response path calls the rewrite directly for, without run()) holds of a leg with
    a rewrite or nothing and no other part; for such a leg, run() without a throttle gives the rewrite's body."""
    rewrite = ResponseLeg(rewrite=lambda body: bytes(body) + b"+rewritten")
    assert rewrite.rewrite_alone and NO_LEG.rewrite_alone
    assert rewrite.run(memoryview(b"broker"), len, None) == (b"broker+rewritten", None)
    assert not dataclasses.replace(rewrite, **{part: lambda *args: None}).rewrite_alone
