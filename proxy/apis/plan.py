"""What a handler decides for one request, and what it may consult while deciding.

Handlers decide in two phases. At the header they return a :class:`Plan`: stream the request to the broker as it
arrives, answer it locally, or ``BUFFER`` it and ``decide`` once the body is complete. The body decision is an
outcome: :class:`ForwardRequest` (as is, rewritten, or only part of it, with a ``rewrite`` that merges the broker's
answer with the proxy's own per-item errors) or :class:`AnswerLocally` (a response built by the codec, which keeps
the request's place in the response order); a decision that needs a fact the proxy does not have yet
(:class:`LookUp`) asks the broker first on the same connection and decides on its answer; one that must wait
(:class:`HoldFor`) is held by the connection until its time. Throttles decided in either phase, by any number of quota stages,
combine: the longest wins (:func:`quota.primitives.decision.longest`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from proxy.cluster.created_counts import NO_LOOKUPS, CreatedCounts
from proxy.cluster.token_owners import NO_TOKEN_OWNERS, TokenOwners
from proxy.cluster.topics import Topics
from proxy.codec.frame import STREAM, Action
from proxy.codec.responses import encode_local_response, error_response
from proxy.enforcement.internal_topic_guard import NO_GUARD, InternalTopicGuard
from quota.primitives.decision import Decision, Throttle

if TYPE_CHECKING:
    from proxy.cluster.admin_address import AdminAddress
    from proxy.cluster.broker_ports import BrokerPorts
    from proxy.enforcement.quota_managers import QuotaManagers
    from proxy.observers.dynamic_config import DynamicConfig
    from proxy.ops.usage_table import UsageTable

# Rewrites a response body (the bytes after the response header); returns the new body, or None to send the
# broker's frame unchanged.
Rewrite = Callable[[memoryview], "bytes | None"]
# Reads the broker's response body (before any rewrite) to learn from it; changes nothing.
Observe = Callable[[memoryview], None]
# Revises the request's throttle once the broker's answer has been observed and rewritten: takes the throttle
# decided so far, returns the one the response carries and the connection acts on (a Throttle, 0 ms at least).
Settle = Callable[[Throttle], Throttle]


@dataclass(frozen=True, slots=True)
class ForwardRequest:
    """Forward the buffered request: ``body`` replaces the client's (None keeps it); ``rewrite`` is applied to the
    broker's response body after the plan's own (a partial forward merges the items it kept back); ``observe``
    reads the broker's response body after the plan's own observer; ``throttle`` adds to the plan's; ``settle``
    revises the throttle from what the broker answered (KIP-599 gives back what the broker did not do)."""

    body: bytes | None = None
    rewrite: Rewrite | None = None
    throttle: Throttle | None = None
    observe: Observe | None = None
    settle: Settle | None = None


@dataclass(frozen=True, slots=True)
class AnswerLocally:
    """Do not forward: answer with ``frame`` (a whole response frame built by the codec for the request's version
    and correlation id), in the request's place in the response order. An ``acks=0`` Produce gets no answer."""

    frame: bytes
    throttle: Throttle | None = None

    @classmethod
    def failing(cls, header, request, error_code: int, throttle: Throttle, message: str) -> AnswerLocally:
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
        return cls(encode_local_response(header.api_key, version, header.correlation_id, response), throttle=throttle)


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

    start: Callable[[], object]
    then: Callable[[object], ForwardRequest | AnswerLocally]


@dataclass(frozen=True, slots=True)
class HoldFor:
    """Keep the request in the proxy for ``delay_ms`` (a Produce held by the producer-id quota), then let ``then()``
    decide: forward it, or answer. The hold is the connection's own state with its own deadline, ended by the
    connection's one timer (no task sleeps): reading of the client stops at the next boundary meanwhile, but for one
    small read so that its close is seen, and the request keeps its place in the response order. If the client
    leaves first, the plan's ``abandon`` is called and the request is dropped, never forwarded."""

    delay_ms: int
    then: Callable[[], ForwardRequest | AnswerLocally]


Outcome = ForwardRequest | AnswerLocally | LookUp | Await | HoldFor
FORWARD_AS_IS = ForwardRequest()


@dataclass(frozen=True, slots=True)
class Plan:
    action: Action = STREAM  # STREAM the request upstream, BUFFER it for decide, DROP it when answering locally
    rewrite: Rewrite | None = None  # decode and rewrite the response with this
    observe: Observe | None = None  # read the broker's response with this (before any rewrite), changing nothing
    local_response: bytes | None = None  # the whole response frame, when the proxy answers itself
    decide: Callable[[memoryview], Outcome] | None = None  # BUFFER: the outcome, once the body is complete
    throttle: Throttle | None = None  # decided now: merged into the response's throttle_time_ms, then acted on
    record_response: Callable[[int], Decision] | None = None  # decides a throttle from the response size
    # BUFFER: called once if the connection closes before the request was forwarded or answered (what the plan
    # reserved for it is released: a held producer id's token)
    abandon: Callable[[], None] | None = None


PASS = Plan()


@dataclass(frozen=True, slots=True)
class ConnectionScope:
    """What handlers of one listener's connections share: read-only for the request path."""

    cluster: BrokerPorts | None  # cluster mode: broker ports to rewrite addresses to; None in sidecar mode
    topics: Topics  # ids, partition counts, the default: proxy-wide, learnt from the brokers' answers (read here)
    quotas: QuotaManagers
    usage: UsageTable = None  # the usage log's table (None given: proxy.ops.usage_log.NO_USAGE, which keeps nothing)
    client_quotas: DynamicConfig | None = None  # Describe/AlterClientQuotas served by the proxy, when configured
    guard: InternalTopicGuard = NO_GUARD  # who may write the proxy's internal topics (NO_GUARD: nothing guarded)
    counts: CreatedCounts = NO_LOOKUPS  # the counts of topics created with -1 whose answer said none (v4), looked up
    tokens: TokenOwners = NO_TOKEN_OWNERS  # delegation tokens' owners, looked up (NO_TOKEN_OWNERS: none, refused)
    admin_address: AdminAddress | None = None  # the admin listener: its address for every broker; its connections
    # are admins (Session.admin_listener)

    def __post_init__(self) -> None:
        if self.usage is None:
            from proxy.ops.usage_table import NO_USAGE

            object.__setattr__(self, "usage", NO_USAGE)
