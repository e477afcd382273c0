"""A request's handling as a declared chain of stages.

A :class:`Stage` says which requests it wants (their API keys) and, for each, returns a plan or nothing (None: it
has nothing to add). The chain of an API is every stage that wants it, in the order the stages are declared
(:data:`proxy.apis.STAGES`); :func:`fold` asks each in turn and combines their plans with the one rule,
:meth:`~proxy.apis.plan.Plan.then`: an earlier stage's decision on the body comes first and a later one decides on
what it produced; the response goes back through their legs in the same order. A stage ends the chain with a plan
marked ``last`` (answered here, refused, or exempt from everything after it). Adding a quota adds a stage, not a
branch in another stage's function. (Kroxylicious: ``RequestFilter.shouldHandleRequest`` and ``FilterResult``.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from proxy.apis.plan import PASS, ConnectionScope, Plan
from proxy.codec.header import RequestHeader
from proxy.session.session import Session

Planner = Callable[[ConnectionScope, Session, RequestHeader], "Plan | None"]


@dataclass(frozen=True, slots=True)
class Stage:
    name: str  # what it does, for a reader of the chain
    wants: frozenset[int]  # the API keys of the requests it plans
    plan: Planner  # the request's plan from this stage, or None: nothing to add


END = Plan(last=True)  # a stage's "no later stage applies", adding nothing


def chains(stages: Iterable[Stage]) -> dict[int, tuple[Stage, ...]]:
    """API key -> the stages that want it, in declaration order."""
    table: dict[int, tuple[Stage, ...]] = {}
    for stage in stages:
        for api_key in stage.wants:
            table[api_key] = table.get(api_key, ()) + (stage,)
    return table


def fold(chain: tuple[Stage, ...], scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan:
    """The request's plan: each stage's in turn, combined; a stage's ``last`` plan ends the chain. Plans that several
    stages returned are combined once per connection while the stages return the same ones (a consumer's Fetch: the
    node endpoints' plan and its byte rate's, made once per client and version): :meth:`Plan.then` reads nothing of
    the header but its API key and version."""
    parts: list[Plan] = []
    for stage in chain:
        more = stage.plan(scope, session, header)
        if more is not None:
            parts.append(more)
            if more.last:
                break
    return plan_of(parts, session, header)


def plan_of(parts: list[Plan], session: Session, header: RequestHeader) -> Plan:
    """The plan of a chain whose stages made ``parts``, in order (:func:`combined`); PASS when they made none or
    their combination ends it with nothing to do."""
    if not parts:
        return PASS
    plan = parts[0] if len(parts) == 1 else combined(parts, session, header)
    return PASS if plan is END else plan


def combined(parts: list[Plan], session: Session, header: RequestHeader) -> Plan:
    """``parts`` combined in turn; the last combination of the connection's requests of this API reused when it was
    of the same plans (by identity: the memo holds them, so their ids stay theirs) and version."""
    ids = tuple(map(id, parts))
    memo = session.plans.get(header.api_key)
    if memo is not None and memo[0] == header.api_version and memo[1] == ids:
        combined: Plan = memo[3]
        return combined
    plan = parts[0]
    for more in parts[1:]:
        plan = plan.then(more, header)
    session.plans[header.api_key] = (header.api_version, ids, parts, plan)
    return plan
