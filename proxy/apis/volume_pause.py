"""Produce at a volume's hard limit (cluster volume usage, PAUSE): refused by the proxy, and charged.

The stage ends Produce's chain while a volume is paused (and the proxy enforces): no later quota stage applies to a
request the proxy answers itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from proxy.apis.broker_writes import PAUSED_MESSAGE, charged, paused, refusal_throttle
from proxy.apis.plan import FORWARD_AS_IS, AnswerLocally, ConnectionScope, Outcome, Plan
from proxy.apis.usage import NO_USAGE, Usage
from proxy.codec.apis import PRODUCE, api_name
from proxy.codec.error_codes import NOT_ENOUGH_REPLICAS
from proxy.codec.frame import BUFFER
from proxy.codec.header import RequestHeader
from proxy.codec.messages import decode_request
from proxy.session.session import Session
from quota.primitives.decision import Throttle

if TYPE_CHECKING:
    from proxy.enforcement.quota_managers import QuotaManagers
    from proxy.enforcement.volume_throttle import VolumeThrottle


def plan_pause(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan | None:
    volume = scope.quotas.volume
    if volume is None or not paused(scope.quotas):
        return None
    return paused_produce(scope, session, volume, header)


def paused_produce(scope: ConnectionScope, session: Session, volume: VolumeThrottle, header: RequestHeader) -> Plan:
    """A volume is at its hard limit: the request is read whole and answered by the proxy with the retriable
    NOT_ENOUGH_REPLICAS after ``pause_delay_ms`` (throttle_time_ms and a mute), so it never reaches the broker and
    the client retries; a request of the proxy's own (or an admin's) that writes only the proxy's internal topics
    (volume-usage snapshots, the dynamic config) goes through, so the publisher is never paused by what it reports.

    A refusal is charged as an answered request is: its bytes are recorded against the client's
    ``producer_byte_rate`` (where none applies, the volume's ``produce_base_rate``, unscaled) and the throttle that
    gives, when longer than ``pause_delay_ms``, is the one reported and muted. Without it a client retrying large
    requests was read and refused at one request per ``pause_delay_ms``, whatever its quota (issue 35: 2,836 times
    the user's quota in request bytes, one core busy). A tenant's request is charged at its header, whatever its body
    names: one naming only internal topics is refused by the internal-topic guard before this decides, and went
    uncharged (issue 44, N10: 13,352 refusals a second, 2,718 times the user's quota)."""
    version, quotas = header.api_version, scope.quotas

    def refuse(body: memoryview, throttle: Throttle, usage: Usage = NO_USAGE) -> Outcome:
        return AnswerLocally.failing(
            header,
            decode_request(PRODUCE, version, body),
            NOT_ENOUGH_REPLICAS,
            throttle,
            PAUSED_MESSAGE.format(what="produce"),
            usage,
        )

    if not scope.guard.allowed(session):
        throttle, usage = _paused_charge(quotas, session, volume, header)
        return Plan(
            action=BUFFER, throttle=throttle, decide=lambda body: refuse(body, throttle), usage=usage, last=True
        )

    def decide(body: memoryview) -> Outcome:
        msg = decode_request(PRODUCE, version, body)
        names = {t.name or scope.topics.name_for(t.topic_id) for t in msg.topic_data}
        if names and names <= quotas.internal_topics:
            return FORWARD_AS_IS
        return refuse(body, *_paused_charge(quotas, session, volume, header))

    return Plan(action=BUFFER, decide=decide, last=True)


def _paused_charge(
    quotas: QuotaManagers, session: Session, volume: VolumeThrottle, header: RequestHeader
) -> tuple[Throttle, Usage]:
    """A produce refused at PAUSE charged as every write is (:func:`proxy.apis.broker_writes.charged`: the client's
    producer_byte_rate, else the volume's base rate) with the pause itself: the longest throttle of the two, what it
    accounted for; and counted."""
    decisions = charged(quotas, session, header)
    volume.refused_write(api_name(PRODUCE))
    return refusal_throttle(quotas, header, decisions), decisions.usage
