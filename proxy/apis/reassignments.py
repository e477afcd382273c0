"""Partition reassignments at a volume's PAUSE: no new replica on a broker with a volume at its hard limit.

An AlterPartitionReassignments (``kafka-reassign-partitions.sh --execute``, Cruise Control, the admin client's
``alterPartitionReassignments``) names each partition's target replicas; every target broker that is not a replica
yet gets a copy of the partition's whole log. At PAUSE the proxy judges each partition
(:func:`quota.managers.reassignment.refused_targets`): one whose target adds a replica on a broker the volume state
holds full (:func:`quota.managers.reassignment.full_brokers`) is refused; a move off a full broker, a cancellation
(null replicas) and a reordering of the current replicas go on, since moving partitions off a full disk is the
operator's remedy.

The partition's current replicas come from the broker: a Metadata request of the proxy's own (v10, without
auto-creation) for the topics concerned, on the client's own connection (:class:`~proxy.apis.plan.LookUp`), asked
only when a target names a full broker at all, and only once the broker has said the principal may reassign at all:
the same request with no partitions goes first (Kafka checks ALTER on the cluster before anything else, and an
empty request changes nothing). A principal it refuses gets the broker's own CLUSTER_AUTHORIZATION_FAILED for the
whole request, as from Kafka alone: the proxy tells a client that may not reassign nothing about the volume state. Nothing the proxy already holds would do: the proxy-wide topic table
keeps ids and partition counts, not replicas, and a reassignment changes the replicas itself, so an answer cached
from before could let a second reassignment onto a full broker pass as a reordering. Metadata lists the replicas of
a partition being reassigned with its adding replicas, so a target that only keeps a pending reassignment's brokers
adds nothing. A partition the answer does not describe (no such topic, or not described to this principal) is judged
with no current replicas: every full broker its target names is refused, the disk first.

A refused partition is answered POLICY_VIOLATION with the proxy's message, what a rule of the operator's answers
(the same code as a CreateTopics refused at PAUSE in a version before KIP-599); the rest of the request goes to the
broker and the two answers are merged; a request whose every partition is refused never reaches it. The admin client
never retries a partition's error of this API, whatever the code (it completes that partition's future with the
error's exception), so a retriable code would buy nothing; ``kafka-reassign-partitions.sh`` prints each failed
partition with the message ("Error reassigning partition(s)") and exits non-zero, and the other partitions of its
plan go on. Each request with a refusal is counted (``volume_refused_writes_total{api="AlterPartitionReassignments"}``).
"""

from __future__ import annotations

from collections.abc import Callable

from proxy.apis.broker_writes import counted_refusal, paused
from proxy.apis.metadata import learn
from proxy.apis.plan import FORWARD_AS_IS, AnswerLocally, ConnectionScope, ForwardRequest, LookUp, Outcome, Plan
from proxy.apis.response_leg import ResponseLeg
from proxy.codec.apis import ALTER_PARTITION_REASSIGNMENTS, METADATA, OWN_METADATA_VERSION
from proxy.codec.error_codes import NONE, POLICY_VIOLATION
from proxy.codec.frame import BUFFER
from proxy.codec.header import RequestHeader
from proxy.codec.messages import (
    Message,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    new_request,
)
from proxy.codec.responses import encode_local_response, error_response
from proxy.session.session import Session
from quota.managers.reassignment import FullBrokers, full_brokers, refused_targets

API = ALTER_PARTITION_REASSIGNMENTS
Replicas = dict[tuple[str, int], list[int]]  # (topic, partition) -> its current replicas
Refusals = dict[tuple[str, int], list[int]]  # (topic, partition) -> the full brokers its target would add


