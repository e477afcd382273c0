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

A chain may also declare stages that are *asked* for every request (``asks``): those that record at the header (a
Produce's producer ids, its bytes against ``producer_byte_rate``), where a plan skipped would be a record skipped.
Only the other stages' plans are reused (:func:`reused_asking`): the asked stages are asked in their place in the
chain, and the plans combined as :func:`~proxy.apis.stages.fold` combines them. A one-message Produce then asks two
stages instead of eight.
"""

from __future__ import annotations

import operator
import uuid
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass

from proxy.apis import addresses, byte_rate, internal_topics, producer_ids, topic_rate, volume_pause
from proxy.apis.guards import over
from proxy.apis.plan import ConnectionScope, Plan
from proxy.apis.stages import Planner, Stage, fold, plan_of
from proxy.codec.apis import FETCH, PRODUCE
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
    asks: tuple[Planner, ...] = ()  # the chain's stages asked for every request (they record): the rest are covered


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


def produce_inputs(scope: ConnectionScope, session: Session, header: RequestHeader) -> Hashable | None:
    """What a Produce's chain (without request rate's stage) reads, but for the stages asked for every request
    (producer ids, ``producer_byte_rate``): the request's version (node endpoints from v10), the one topic it writes
    (the internal-topic guard and the exemption of the proxy's own writes; by its name, a topic id named first as
    they name it) and the session's user (an admin principal may write the internal topics; the admin listener and
    whether the connection is the proxy's own are the connection's for good). None while its plan is made for each
    request: a topic byte rate reads each request's body (:func:`proxy.apis.topic_rate.plan_produce`), a volume at
    PAUSE refuses and charges it (:func:`proxy.apis.volume_pause.plan_pause`), a volume past a soft limit records it
    (:func:`proxy.apis.byte_rate.plan_volume_rate`); and while the guard judges each body: a tenant's Produce of
    several topics, or of a topic id the proxy cannot name."""
    quotas = scope.quotas
    volume = quotas.volume
    if quotas.topics.produce_enabled or (volume is not None and (volume.paused or volume.throttling)):
        return None
    topic, guarded = header.only_topic, scope.guard.topics
    if topic is None:
        if guarded:
            return None  # several topics (or the prefix unread): the guard reads the body of a tenant's
    elif topic.__class__ is bytes:  # v13+: by topic id, named as the stages name it
        if not quotas.internal_topics:
            if guarded:
                return None  # the guard names it for a tenant alone
            return header.api_version, None, session.user  # no stage reads it
        topic = scope.topics.name_for(uuid.UUID(bytes=topic))  # what the exemption of own writes reads, each time
        if topic is None:
            return None  # not known yet: the guard looks it up
    return header.api_version, topic, session.user


# each read for every request: proxy/connection/native/stages.c's twins where the extension runs
REUSABLE: Mapping[int, Reuse] = {
    FETCH: Reuse(
        (addresses.plan_fetch, byte_rate.plan_fetch, topic_rate.plan_fetch), over("FetchInputs", fetch_inputs)
    ),
    PRODUCE: Reuse(
        (
            addresses.plan_produce,
            internal_topics.plan_guard,
            internal_topics.exempt_own_writes,
            volume_pause.plan_pause,
            topic_rate.plan_produce,
            byte_rate.plan_volume_rate,
        ),
        over("ProduceInputs", produce_inputs),
        asks=(producer_ids.plan_produce, byte_rate.plan_producer_byte_rate),
    ),
}


def reusable(chains: Mapping[int, tuple[Stage, ...]], declared: Mapping[int, Reuse]) -> dict[int, Inputs]:
    """API key -> the inputs of its chain in ``chains``, for those ``declared``; raises ValueError when a
    declaration does not cover its chain's stages exactly, those it asks for every request apart (a stage added to
    the chain whose inputs are not named)."""
    table: dict[int, Inputs] = {}
    for api_key, reuse in declared.items():
        planners = tuple(stage.plan for stage in chains.get(api_key, ()))
        covered = tuple(planner for planner in planners if planner not in reuse.asks)
        asked = tuple(planner for planner in planners if planner in reuse.asks)
        if covered != reuse.covers or asked != reuse.asks:
            raise ValueError(
                f"the inputs declared for API {api_key}'s plan cover {[p.__qualname__ for p in reuse.covers]} "
                f"(asked each time: {[p.__qualname__ for p in reuse.asks]}), its chain is "
                f"{[p.__qualname__ for p in planners]}: name the new stages' inputs too"
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


def reused_asking(
    chain: tuple[Stage, ...],
    asks: frozenset[Planner],
    scope: ConnectionScope,
    session: Session,
    header: RequestHeader,
    inputs: Hashable,
) -> Plan:
    """The plan of ``chain`` for ``header``, whose stages but those ``asks`` names read ``inputs``: those stages'
    plans are the connection's last ones when its inputs were the same and two requests before it got the very same
    plans from them (else they are asked); the stages ``asks`` names are asked every time, in their place in the
    chain. The plans combine as :func:`~proxy.apis.stages.fold` combines them: in the chain's order, a ``last`` one
    ending it (the stages after it, asked or not, add nothing)."""
    api_key = header.api_key
    last = session.reused.get(api_key)
    if last is None or last[1] != inputs or last[0] is not scope:  # inputs seen first: the stages asked in turn
        session.reused[api_key] = (scope, inputs, None, False, None)  # (a connection whose inputs keep changing
        return fold(chain, scope, session, header)  # pays no more than the inputs for it)
    turns: _Turns = last[2]
    if not last[3]:
        # asked out of turn, and after a plan that ends the chain too: they only read (the inputs name what they read)
        covered = tuple(None if stage.plan in asks else stage.plan(scope, session, header) for stage in chain)
        same = last[4] is not None and all(map(operator.is_, covered, last[4]))  # the very same plans: made once
        steps = [stage.plan if stage.plan in asks else plan for stage, plan in zip(chain, covered)]
        turns = _turns([step for step in steps if step is not None], session, header)
        session.reused[api_key] = (scope, inputs, turns, same, covered)
    # the plans in turn, the asked stages asked in their place; the common case made short: the asked stages come
    # after every plan and add nothing (a Produce within its quotas, its producer id known)
    plan, head, rest, asked_only = turns
    if asked_only:
        for at, ask in enumerate(rest):
            more = ask(scope, session, header)  # type: ignore[operator]
            if more is not None:
                return asked_from(head, rest, at, more, scope, session, header)  # type: ignore[arg-type]
        return plan
    parts = list(head)
    for step in rest:
        found = step if isinstance(step, Plan) else step(scope, session, header)
        if found is not None:
            parts.append(found)
            if found.last:
                break
    return plan_of(parts, session, header)


def asked_from(
    head: tuple[Plan, ...],
    rest: tuple[Planner, ...],
    at: int,
    more: Plan,
    scope: ConnectionScope,
    session: Session,
    header: RequestHeader,
) -> Plan:
    """The plan of :func:`reused_asking`'s turns whose steps after the plans ``head`` are all asked stages (``rest``),
    once ``rest[at]`` made ``more`` (those before it made nothing): the stages after it asked in turn unless ``more``
    ends the chain, and the plans combined as :func:`~proxy.apis.stages.fold` combines them. (Also what the compiled
    planner, proxy/connection/native/planner.c, hands such a request to.)"""
    parts = [*head, more]
    if not more.last:
        for ask in rest[at + 1 :]:
            found = ask(scope, session, header)
            if found is not None:
                parts.append(found)
                if found.last:
                    break
    return plan_of(parts, session, header)


_Turns = tuple[Plan, tuple[Plan, ...], tuple["Plan | Planner", ...], bool]


def _turns(steps: list[Plan | Planner], session: Session, header: RequestHeader) -> _Turns:
    """The chain's plans and asked stages (``steps``, in order) as :func:`reused_asking` takes them: the plans before the
    first asked stage (up to one that ends the chain), their combination, the steps after them, and whether those
    are all asked stages."""
    head: list[Plan] = []
    rest: tuple[Plan | Planner, ...] = ()
    for at, step in enumerate(steps):
        if not isinstance(step, Plan):
            rest = tuple(steps[at:])
            break
        head.append(step)
        if step.last:
            break
    return plan_of(head, session, header), tuple(head), rest, not any(isinstance(step, Plan) for step in rest)
