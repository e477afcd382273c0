"""The producer-id quota (KIP-936) on the request path: Produce (counted, and held or throttled) and InitProducerId
(attribution).

**Produce.** The producer ids of every record batch of every partition are read with the header
(:mod:`proxy.codec.produce_prefix`: a request of one batch from a bounded prefix, any other read whole first) and
decided by :class:`quota.managers.producer_ids.ProducerIdQuotaManager` before a byte of the request moves (a request from a
real producer carries one; a crafted one carrying several has each new one counted and held, all or nothing):

- a known producer id, another user's, or one the bucket has a token for: forwarded as it comes;
- ``producer.id.quota.enforcement: throttle`` (the KIP's behaviour): forwarded, and the response carries the
  throttle (the broker has the new id by then);
- ``hold`` (the default), the user's bucket empty: the request is read whole and kept in the proxy (a
  :class:`~proxy.apis.plan.HoldFor`, a deadline of the connection's own: nothing more is read from the connection
  meanwhile, and the request keeps its place in the response order), then forwarded as it is when the quota lets its id through, so the
  broker sees new ids at no more than the configured rate, plus the burst, whatever connections they come on. If
  the connection closes before that (a restart loop giving up), the hold is abandoned
  (:meth:`quota.managers.producer_ids.ProducerIdQuotaManager.abandon`): the id is not known and its token goes back. The id
  is known (here, and to the workers and proxies sharing usage) only once the request is forwarded
  (:meth:`~quota.managers.producer_id_holds.HoldEnforcement.admitted`), never while it is held;
- a hold that would last longer than ``producer.id.quota.max.hold.ms``, or whose bytes would pass
  ``connections.max.held.request.bytes`` on its connection or ``max.held.request.bytes`` in the process
  (:mod:`quota.primitives.held_bytes`; reserved at the header, released when the request is forwarded or dropped): answered by the proxy with
  ``NOT_ENOUGH_REPLICAS`` and ``throttle_time_ms`` (then a mute), never forwarded. NOT_ENOUGH_REPLICAS is what a
  broker answers before it appends anything (the ISR is short): every client retries it (Java's
  ``NotEnoughReplicasException`` is retriable; librdkafka retries it as not persisted), and an idempotent producer
  resends the same batch with the same sequence, so nothing is lost or written twice. ``REQUEST_TIMED_OUT`` would
  say "maybe written"; ``THROTTLING_QUOTA_EXCEEDED`` is not a Produce error: a client that does not expect it
  there may fail the batch instead of retrying it (Java clients before 2.7 do not know the code at all).

The producer id is checked once per connection per quarter window (``recheck_ms``) while it stays the same; a
refused one is not remembered, so the connection's retry is judged again.

**InitProducerId.** Answers are decoded (only while a ``producer_ids_rate`` is configured) to attribute each
producer id the broker issues to the (user, client-id, IP) that asked for it, for the ``producer_ids_issued_total``
metric. The response goes to the client unchanged. The quota itself counts on Produce, as the KIP specifies:
InitProducerId is not held (the KIP's rejected alternative 4: a producer id costs the broker only once it produces).
"""

from __future__ import annotations

from proxy.apis.decisions import Decisions
from proxy.apis.guards import twin_over
from proxy.apis.plan import FORWARD_AS_IS, PASS, AnswerLocally, ConnectionScope, HoldFor, Outcome, Plan
from proxy.apis.response_leg import ResponseLeg
from proxy.apis.usage import Usage
from proxy.codec.apis import INIT_PRODUCER_ID, PRODUCE
from proxy.codec.error_codes import NONE, NOT_ENOUGH_REPLICAS
from proxy.codec.frame import BUFFER
from proxy.codec.header import RequestHeader
from proxy.codec.messages import decode_request, decode_response
from proxy.session.session import Session
from quota.managers.producer_ids import Hold, Refuse
from quota.primitives.entity import PRODUCER_IDS_RATE
from quota.primitives.held_bytes import HeldBytes

REFUSED_MESSAGE = (
    "kafka-quota-proxy: too many new producer ids for this user (producer_ids_rate); the producer id "
    "is admitted when the quota allows it (retry)"
)
NO_ROOM_MESSAGE = (
    "kafka-quota-proxy: too many new producer ids for this user (producer_ids_rate) and no room to hold "
    "this request (max.held.request.bytes); the producer id is admitted when the quota allows it (retry)"
)


