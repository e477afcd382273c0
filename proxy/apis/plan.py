"""What a handler decides for one request, and what it may consult while deciding."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from proxy.codec.frame import STREAM, Action
from proxy.codec.messages import TopicIdMap
from quota.decision import Decision, Throttle

if TYPE_CHECKING:
    from proxy.cluster import BrokerPorts
    from proxy.quotas import ByteRateQuotas

# Rewrites a response body (the bytes after the response header); returns the new body, or None to send the
# broker's frame unchanged.
Rewrite = Callable[[memoryview], "bytes | None"]


@dataclass(frozen=True, slots=True)
class Plan:
    action: Action = STREAM  # STREAM the request upstream, BUFFER it for request_rewrite, DROP it when answering locally
    rewrite: Rewrite | None = None  # decode and rewrite the response with this
    local_response: bytes | None = None  # the whole response frame, when the proxy answers itself
    request_rewrite: Rewrite | None = None  # BUFFER: rewrites the request body before it is forwarded
    throttle: Throttle | None = None  # decided now: merged into the response's throttle_time_ms, then acted on
    record_response: Callable[[int], Decision] | None = None  # decides a throttle from the response size


PASS = Plan()


@dataclass(frozen=True, slots=True)
class ConnectionScope:
    """What handlers of one listener's connections share: read-only for the request path."""

    cluster: "BrokerPorts | None"  # cluster mode: broker ports to rewrite addresses to; None in sidecar mode
    topic_ids: TopicIdMap  # learnt from Metadata responses, proxy-wide
    quotas: "ByteRateQuotas"


@dataclass(slots=True)
class Session:
    """Who is on the other end of one client connection: what quota lookups use."""

    listener: str
    peer_ip: str
    user: str = "ANONYMOUS"  # the principal; SASL (roadmap) will set it
