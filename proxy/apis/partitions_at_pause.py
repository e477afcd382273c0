"""New partitions while a volume is at its hard limit (cluster volume usage, PAUSE): refused by the proxy, and not
auto-created.

A CreateTopics or CreatePartitions is charged to ``controller_mutation_rate`` (:mod:`proxy.apis.mutations`), but
each partition it adds is a directory of log files on a broker's disk for every replica: the segment, its offset and
time indexes (preallocated at ``segment.index.bytes``, 10 MiB each, written into as records arrive), the partition's
metadata and checkpoints, and a record in the cluster's metadata log. On a volume the proxy judges full, that is what
an operator does not want, and the partition could not take a record before the PAUSE ends anyway (every produce is
refused). The controller places replicas by its own rules, so the proxy cannot tell which brokers they would land
on: at PAUSE, the cluster-wide state a produce is refused by, every request that would add partitions is refused
whole and never reaches the controller:

- a strict version (KIP-599: CreateTopics v6+, CreatePartitions v3+, Java's admin client since 2.7) is answered
  THROTTLING_QUOTA_EXCEEDED for each topic with ``pause_delay_ms`` as ``throttle_time_ms`` and a mute, as if its
  ``controller_mutation_rate`` were zero for the PAUSE: Java's admin client retries it after the throttle until its
  call's timeout (``default.api.timeout.ms``, 60 s), so a create that meets a short PAUSE goes through, and then
  fails with ``ThrottlingQuotaExceededException`` and the proxy's message; ``kafka-topics.sh`` (which sets
  ``retryOnQuotaViolation(false)``) fails at once with that message;
- an older version is answered POLICY_VIOLATION (not retriable) with the message, what a broker's
  ``create.topic.policy.class.name`` answers: Kafka never sends THROTTLING_QUOTA_EXCEEDED to versions before the
  strict ones, whose clients do not take it for a quota.

A Metadata request naming topics with ``allow_auto_topic_creation`` (v4+; Kafka's producer sets it) would make a
broker whose ``auto.create.topics.enable`` is on (Kafka's default) create each unknown topic named, as a CreateTopics
would: at PAUSE the proxy forwards it with the flag cleared, so an unknown topic is answered
UNKNOWN_TOPIC_OR_PARTITION (retriable: a producer asks again, and its records could not be written before the PAUSE
ends anyway) and nothing is created. Not counted as a refusal (a producer sets the flag for topics that exist too).
Before v4 the flag does not exist, and such a broker creates every unknown topic named: not prevented.

``validate_only`` requests write nothing and go on (to the mutation quota, which counts them as nothing), and so do
requests naming only the proxy's internal topics (volume usage, dynamic config), as their produce does, so that a
publisher is never paused by what it reports (the internal-topic guard, earlier in the chain, has refused a tenant's
request naming them). Every refusal is counted (``volume_refused_writes_total{api}``). Deleting topics (DeleteTopics) frees the disk and goes on.
"""

from __future__ import annotations

from proxy.apis.broker_writes import PAUSED_MESSAGE, counted_refusal, paused, refusal_throttle
from proxy.apis.decisions import Decisions
from proxy.apis.plan import FORWARD_AS_IS, AnswerLocally, ConnectionScope, ForwardRequest, Outcome, Plan
from proxy.codec.apis import METADATA, METADATA_AUTO_CREATE_SINCE, strict_mutation_quota
from proxy.codec.error_codes import POLICY_VIOLATION, THROTTLING_QUOTA_EXCEEDED
from proxy.codec.frame import BUFFER
from proxy.codec.header import RequestHeader
from proxy.codec.messages import decode_request, encode_request
from proxy.session.session import Session


def plan_new_partitions(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan | None:
    """A CreateTopics or CreatePartitions at PAUSE: read whole; refused unless ``validate_only`` or only of the
    proxy's internal topics."""
    quotas = scope.quotas
    if not paused(quotas):
        return None

    def decide(body: memoryview) -> Outcome:
        msg = decode_request(header.api_key, header.api_version, body)
        if msg.validate_only or {t.name for t in msg.topics} <= quotas.internal_topics:
            return FORWARD_AS_IS  # writes nothing; or the proxy's own topics, which a tenant's request never names
        counted_refusal(quotas, header.api_key)
        strict = strict_mutation_quota(header.api_key, header.api_version)
        code = THROTTLING_QUOTA_EXCEEDED if strict else POLICY_VIOLATION
        throttle = refusal_throttle(quotas, header, Decisions())
        return AnswerLocally.failing(header, msg, code, throttle, PAUSED_MESSAGE.format(what="adding partitions"))

    return Plan(action=BUFFER, decide=decide)


def plan_no_auto_creation(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan | None:
    """A Metadata at PAUSE naming topics with ``allow_auto_topic_creation``: forwarded with the flag cleared."""
    version = header.api_version
    if not paused(scope.quotas) or version < METADATA_AUTO_CREATE_SINCE:
        return None

    def decide(body: memoryview) -> Outcome:
        msg = decode_request(METADATA, version, body)
        if not msg.allow_auto_topic_creation or not msg.topics:  # none named (or all topics): nothing to create
            return FORWARD_AS_IS
        msg.allow_auto_topic_creation = False
        return ForwardRequest(body=encode_request(METADATA, version, msg))

    return Plan(action=BUFFER, decide=decide)
