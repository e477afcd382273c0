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

ShareFetch (KIP-932's share consumers) is charged to the same ``consumer_byte_rate`` with the same throttle and mute,
and its ``max_bytes`` capped to the headroom, but its answer is never trimmed: every record in it is acquired by the
member (its ``AcquiredRecords``), and one the proxy cut away could not be acknowledged; it would stay locked until
its acquisition lock timed out (``group.share.record.lock.duration.ms``, 30 s by default) and then count as a failed
delivery, archived after ``group.share.delivery.count.limit`` of them. A broker that answers past the cap is paid for
by the mute instead, as a throttled Fetch's data is.

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

from functools import lru_cache, partial

from proxy.apis.decisions import Decisions
from proxy.apis.guards import BudgetTrim, FetchCap, twin_over
from proxy.apis.plan import FORWARD_AS_IS, ConnectionScope, ForwardRequest, Plan
from proxy.apis.response_leg import NO_LEG, ResponseLeg
from proxy.codec.apis import FETCH, FETCH_MAX_BYTES_SINCE, FETCH_REPLICA_STATE_SINCE, SHARE_FETCH
from proxy.codec.fetch_prefix import fact_places, fetch_body_facts, with_max_bytes
from proxy.codec.frame import BUFFER
from proxy.codec.header import RequestHeader
from proxy.codec.messages import Message, decode_request, decode_response, encode_request, encode_response
from proxy.codec.records import iter_batches
from proxy.codec.skim import tagged_fields
from proxy.session.session import Session
from quota.managers.client_quota import ClientQuotaManager
from quota.primitives.decision import FORWARD, Decision
from quota.primitives.entity import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE
from quota.primitives.throttle import INT32_MAX


def pure_plan_producer_byte_rate(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan | None:
    """Produce's stage of ``producer_byte_rate``: the request's bytes recorded at its header; over quota, the
    response carries the throttle and the connection is muted for it. Asked for every Produce, so it has a C twin
    (``plan_producer_byte_rate`` below; native/stages.c's ``ProducerByteRate``): change both together."""
    produce = scope.quotas.produce
    if not produce.enabled:  # no producer_byte_rate anywhere: nothing recorded, as Kafka does
        return None
    decision = produce.record_and_decide(session.user, header.client_id or "", header.size)
    if decision is FORWARD:
        return None  # within quota (the common case): nothing to add, nothing made
    return over_producer_byte_rate(header, decision)


def over_producer_byte_rate(header: RequestHeader, decision: Decision) -> Plan | None:
    """A Produce over its ``producer_byte_rate`` (``decision``, recorded already): the throttle's plan."""
    decisions = Decisions()
    decisions.add(PRODUCER_BYTE_RATE, decision, header.client_id)
    return decisions.plan()


plan_producer_byte_rate = twin_over("ProducerByteRate", pure_plan_producer_byte_rate, over_producer_byte_rate)


def plan_volume_rate(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan | None:
    """Produce's stage of cluster volume usage while a soft limit is crossed: the produce quota scaled by the
    volume's factor. Recorded only while throttling: traffic sent while OPEN is not paid for when a soft limit is
    crossed."""
    volume = scope.quotas.volume
    if volume is None or not volume.throttling:
        return None
    decisions = Decisions()
    decisions.add(
        "volume_usage",
        volume.produce.record_and_decide(session.user, header.client_id or "", header.size),
        header.client_id,
    )
    return decisions.plan()


def plan_fetch(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan | None:
    """Fetch's stage of ``consumer_byte_rate``: ``max_bytes`` capped, the response trimmed to the budget and charged
    as the client gets it (after the earlier stages' rewrites)."""
    if header.replica_id >= 0:  # a follower broker (Fetch v0-14): no consumer quota, no max_bytes cap
        return None
    quota = _consumer_quota(scope, session, header)
    if quota is None:
        return None
    fetch, shadow = quota
    if shadow:  # shadow: counted and reported, nothing capped, trimmed or throttled
        return _shadowed_fetch(fetch, session.user, header.client_id, header.api_version)
    return _fetch_plan(fetch, session.user, header.client_id or "", header.api_version)


@lru_cache(maxsize=256)
def _fetch_plan(fetch: ClientQuotaManager, user: str, client_id: str, version: int) -> Plan:
    """The plan of every consumer Fetch of ``version`` from this client under an enforced quota, made once (a
    polling consumer sends hundreds a second): it holds nothing of one request. From v15 (KIP-903) a follower is known
    only from the body (its replica id is a tagged field at the end): the leg then goes with the decision on the body,
    a consumer's forward carrying it and a follower's none, so no request's answer is trimmed or charged by what
    another request turned out to be. Its steps are :mod:`proxy.apis.guards`' objects (compiled where the extension
    runs), over the manager's methods bound to the client; what they hand on is here."""
    floor = partial(fetch.remaining_floor, user, client_id)  # a lower bound of the budget, without the clock

    def budget() -> int:
        return _budget(fetch, user, client_id)

    def trim(body: memoryview) -> bytes | None:  # may not fit the budget: trimmed to it, exactly
        return trim_fetch_response(version, body, budget())

    # the answer trimmed after the earlier stages' rewrites, on what they produced, and charged as the client gets it
    leg = ResponseLeg(
        rewrite=BudgetTrim(floor, trim), record_response=partial(fetch.record_and_decide, user, client_id)
    )
    if version < FETCH_MAX_BYTES_SINCE:  # no max_bytes to cap: the request streams
        return Plan(leg=leg)
    tagged = version >= FETCH_REPLICA_STATE_SINCE
    fits = ForwardRequest(leg=leg) if tagged else FORWARD_AS_IS

    def capped(body: memoryview, max_bytes: int) -> ForwardRequest:  # it may not fit: the budget, exactly
        capped = budget()
        if capped < max_bytes:
            return ForwardRequest(body=with_max_bytes(version, body, capped), leg=leg if tagged else NO_LEG)
        return fits

    def replica_of(body: memoryview) -> int:  # a ReplicaState is there (v15+): a follower's if its id is >= 0
        return int(decode_request(FETCH, version, body).replica_state.replica_id)

    replica_tag, max_bytes_at = fact_places(version)
    # a follower (v15+) is replication, exempt: its answer goes back untouched
    cap = FetchCap(
        tagged_fields, FETCH, version, replica_tag, max_bytes_at, floor, fits, FORWARD_AS_IS, capped, replica_of
    )
    return Plan(action=BUFFER, leg=NO_LEG if tagged else leg, decide=cap)


def _shadowed_fetch(fetch: ClientQuotaManager, user: str, client_id: str | None, version: int) -> Plan:
    """A consumer Fetch under a shadow quota: from v15 the follower's exemption decided on the body, the counting leg
    going with a consumer's forward."""
    if version < FETCH_REPLICA_STATE_SINCE:
        return _shadowed(fetch, user, client_id)

    def note_follower(body: memoryview) -> ForwardRequest:
        if fetch_body_facts(version, body)[0] >= 0:
            return FORWARD_AS_IS
        return ForwardRequest(leg=_shadowed(fetch, user, client_id).leg)

    return Plan(action=BUFFER, decide=note_follower)


def plan_share_fetch(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan | None:
    """ShareFetch's stage of ``consumer_byte_rate`` (KIP-932's share consumers): ``max_bytes`` capped to the budget
    as a Fetch's is, the answer charged as the client gets it; never trimmed (every record in it is acquired by this
    member, and one cut away would stay locked until its acquisition lock timed out, then count as a failed
    delivery)."""
    quota = _consumer_quota(scope, session, header)
    if quota is None:
        return None
    fetch, shadow = quota
    user, client_id = session.user, header.client_id or ""
    if shadow:
        return _shadowed(fetch, user, header.client_id)
    version = header.api_version

    def cap_max_bytes(body: memoryview) -> ForwardRequest:
        msg = decode_request(SHARE_FETCH, version, body)  # small: topic ids and acknowledgement ranges, no records
        capped = min(msg.max_bytes, _budget(fetch, user, client_id))
        if capped >= msg.max_bytes:
            return FORWARD_AS_IS
        msg.max_bytes = capped
        return ForwardRequest(body=encode_request(SHARE_FETCH, version, msg))

    def record(response_size: int) -> Decision:
        return fetch.record_and_decide(user, client_id, response_size)

    return Plan(action=BUFFER, decide=cap_max_bytes, leg=ResponseLeg(record_response=record))


def _consumer_quota(
    scope: ConnectionScope, session: Session, header: RequestHeader
) -> tuple[ClientQuotaManager, bool] | None:
    """The ``consumer_byte_rate`` manager when a quota applies to the request's client, and whether it is a shadow
    one (``quota.mode: shadow`` or the entry's own mode); None: no consumer quota applies, nothing is recorded."""
    fetch = scope.quotas.fetch
    if not fetch.enabled:
        return None
    applies, shadow_entry = fetch.applies(session.user, header.client_id or "")
    return (fetch, fetch.shadow or shadow_entry) if applies else None


def _budget(fetch: ClientQuotaManager, user: str, client_id: str) -> int:
    """Bytes this client may receive now without going over its quota (at least 1: progress is kept)."""
    headroom = fetch.remaining_in_quota_window(user, client_id)
    return max(1, min(INT32_MAX, int(headroom)))


def _shadowed(fetch: ClientQuotaManager, user: str, client_id: str | None) -> Plan:
    """A consumer quota in shadow mode: the answer counted and its throttle reported, nothing capped, trimmed or
    applied."""
    shadowed = Decisions()  # decided as the response goes: the leg accounts for it, the response path records it

    def record_only(response_size: int) -> Decision:
        decision = fetch.record_and_decide(user, client_id or "", response_size)
        shadowed.add(CONSUMER_BYTE_RATE, decision, client_id)
        return decision

    return Plan(leg=ResponseLeg(record_response=record_only, accounted=lambda later: shadowed.usage))


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
        used, _ = trim_partitions(topic.partitions, budget, used)
    return encode_response(FETCH, version, msg)


def trim_partitions(partitions: list[Message], budget: int, used: int = 0) -> tuple[int, bool]:
    """Cut the records of ``partitions`` at batch boundaries so that, with ``used`` bytes kept before them, at most
    ``budget`` bytes are kept, the first batch always (when ``used`` is 0); the bytes kept in all, and whether
    anything was cut."""
    cut = False
    for partition in partitions:
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
            cut = True
        used += keep
    return used, cut