def plan_reassignments(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan | None:
    """At PAUSE: read whole, the current replicas looked up when a target names a full broker, judged per
    partition."""
    quotas = scope.quotas
    volume = quotas.volume
    if volume is None or not paused(quotas):
        return None
    version = header.api_version

    def decide(body: memoryview) -> Outcome:
        msg = decode_request(API, version, body)
        full = full_brokers(volume.state, volume.snapshots, volume.config.missing_data_action)
        names = [t.name for t in msg.topics if any(_names_full(p.replicas, full) for p in t.partitions)]
        if not names:
            return FORWARD_AS_IS
        request = new_request(METADATA, OWN_METADATA_VERSION, topics=[{"name": n} for n in names])
        request.allow_auto_topic_creation = False

        def answered(reply: memoryview) -> Outcome:
            current = current_replicas(learn(scope, OWN_METADATA_VERSION, reply))
            refusals = judge(msg, current, full)
            if not refusals:
                return FORWARD_AS_IS
            counted_refusal(quotas, API)
            return refuse(header, msg, refusals)

        metadata = LookUp(
            METADATA, OWN_METADATA_VERSION, encode_request(METADATA, OWN_METADATA_VERSION, request), answered
        )
        return authorized_first(header, msg, metadata)

    return Plan(action=BUFFER, decide=decide)


def authorized_first(header: RequestHeader, msg: Message, then: Outcome) -> Outcome:
    """``then`` once the broker has said this principal may reassign: the same request with no partitions goes
    first (the broker checks ALTER on the cluster before anything else, and an empty one changes nothing). A principal
    it refuses (CLUSTER_AUTHORIZATION_FAILED), or any top-level error, gets the broker's own answer for the whole
    request, as from Kafka itself: an unauthorized client learns nothing of the volume state."""
    version = header.api_version
    probe = new_request(API, version, timeout_ms=msg.timeout_ms, topics=[])

    def answered(reply: memoryview) -> Outcome:
        answer = decode_response(API, version, reply)
        if answer.error_code == NONE:
            return then
        refused = error_response(
            API,
            version,
            msg,
            answer.error_code,
            throttle_time_ms=answer.throttle_time_ms,
            error_message=answer.error_message,
        )
        return AnswerLocally(encode_local_response(API, version, header.correlation_id, refused))

    return LookUp(API, version, encode_request(API, version, probe), answered, client_id=header.client_id)


def _names_full(target: list[int] | None, full: FullBrokers) -> bool:
    return target is not None and any(b in full for b in target)


def current_replicas(answer: Message) -> Replicas:
    """Each partition's replicas in a Metadata answer (adding replicas included), of the topics it describes."""
    return {
        (t.name, p.partition_index): list(p.replica_nodes)
        for t in answer.topics
        if t.error_code == NONE and t.name
        for p in t.partitions
        if p.replica_nodes
    }


def judge(msg: Message, current: Replicas, full: FullBrokers) -> Refusals:
    """The partitions of the request whose target adds a replica on a full broker, with those brokers."""
    refusals: Refusals = {}
    for t in msg.topics:
        for p in t.partitions:
            refused = refused_targets(current.get((t.name, p.partition_index)), p.replicas, full)
            if refused:
                refusals[(t.name, p.partition_index)] = refused
    return refusals


def refuse(header: RequestHeader, msg: Message, refusals: Refusals) -> Outcome:
    """The refused partitions answered by the proxy; the rest forwarded and the broker's answer merged with ours."""
    version = header.api_version
    refused, kept = [], []
    for t in msg.topics:
        ours = [p for p in t.partitions if (t.name, p.partition_index) in refusals]
        theirs = [p for p in t.partitions if (t.name, p.partition_index) not in refusals]
        if ours:
            refused.append({"name": t.name, "partitions": [{"partition_index": p.partition_index} for p in ours]})
        if theirs:
            t.partitions = theirs
            kept.append(t)
    local = error_response(API, version, new_request(API, version, topics=refused), POLICY_VIOLATION)
    local.error_code = NONE  # a top-level error would fail every partition in the client, those forwarded too
    for t in local.responses:
        for p in t.partitions:
            p.error_message = _message(refusals[(t.name, p.partition_index)])
    if not kept:
        return AnswerLocally(encode_local_response(API, version, header.correlation_id, local))
    msg.topics = kept
    return ForwardRequest(body=encode_request(API, version, msg), leg=ResponseLeg(rewrite=_merger(version, local)))


def _merger(version: int, local: Message) -> Callable[[memoryview], bytes]:
    def merge(body: memoryview) -> bytes:
        """The broker's answer with the proxy's refusals added; a top-level error (which fails every partition in
        the client) stays as the broker sent it."""
        response = decode_response(API, version, body)
        if response.error_code == NONE:
            response.responses = list(response.responses) + list(local.responses)
        return encode_response(API, version, response)

    return merge


REFUSED_MESSAGE = (
    "kafka-quota-proxy: {brokers} at its hard limit; no replica is added there until usage drops "
    "(moving replicas off it, cancelling and reordering go on)"
)


def _message(brokers: list[int]) -> str:
    named = ", ".join(str(b) for b in brokers)
    return REFUSED_MESSAGE.format(
        brokers=f"broker {named} has a volume" if len(brokers) == 1 else f"brokers {named} each have a volume"
    )
