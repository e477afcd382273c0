"""What a handler decides for one request, and what it may consult while deciding.

Handlers decide in two phases. At the header they return a :class:`Plan`: stream the request to the broker as it
arrives, answer it locally, or ``BUFFER`` it and ``decide`` once the body is complete. The body decision is an
outcome: :class:`ForwardRequest` (as is, rewritten, or only part of it, with a ``rewrite`` that merges the broker's
answer with the proxy's own per-item errors) or :class:`AnswerLocally` (a response built by the codec, which keeps
the request's place in the response order); a decision that needs a fact the proxy does not have yet
(:class:`LookUp`) asks the broker first on the same connection and decides on its answer; one that must wait
(:class:`HoldFor`) is held by the connection until its time.

A plan owns its response leg (:class:`~proxy.apis.response_leg.ResponseLeg`), as a forwarded outcome does. Plans of
several stages combine one way only, :meth:`Plan.then`: the strongest action, the longest throttle
(:func:`quota.primitives.decision.longest`), the later stage deciding on what the earlier's decision produced, the
legs chained, every abandon called, usage added (:class:`~proxy.apis.usage.Usage`: accounting is data, recorded by
the request path); no field is copied or overridden by hand, so a field added next month is kept.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from proxy.apis.response_leg import NO_LEG, ResponseLeg
from proxy.apis.usage import NO_USAGE, Usage
from proxy.cluster.created_counts import NO_LOOKUPS, CreatedCounts
from proxy.cluster.creation_claims import ALONE, CreationClaims
from proxy.cluster.token_owners import NO_TOKEN_OWNERS, TokenOwners
from proxy.cluster.topics import Topics
from proxy.codec.apis import response_header_version
from proxy.codec.frame import BUFFER, DROP, STREAM, Action
from proxy.codec.header import RequestHeader
from proxy.codec.header import frame as encode_frame
from proxy.codec.responses import encode_local_response, error_response
from proxy.codec.schema import Message
from proxy.enforcement.internal_topic_guard import NO_GUARD, InternalTopicGuard
from quota.primitives.decision import Throttle, longest

if TYPE_CHECKING:
    from proxy.apis.config_topic import ConfigTopic
    from proxy.cluster.admin_address import AdminAddress
    from proxy.cluster.broker_ports import BrokerPorts
    from proxy.enforcement.quota_managers import QuotaManagers

Decide = Callable[[memoryview], "Outcome"]


@dataclass(frozen=True, slots=True)
class ForwardRequest:
    """Forward the buffered request: ``body`` replaces the client's (None keeps it); ``leg`` is what the broker's
    response goes through after the plan's own (a partial forward merges the items it kept back into it; KIP-599
    settles the throttle from what the broker did); ``throttle`` adds to the plan's."""

    body: bytes | None = None
    leg: ResponseLeg = NO_LEG
    throttle: Throttle | None = None
    usage: Usage = NO_USAGE  # what deciding accounted for (recorded by the request path)


@dataclass(frozen=True, slots=True)
class AnswerLocally:
    """Do not forward: answer with ``frame`` (a whole response frame built by the codec for the request's version
    and correlation id), in the request's place in the response order. An ``acks=0`` Produce gets no answer."""

    frame: bytes
    throttle: Throttle | None = None
    usage: Usage = NO_USAGE  # what deciding accounted for (recorded by the request path)

    @classmethod
    def failing(
        cls,
        header: RequestHeader,
        request: Message,
        error_code: int,
        throttle: Throttle,
        message: str,
        usage: Usage = NO_USAGE,
    ) -> AnswerLocally:
        """The request (``header``, its decoded body ``request``) answered with ``error_code`` for every item,
        ``throttle_time_ms`` and ``message``, and the connection throttled with ``throttle``."""
        version = header.api_version
        response = error_response(
            header.api_key,
            version,
            request,
            error_code,
            throttle_time_ms=throttle.throttle_time_ms,
            error_message=message,
        )
        frame = encode_local_response(header.api_key, version, header.correlation_id, response)
        return cls(frame, throttle=throttle, usage=usage)


