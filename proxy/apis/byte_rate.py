"""Produce and fetch byte-rate quotas (KIP-13, KIP-219), enforced as the broker enforces them.

Produce: the request is forwarded at once (its data is appended), its size is recorded against the client's
``producer_byte_rate``, and when over quota the response carries ``throttle_time_ms = max(broker's, ours)``.
The response goes back at once and the connection is muted for the throttle time, in every version, as Kafka's
broker does since 2.0 (a client before KIP-219, Produce v0-5, does not back off by itself: the mute holds its next
request). An ``acks=0`` produce has no response, so only the mute applies. A Produce's producer id is decided first
(:mod:`proxy.apis.producer_ids`, KIP-936): a new one over its user's quota may hold the request before the broker
sees it, or have it answered by the proxy.

Fetch: ``max_bytes`` is capped at what the client may still receive without going over its quota (the headroom
of its sampled rate, ``limit * windowSize - total``, never more than Kafka's ``getMaxValueInQuotaWindow``).
Kafka caps at ``getMaxValueInQuotaWindow`` alone and relies on an unbounded throttle to pay for a large response;
here throttles are capped (``quota.mute.max.ms``) so a client is never muted past its request timeout, and a
response that would need a longer throttle would let the client exceed its quota. Sizing each fetch to the
headroom keeps every throttle small instead. A broker that returns more than asked (Tansu ignores ``max_bytes``;
Kafka returns an oversized first batch) has its response cut at a record-batch boundary to fit: batches are
never split or re-encoded, the first batch is always kept so the consumer makes progress, and the client
fetches the rest from its next offset (safe for incremental fetch sessions, whose offsets come from requests).
The size of what goes to the client is recorded against ``consumer_byte_rate``. When over quota the response
goes back with ``throttle_time_ms`` and the connection is muted, so the next fetch is held before it reaches the
broker (for Fetch v0-7 that holding *is* KIP-13's delay). Kafka itself answers a throttled
fetch with an empty response and unrecords the bytes; the proxy cannot unread data the broker already sent, and
dropping it would make the broker read it twice and desynchronise incremental fetch sessions (KIP-227), whose
broker-side state moved on when the response was built. So the data is delivered, stays recorded, and the mute
pays for it: over time the client gets exactly its quota.

Muting, not the client's goodwill, is what holds clients that ignore ``throttle_time_ms`` (librdkafka, aiokafka).

A Fetch from a follower broker (replica id >= 0; Kafka's ``isFromFollower``) is replication, not consumption: as in
Kafka it is exempt, its ``max_bytes`` not capped, its response neither trimmed nor recorded, never throttled or
muted, in enforce and shadow mode alike; a consumer's Fetch on the same connection keeps the rules above. For
v0-14 the replica id is read with the header and a follower's Fetch is planned as if no quota were configured; from
v15 (KIP-903) it is a tagged field at the body's end, so the request is read whole and the exemption decided on it.
Whether the sender may replicate is the broker's to check, as with Kafka (CLUSTER_ACTION on the cluster; without it
every partition answers TOPIC_AUTHORIZATION_FAILED), so claiming a replica id fetches no data past an authorizer.
"""

from __future__ import annotations

from proxy.apis import addresses, producer_ids
from proxy.apis.decisions import Decisions
from proxy.apis.plan import FORWARD_AS_IS, AnswerLocally, ConnectionScope, ForwardRequest, Outcome, Plan
from proxy.apis.response_leg import ResponseLeg
from proxy.apis.usage import NO_USAGE, Usage
from proxy.codec.apis import FETCH, FETCH_MAX_BYTES_SINCE, FETCH_REPLICA_STATE_SINCE, PRODUCE
from proxy.codec.error_codes import NOT_ENOUGH_REPLICAS
from proxy.codec.frame import BUFFER, STREAM
from proxy.codec.header import RequestHeader
from proxy.codec.messages import decode_request, decode_response, encode_request, encode_response
from proxy.codec.records import iter_batches
from proxy.session.session import Session
from quota.managers.producer_ids import Refuse
from quota.primitives.decision import FORWARD, Throttle
from quota.primitives.entity import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE
from quota.primitives.throttle import INT32_MAX


