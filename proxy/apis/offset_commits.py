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

A commit whose frame is no longer than the cap cannot carry metadata over it and is not decoded. The rule for every
request that makes the broker write, this one's included, is :mod:`proxy.apis.broker_writes`.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import TYPE_CHECKING
from uuid import UUID

from proxy.apis.broker_writes import charged, counted_refusal, offset_metadata_bound, paused
from proxy.apis.plan import FORWARD_AS_IS, PASS, AnswerLocally, ConnectionScope, ForwardRequest, Outcome, Plan
from proxy.apis.response_leg import ResponseLeg
from proxy.codec.error_codes import NONE, OFFSET_METADATA_TOO_LARGE
from proxy.codec.frame import BUFFER
from proxy.codec.header import RequestHeader
from proxy.codec.messages import Message, decode_request, decode_response, encode_request, encode_response
from proxy.codec.responses import encode_local_response, error_response
from proxy.session.session import Session

if TYPE_CHECKING:
    from proxy.enforcement.quota_managers import QuotaManagers


def plan_offset_commit(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan:
    quotas = scope.quotas
    plan = charged(quotas, session, header).plan() or PASS
    cap = offset_metadata_bound(quotas)
    if header.size <= cap:
        return plan
    capped = _Capped(header, cap, quotas if paused(quotas) else None)
    return plan.then(Plan(action=BUFFER, decide=capped.decide), header)


class _Capped:
    """One commit: the partitions whose metadata is over the cap answered here, the rest forwarded, one answer."""

    def __init__(self, header: RequestHeader, cap: int, paused: QuotaManagers | None) -> None:
        self.header, self.cap = header, cap
        self.paused = paused  # at PAUSE: where a refusal is counted

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
        if self.paused is not None:
            counted_refusal(self.paused, api_key)
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