@dataclass(frozen=True, slots=True)
class LookUp:
    """Ask the broker something first, on this connection: a request of the proxy's own (``body`` of ``api_key``
    v``api_version``) goes upstream now, reading of the client stops at the next boundary, and ``then`` decides the
    outcome from the answer's body (the request keeps its place in the response order)."""

    api_key: int
    api_version: int
    body: bytes
    then: Callable[[memoryview], Outcome]
    client_id: str | None = None  # the header's client id (None: the proxy's own), e.g. the client's when the
    # request is the client's, passed on in part (the broker's request quota then counts it for that client)


@dataclass(frozen=True, slots=True)
class Await:
    """Decide after some work of the proxy's own (writing the config topic): ``start()`` is awaited off the request
    path, reading of the client stops at the next boundary meanwhile, and ``then`` decides from its result (or the
    exception it raised): an answer, or forwarding the request after all; the request keeps its place in the
    response order. The work must be bounded."""

    start: Callable[[], Awaitable[object]]
    then: Callable[[object], Outcome]


@dataclass(frozen=True, slots=True)
class HoldFor:
    """Keep the request in the proxy for ``delay_ms`` (a Produce held by the producer-id quota), then let ``then()``
    decide: forward it, or answer. The hold is the connection's own state with its own deadline, ended by the
    connection's one timer (no task sleeps): reading of the client stops at the next boundary meanwhile, but for one
    small read so that its close is seen, and the request keeps its place in the response order. If the client
    leaves first, the plan's ``abandon`` is called and the request is dropped, never forwarded."""

    delay_ms: int
    then: Callable[[], Outcome]


Outcome = ForwardRequest | AnswerLocally | LookUp | Await | HoldFor
FORWARD_AS_IS = ForwardRequest()


@dataclass(frozen=True, slots=True)
class Plan:
    action: Action = STREAM  # STREAM the request upstream, BUFFER it for decide, DROP it when answering locally
    leg: ResponseLeg = NO_LEG  # what the broker's response goes through (observed, rewritten, charged)
    local_response: bytes | None = None  # the whole response frame, when the proxy answers itself
    decide: Decide | None = None  # BUFFER: the outcome, once the body is complete
    throttle: Throttle | None = None  # decided now: merged into the response's throttle_time_ms, then acted on
    # BUFFER: called once if the connection closes before the request was forwarded or answered (what the plan
    # reserved for it is released: a held producer id's token)
    abandon: Callable[[], None] | None = None
    usage: Usage = NO_USAGE  # what planning accounted for (recorded by the request path at the header)
    last: bool = False  # no later stage plans this request (the stage ended the chain)

    def then(self, later: Plan, header: RequestHeader) -> Plan:
        """This plan (an earlier stage's), then ``later``'s, for the request of ``header``: the one way plans
        combine. The strongest action; the longest throttle; ``later`` decides on what this plan's decision
        produced (:func:`then_outcome`); the response goes through this leg, then ``later``'s; both abandons are
        called; the usage added; ``later`` may end the chain. A plan that ended the chain takes nothing more. Reads
        nothing of ``header`` but its API key and version: :func:`proxy.apis.stages.fold` reuses a combination for a
        connection's later requests of that API and version."""
        if self.last or later is PASS:
            return self
        if self is PASS:
            return later
        if (
            self.action is STREAM
            and self.decide is None
            and self.throttle is None
            and self.abandon is None
            and self.usage is NO_USAGE
            and self.local_response is None
        ):  # a leg and nothing else (cluster mode's node endpoints before a Fetch's quota): the rule, made short
            return Plan(
                action=later.action,
                leg=self.leg.then(later.leg),
                local_response=later.local_response,
                decide=later.decide,
                throttle=later.throttle,
                abandon=later.abandon,
                usage=later.usage,
                last=later.last,
            )
        return Plan(
            action=max(self.action, later.action, key=_STRENGTH.__getitem__),
            leg=self.leg.then(later.leg),
            local_response=later.local_response if later.local_response is not None else self.local_response,
            decide=_decided_in_turn(self.decide, later.decide, header),
            throttle=_longest(self.throttle, later.throttle),
            abandon=_both(self.abandon, later.abandon),
            usage=self.usage + later.usage,
            last=later.last,
        )


_STRENGTH = {STREAM: 0, BUFFER: 1, DROP: 2}  # a stage that buffers (or answers) outweighs one that streams