def plan_produce(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan:
    base = addresses.plan_produce(scope, session, header)
    quotas = scope.quotas
    if (
        header.only_topic is not None
        and quotas.internal_topics
        and quotas.is_internal(header.only_topic, scope.topics)
        and scope.guard.allowed(session)
    ):
        return base  # the proxy (or an admin) writing its own topic: no quota applies, nor PAUSE
    volume = quotas.volume
    if volume is not None and volume.paused and not quotas.mode.shadow:
        return paused_produce(scope, session, volume, header, base)
    decisions = Decisions()
    hold = producer_ids.decide_produce(scope, session, header, decisions)  # KIP-936: a new producer id is counted
    if isinstance(hold, Refuse):  # held past the bound: answered here, nothing else recorded for it
        return producer_ids.refused(header, hold, decisions.usage)
    if quotas.produce.enabled:  # no producer_byte_rate anywhere: nothing recorded, as Kafka does
        decisions.add(
            PRODUCER_BYTE_RATE,
            quotas.produce.record_and_decide(session.user, header.client_id or "", header.size),
            header.client_id,
        )
    if volume is not None and volume.throttling:  # cluster volume usage: the produce quota scaled by its factor
        # Recorded only while throttling: traffic sent while OPEN is not paid for when a soft limit is crossed.
        decisions.add(
            "volume_usage",
            volume.produce.record_and_decide(session.user, header.client_id or "", header.size),
            header.client_id,
        )
    if decisions.throttle is not None or decisions.usage is not NO_USAGE:
        base = base.then(Plan(throttle=decisions.throttle, usage=decisions.usage), header)
    plan = base
    return plan if hold is None else producer_ids.held(scope, session, header, plan, hold)


def paused_produce(scope: ConnectionScope, session: Session, volume, header: RequestHeader, base: Plan) -> Plan:
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
            "kafka-quota-proxy: a broker volume is at its hard limit; produce is paused until usage drops (retry)",
            usage,
        )

    if not scope.guard.allowed(session):
        throttle, usage = _paused_charge(quotas, session, volume, header)
        refused = Plan(action=BUFFER, throttle=throttle, decide=lambda body: refuse(body, throttle), usage=usage)
        return base.then(refused, header)

    def decide(body: memoryview) -> Outcome:
        msg = decode_request(PRODUCE, version, body)
        names = {t.name or scope.topics.name_for(t.topic_id) for t in msg.topic_data}
        if names and names <= quotas.internal_topics:
            return FORWARD_AS_IS
        return refuse(body, *_paused_charge(quotas, session, volume, header))

    return base.then(Plan(action=BUFFER, decide=decide), header)


def _paused_charge(quotas, session: Session, volume, header: RequestHeader) -> tuple[Throttle, Usage]:
    """A produce refused at PAUSE recorded (the client's producer_byte_rate, else the volume's base rate) with the
    pause itself: the longest throttle of the two, and what it accounted for."""
    delay, user, client_id = volume.config.pause_delay_ms, session.user, header.client_id or ""
    decisions = Decisions()
    decisions.add("volume_usage", Throttle(delay, delay), header.client_id)  # the pause itself
    if quotas.produce.enabled and not quotas.produce.resolve(user, client_id).unlimited:
        decisions.add(
            PRODUCER_BYTE_RATE, quotas.produce.record_and_decide(user, client_id, header.size), header.client_id
        )
    else:
        decisions.add("volume_usage", volume.refused.record_and_decide(user, client_id, header.size), header.client_id)
    return decisions.throttle, decisions.usage


