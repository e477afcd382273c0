"""A chain's plan reused on one connection while nothing it reads has changed: a consumer's Fetch planned once.

A polling consumer sends the same Fetch again and again on one connection, and its chain (node endpoints, the
consumer byte rate, the topic byte rate) returns the same plan each time: each stage makes its plan once per client
and version, and :func:`proxy.apis.stages.fold` combines them once. Asking the stages still costs each request about
a tenth of its pair's instructions. A chain declared here (:data:`REUSABLE`) is asked once per value of its
*inputs*, a value that names everything its stages read: while a request's inputs equal those of the connection's
last request of the API, it gets that request's plan and no stage is asked.

What an API's inputs must name is every input of every stage in its chain. :func:`reusable` checks, when the chains
are built, that a declaration covers exactly the stages of its API's chain: a stage added to the chain and not to
the inputs stops the proxy from starting (read the new stage, extend the inputs, then its ``covers``). The inputs
are ``None`` while some stage's plan is one request's (it records, or holds what one request accounted for): then
every stage is asked, as without this module. A plan is reused only once a second request of the same inputs got the
very same plan from its stages (:func:`reused`): a plan made anew for each request (a shadow entry's counting leg,
which holds what one request's answer accounted for) is never handed to another.

The inputs are read per request, so a change takes effect at the next request, as the stages' own reading does: a
quota table swapped (the keeper's ``version``), the proxy switched to shadow mode or back, a topic quota added or
removed, a ``request_rate`` that starts counting the API (its chain then is another, :data:`proxy.apis.CHAINS`, and
nothing is reused), a SASL principal that changes the session's user.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass

from proxy.apis import addresses, byte_rate, topic_rate
from proxy.apis.plan import ConnectionScope, Plan
from proxy.apis.stages import Planner, Stage, fold
from proxy.codec.apis import FETCH
from proxy.codec.header import RequestHeader
from proxy.session.session import Session

Inputs = Callable[[ConnectionScope, Session, RequestHeader], "Hashable | None"]


@dataclass(frozen=True, slots=True)
class Reuse:
    """An API's chain planned once per value of ``inputs``: the value of everything the stages ``covers`` read
    beyond the connection's listener (its scope, which a connection keeps), or None while a plan must be made for
    each request."""

    covers: tuple[Planner, ...]  # the chain's stages, in order: exactly what ``inputs`` names the inputs of
    inputs: Inputs


def fetch_inputs(scope: ConnectionScope, session: Session, header: RequestHeader) -> Hashable | None:
    """What a Fetch's chain (without request rate's stage) reads: the request's version, client id and replica id
    (v0-14: a follower's is exempt), the session's user, and the consumer byte rate's table (its keeper's version,
    bumped by every table swapped in: which entry applies to the client, and whether any sets the quota; the limits
    themselves are read by the plan as it runs). None while its plan is made for each
    request: a topic byte rate charges each answer by topic (:func:`proxy.apis.topic_rate.plan_fetch`), and a shadow
    proxy counts each answer's throttle (:func:`proxy.apis.byte_rate.plan_fetch`). The listener's advertiser (node
    endpoints) is the scope's."""
    quotas = scope.quotas
    fetch = quotas.fetch
    if fetch.shadow or quotas.topics.fetch_enabled:
        return None
    return header.api_version, header.client_id, header.replica_id, session.user, fetch.keeper.version


REUSABLE: Mapping[int, Reuse] = {
    FETCH: Reuse((addresses.plan_fetch, byte_rate.plan_fetch, topic_rate.plan_fetch), fetch_inputs),
}


def reusable(chains: Mapping[int, tuple[Stage, ...]], declared: Mapping[int, Reuse]) -> dict[int, Inputs]:
    """API key -> the inputs of its chain in ``chains``, for those ``declared``; raises ValueError when a
    declaration does not cover its chain's stages exactly (a stage added to the chain whose inputs are not named)."""
    table: dict[int, Inputs] = {}
    for api_key, reuse in declared.items():
        planners = tuple(stage.plan for stage in chains.get(api_key, ()))
        if planners != reuse.covers:
            raise ValueError(
                f"the inputs declared for API {api_key}'s plan cover {[p.__qualname__ for p in reuse.covers]}, "
                f"its chain is {[p.__qualname__ for p in planners]}: name the new stages' inputs too"
            )
        table[api_key] = reuse.inputs
    return table


def reused(
    chain: tuple[Stage, ...], scope: ConnectionScope, session: Session, header: RequestHeader, inputs: Hashable
) -> Plan:
    """The plan of ``chain`` for ``header``, whose chain read ``inputs``: the connection's last plan of the API when
    its inputs were the same and a request before it got the very same plan from the stages; else the stages asked
    (:func:`~proxy.apis.stages.fold`)."""
    api_key = header.api_key
    last = session.reused.get(api_key)
    if last is not None and last[1] == inputs and last[0] is scope:
        if last[3]:
            plan: Plan = last[2]
            return plan
        plan = fold(chain, scope, session, header)
        session.reused[api_key] = (scope, inputs, plan, plan is last[2])  # the same plan twice: made once, reusable
        return plan
    plan = fold(chain, scope, session, header)
    session.reused[api_key] = (scope, inputs, plan, False)
    return plan