def then_outcome(first: Outcome, later: Decide | None, header: RequestHeader, body: memoryview) -> Outcome:
    """An earlier stage's outcome on ``body``, then ``later``'s decision on what it produced: a forward's body
    (or the client's) is decided by ``later`` and the two combine (its leg after this one's, the longest throttle,
    its body if it rewrote one); a local answer ends the chain; a lookup, a wait or a hold decides ``later`` once
    it is over."""
    if later is None:
        return first
    if isinstance(first, ForwardRequest):
        second = later(body if first.body is None else memoryview(first.body))
        return _forwarded_then(first, second, header)
    if isinstance(first, AnswerLocally):
        return first
    if isinstance(first, (LookUp, Await)):
        then: Callable[[Any], Outcome] = first.then  # a LookUp's takes the answer's body, an Await's what it awaited
        return dataclasses.replace(first, then=lambda answer: then_outcome(then(answer), later, header, body))
    then_held = first.then
    return dataclasses.replace(first, then=lambda: then_outcome(then_held(), later, header, body))


def _forwarded_then(first: ForwardRequest, second: Outcome, header: RequestHeader) -> Outcome:
    """A forward, then a later stage's outcome on what it forwards."""
    if isinstance(second, ForwardRequest):
        return ForwardRequest(
            body=second.body if second.body is not None else first.body,
            leg=first.leg.then(second.leg),
            throttle=_longest(first.throttle, second.throttle),
            usage=first.usage + second.usage,
        )
    if isinstance(second, AnswerLocally):  # answered for what the first would have forwarded: its leg applies
        rewrite = first.leg.rewrite
        frame = second.frame
        if rewrite is not None:
            at = 4 + (5 if response_header_version(header.api_key, header.api_version) else 4)
            rewritten = rewrite(memoryview(frame)[at:])
            if rewritten is not None:
                frame = encode_frame(bytes(frame[4:at]) + rewritten)
        return AnswerLocally(frame, _longest(first.throttle, second.throttle), first.usage + second.usage)
    if isinstance(second, (LookUp, Await)):
        then: Callable[[Any], Outcome] = second.then  # a LookUp's takes the answer's body, an Await's what it awaited
        return dataclasses.replace(second, then=lambda answer: _forwarded_then(first, then(answer), header))
    then_held = second.then
    return dataclasses.replace(second, then=lambda: _forwarded_then(first, then_held(), header))


def _decided_in_turn(first: Decide | None, later: Decide | None, header: RequestHeader) -> Decide | None:
    if first is None or later is None:
        return first or later

    def decide(body: memoryview) -> Outcome:
        return then_outcome(first(body), later, header, body)

    return decide


def _longest(a: Throttle | None, b: Throttle | None) -> Throttle | None:
    if a is None or b is None:
        return a or b
    return longest(a, b)


def _both(first: Callable[[], None] | None, second: Callable[[], None] | None) -> Callable[[], None] | None:
    if first is None or second is None:
        return first or second

    def both() -> None:
        first()
        second()

    return both


PASS = Plan()


@dataclass(frozen=True, slots=True)
class ConnectionScope:
    """What handlers of one listener's connections share: read-only for the request path."""

    cluster: BrokerPorts | None  # cluster mode: broker ports to rewrite addresses to; None in sidecar mode
    topics: Topics  # ids, partition counts, the default: proxy-wide, learnt from the brokers' answers (read here)
    quotas: QuotaManagers
    client_quotas: ConfigTopic | None = None  # Describe/AlterClientQuotas served by the proxy, when configured
    guard: InternalTopicGuard = NO_GUARD  # who may write the proxy's internal topics (NO_GUARD: nothing guarded)
    counts: CreatedCounts = NO_LOOKUPS  # the counts of topics created with -1 whose answer said none (v4), looked up
    claims: CreationClaims = ALONE  # workers: which of them charges a topic each saw created (ALONE: this process)
    tokens: TokenOwners = NO_TOKEN_OWNERS  # delegation tokens' owners, looked up (NO_TOKEN_OWNERS: none, refused)
    admin_address: AdminAddress | None = None  # the admin listener: its address for every broker; its connections
    # are admins (Session.admin_listener)