def plan_fetch(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan:
    base = addresses.plan_fetch(scope, session, header)
    if header.replica_id >= 0:  # a follower broker (Fetch v0-14): no consumer quota, no max_bytes cap
        return base
    fetch = scope.quotas.fetch
    if not fetch.enabled:
        return base
    user, client_id = session.user, header.client_id or ""
    resolved = fetch.resolve(user, client_id)
    if resolved.unlimited:
        return base
    version = header.api_version
    quotas = scope.quotas
    # From v15 the replica id is in the body's tagged fields: the body is read whole and ``follower`` set on it
    # before the request goes upstream, so before its response comes back.
    tagged = version >= FETCH_REPLICA_STATE_SINCE
    follower = False

    def note_follower(body: memoryview) -> ForwardRequest:
        nonlocal follower
        follower = decode_request(FETCH, version, body).replica_state.replica_id >= 0
        return FORWARD_AS_IS

    if fetch.shadow or resolved.shadow:  # shadow: counted and reported, nothing capped, trimmed or throttled

        def record_only(response_size: int):
            if follower:
                return FORWARD
            decision = fetch.record_and_decide(user, client_id, response_size)
            # decided as the response goes: noted here, in the usage log's row when there is one (not plan data)
            shadow_ms = quotas.shadows.note(CONSUMER_BYTE_RATE, decision, user, client_id)
            if shadow_ms and scope.usage is not None:
                scope.usage.for_request(session, header).shadow_throttle_ms += shadow_ms
            return decision

        return base.then(
            Plan(
                action=BUFFER if tagged else STREAM,
                decide=note_follower if tagged else None,
                leg=ResponseLeg(record_response=record_only),
            ),
            header,
        )

    def budget() -> int:
        """Bytes this client may receive now without going over its quota (at least 1: progress is kept)."""
        headroom = fetch.remaining_in_quota_window(user, client_id)
        return max(1, min(INT32_MAX, int(headroom)))

    def cap_max_bytes(body: memoryview) -> ForwardRequest:
        nonlocal follower
        msg = decode_request(FETCH, version, body)
        if tagged and msg.replica_state.replica_id >= 0:
            follower = True
            return FORWARD_AS_IS
        capped = min(msg.max_bytes, budget())
        if capped >= msg.max_bytes:
            return FORWARD_AS_IS
        msg.max_bytes = capped
        return ForwardRequest(body=encode_request(FETCH, version, msg))

    def trim(body: memoryview) -> bytes | None:  # after the earlier stages' rewrites, on what they produced
        return None if follower else trim_fetch_response(version, body, budget())

    def record(response_size: int):
        if follower:
            return FORWARD
        return fetch.record_and_decide(user, client_id, response_size)

    capped = version >= FETCH_MAX_BYTES_SINCE
    return base.then(
        Plan(
            action=BUFFER if capped else STREAM,
            leg=ResponseLeg(rewrite=trim, record_response=record),
            decide=cap_max_bytes if capped else None,
        ),
        header,
    )


def trim_fetch_response(version: int, body: bytes | memoryview, budget: int) -> bytes | None:
    """Cut the records of a Fetch response at batch boundaries so they total at most ``budget`` bytes.

    The first batch of the first non-empty partition is always kept (Kafka's rule for an oversized batch), so a
    consumer always makes progress. Returns None when nothing needs cutting.
    """
    if len(body) <= budget:
        return None  # the records are part of the body: nothing to cut, no need to decode
    msg = decode_response(FETCH, version, body)
    total = sum(len(p.records) for t in msg.responses for p in t.partitions if p.records is not None)
    if total <= budget:
        return None
    used = 0
    for topic in msg.responses:
        for partition in topic.partitions:
            records = partition.records
            if not records:
                continue
            keep = 0
            for batch in iter_batches(records, allow_truncated=True):
                if used + keep + batch.size_bytes > budget and (used or keep):
                    break
                keep += batch.size_bytes
            if keep < len(records):
                partition.records = records[:keep]
            used += keep
    return encode_response(FETCH, version, msg)
