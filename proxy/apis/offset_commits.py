"""OffsetCommit and TxnOffsetCommit: what a tenant writes to ``__consumer_offsets``, bounded and paid for (issue 44,
T3).

A commit is a write to the broker's disk like a produce, and its per-partition metadata is the tenant's to fill:
50 partitions of 4,000 characters on 4 connections put 151.5 MB/s of commits on a Kafka broker's disk through a
proxy at PAUSE, under a 100 kB/s ``producer_byte_rate``. So:

- **capped**: metadata longer than ``offset.metadata.max.bytes`` (Kafka's broker setting and default, 4096) is
  answered OFFSET_METADATA_TOO_LARGE for that partition by the proxy, as Kafka's group coordinator answers it, and
  never forwarded; the other partitions go on and the two answers are merged. While a volume is at PAUSE the bound
  is 0: offsets are still committed (consumers keep their place), metadata is not.
- **charged**: the request's bytes are recorded against the client's ``producer_byte_rate`` at its header, as a
  Produce's are, and the throttle that gives is reported and muted; at PAUSE, where no ``producer_byte_rate``
  applies, against the volume's ``produce_base_rate`` (what a refused produce is charged against).

A commit whose frame is no longer than the cap cannot carry metadata over it and is not decoded.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from uuid import UUID

from proxy.apis.decisions import Decisions
from proxy.apis.plan import FORWARD_AS_IS, PASS, AnswerLocally, ConnectionScope, ForwardRequest, Outcome, Plan
from proxy.apis.response_leg import ResponseLeg
from proxy.apis.usage import NO_USAGE
from proxy.codec.error_codes import NONE, OFFSET_METADATA_TOO_LARGE
from proxy.codec.frame import BUFFER
from proxy.codec.header import RequestHeader
from proxy.codec.messages import Message, decode_request, decode_response, encode_request, encode_response
from proxy.codec.responses import encode_local_response, error_response
from proxy.session.session import Session
from quota.primitives.entity import PRODUCER_BYTE_RATE


def plan_offset_commit(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan:
    quotas, user, client_id = scope.quotas, session.user, header.client_id or ""
    volume = quotas.volume
    paused = volume is not None and volume.paused and not quotas.mode.shadow
    decisions = Decisions()
    if quotas.produce.enabled and not quotas.produce.resolve(user, client_id).unlimited:
        decisions.add(
            PRODUCER_BYTE_RATE, quotas.produce.record_and_decide(user, client_id, header.size), header.client_id
        )
    elif paused and volume is not None:  # paused: a volume is configured
        decisions.add("volume_usage", volume.refused.record_and_decide(user, client_id, header.size), header.client_id)
    cap = 0 if paused else quotas.offset_metadata_max_bytes
    plan = PASS
    if decisions.throttle is not None or decisions.usage is not NO_USAGE:
        plan = Plan(throttle=decisions.throttle, usage=decisions.usage)
    if header.size <= cap:
        return plan
    capped = _Capped(header, cap)
    return plan.then(Plan(action=BUFFER, decide=capped.decide), header)


class _Capped:
    """One commit: the partitions whose metadata is over the cap answered here, the rest forwarded, one answer."""

    def __init__(self, header: RequestHeader, cap: int) -> None:
        self.header, self.cap = header, cap

    def decide(self, body: memoryview) -> Outcome:
        api_key, version = self.header.api_key, self.header.api_version
        msg = decode_request(api_key, version, body)
        over: dict[Hashable, int] = {
            (_key(t), p.partition_index): OFFSET_METADATA_TOO_LARGE
            for t in msg.topics
            for p in t.partitions
            if p.committed_metadata is not None and len(p.committed_metadata) > self.cap
        }
        if not over:
            return FORWARD_AS_IS
        refusal = error_response(api_key, version, _keeping(msg, over, True), NONE, item_errors=over)
        rest = _keeping(decode_request(api_key, version, body), over, False)
        if not rest.topics:
            return AnswerLocally(encode_local_response(api_key, version, self.header.correlation_id, refusal))

        def merge(answer: memoryview) -> bytes:
            response = decode_response(api_key, version, answer)
            response.topics = list(response.topics) + list(refusal.topics)
            return encode_response(api_key, version, response)

        return ForwardRequest(body=encode_request(api_key, version, rest), leg=ResponseLeg(rewrite=merge))


def _key(topic: Message) -> str | UUID | None:
    """How a committed topic is named: its name, or its id (OffsetCommit v10+ may send only the id)."""
    return topic.name or getattr(topic, "topic_id", None)


def _keeping(msg: Message, over: Mapping[Hashable, int], refused: bool) -> Message:
    """``msg`` (a decoded request, changed in place) with only the partitions in ``over`` (``refused``) or only the
    others; topics left with none dropped."""
    for topic in msg.topics:
        topic.partitions = [p for p in topic.partitions if ((_key(topic), p.partition_index) in over) == refused]
    msg.topics = [t for t in msg.topics if t.partitions]
    return msg