def pure_plan_produce(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan | None:
    """Produce's stage of ``producer_ids_rate``: a throttle, a hold, or a refusal that ends the chain (answered
    here: nothing else is recorded for it). The connection's producer id checked recently (most requests) makes
    nothing. Asked for every Produce, so it has a C twin (``plan_produce`` below; native/stages.c's
    ``ProducerIdStage``, which hands what it does not answer to :func:`count_produce`): change both together."""
    quotas = scope.quotas
    quota = quotas.producer_ids
    pids = header.producer_ids
    if not pids or not quota.enabled:
        return None
    now = quotas.clock.now_ms()
    # the connection's last producer id, checked recently: known, nothing to count (checked again every quarter
    # window, so a PID still in use is carried into the user's newer bloom filter in time)
    if len(pids) == 1 and pids[0] == session.producer_id and now - session.producer_id_checked_ms < quota.recheck_ms:
        return None
    return count_produce(scope, session, header, now)


def count_produce(scope: ConnectionScope, session: Session, header: RequestHeader, now: int) -> Plan | None:
    """A Produce whose producer ids are to be counted at ``now``: the throttle's, the hold's or the refusal's plan."""
    decisions = Decisions()
    hold = _count(scope, session, header, decisions, now)
    if isinstance(hold, Refuse):
        return refused(header, hold, decisions.usage)
    if isinstance(hold, Hold):
        return held(scope, session, header, hold, decisions.usage)
    return decisions.plan()


plan_produce = twin_over("ProducerIdStage", pure_plan_produce, count_produce)


def _count(
    scope: ConnectionScope, session: Session, header: RequestHeader, decisions: Decisions, now: int
) -> Hold | Refuse | None:
    """Count a Produce's producer ids against its user's quota at ``now``. A throttle (or a shadow one) goes into
    ``decisions``; a hold or a refusal is returned for the caller to plan with :func:`held` or :func:`refused`."""
    quota = scope.quotas.producer_ids
    pids = header.producer_ids
    one = len(pids) == 1
    counted = quota.new_pids_counted
    held_bytes, nbytes = scope.quotas.held_bytes, header.frame_length
    full = held_bytes.full(session.held_bytes, nbytes)  # a hold would not fit: refused instead, nothing counted
    decision = (
        quota.record_and_decide(session.user, pids[0], now, full is None)
        if one
        else quota.record_and_decide_all(session.user, pids, now, full is None)
    )
    if quota.new_pids_counted != counted:
        decisions.usage += Usage(new_producer_ids=quota.new_pids_counted - counted)
    if isinstance(decision, Refuse):
        if decision.no_room:
            assert full is not None  # no room is decided only when a hold would not fit (the bound named)
            held_bytes.refuse(full)
        return decision  # not counted, not remembered: the retry is judged again
    if one:
        session.producer_id, session.producer_id_checked_ms = pids[0], now
    if isinstance(decision, Hold):
        held_bytes.hold(nbytes)  # reserved now, before the body is read; released by held()'s plan
        session.held_bytes += nbytes
        return decision
    decisions.add(PRODUCER_IDS_RATE, decision, "")
    return None


def held(scope: ConnectionScope, session: Session, header: RequestHeader, hold: Hold, usage: Usage) -> Plan:
    """The request, once the quota lets the producer id through: read whole, held by the connection until ``hold.until_ms`` (a :class:`~proxy.apis.plan.HoldFor`: reading the client
    stops at the boundary after it), then forwarded as it is, in its place in the response order. Its bytes,
    reserved by :func:`_count`, are released when it is forwarded, or when its client goes (the connection
    drops the request then)."""
    clock, quota, pids = scope.quotas.clock, scope.quotas.producer_ids, header.producer_ids
    reserved = _Reserved(scope.quotas.held_bytes, session, header.frame_length)

    def abandon() -> None:  # the client left before the request was forwarded: the ids never reached the broker
        quota.abandon_all(hold, pids, clock.now_ms())
        reserved.release()

    def admitted() -> Outcome:  # forwarded now: the ids are known, here and at the peers
        reserved.release()
        quota.admitted(hold, pids, clock.now_ms())
        return FORWARD_AS_IS

    def wait(body: memoryview) -> Outcome:
        delay_ms = hold.until_ms - clock.now_ms()
        if delay_ms <= 0:
            return admitted()
        # bounded: the quota never holds past producer.id.quota.max.hold.ms
        return HoldFor(delay_ms, admitted)

    return Plan(action=BUFFER, decide=wait, abandon=abandon, usage=usage)


class _Reserved:
    """A held request's bytes in the held-byte bounds (:class:`quota.primitives.held_bytes.HeldBytes`), released once."""

    __slots__ = ("_held", "_session", "_nbytes")

    def __init__(self, held_bytes: HeldBytes, session: Session, nbytes: int) -> None:
        self._held, self._session, self._nbytes = held_bytes, session, nbytes

    def release(self) -> None:
        if self._nbytes:
            self._held.release(self._nbytes)
            self._session.held_bytes -= self._nbytes
            self._nbytes = 0


def refused(header: RequestHeader, refusal: Refuse, usage: Usage) -> Plan:
    """The Produce is answered by the proxy (read whole for its partitions) with the retriable NOT_ENOUGH_REPLICAS
    and the refusal's throttle; it never reaches the broker. An ``acks=0`` one gets no answer."""

    def answer(body: memoryview) -> Outcome:
        msg = decode_request(PRODUCE, header.api_version, body)
        return AnswerLocally.failing(
            header, msg, NOT_ENOUGH_REPLICAS, refusal.throttle, NO_ROOM_MESSAGE if refusal.no_room else REFUSED_MESSAGE
        )

    return Plan(action=BUFFER, decide=answer, usage=usage, last=True)


def plan_init_producer_id(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan:
    quota = scope.quotas.producer_ids
    if not quota.enabled:
        return PASS
    version, client_id = header.api_version, header.client_id or ""

    def attribute(body: memoryview) -> None:
        msg = decode_response(INIT_PRODUCER_ID, version, body)
        if msg.error_code == NONE and msg.producer_id >= 0:
            quota.issued.record(session.user, client_id, session.peer_ip)

    return Plan(leg=ResponseLeg(observe=attribute))
