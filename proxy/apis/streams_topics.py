"""The internal topics a Kafka Streams topology makes its group coordinator create, charged to
``controller_mutation_rate`` (KIP-599) as a CreateTopics of them would be.

A Streams member joining a KIP-1071 group sends its topology in its StreamsGroupHeartbeat: the changelog topic of
each state store and the repartition topics between sub-topologies. Those missing are created by the broker itself
(the coordinator names them, and the broker sends the controller a CreateTopics in the member's name), so the
request never passes through the proxy and no CreateTopics rule applied (issue 44): a tenant could create topics,
as many partitions as its source topics have, for each new application id it made up. Now, when the client's
``controller_mutation_rate`` applies, a heartbeat carrying a topology is read whole and:

- its internal topics the proxy knows to exist (:class:`~proxy.cluster.topics.Topics`, counts learnt within
  ``controller.quota.metadata.max.age.ms``) cost nothing, and those it does not know are asked of the broker first
  (a Metadata request of the proxy's own on the member's connection, :func:`proxy.apis.metadata.look_up_topics`):
  each worker and each sidecar learns topics on its own, so without it an instance of the application joining
  through another worker (or sidecar, or a restarted proxy) was charged the topology again, and refused while the
  tenant's bucket was in debt, for topics that exist;
- the others are admitted as a strict CreateTopics is (v6+): while the client's bucket is not negative, taking the
  partitions the topology declares (a repartition topic's count; a changelog topic declares none, its count is the
  source topics'); when it is negative, the heartbeat is answered COORDINATOR_NOT_AVAILABLE (the response's
  retriable error: the member looks the coordinator up again and retries) with the time the bucket needs as
  ``throttle_time_ms`` and a mute, and never reaches the coordinator. A member already in the group keeps its
  membership: only a heartbeat carrying a topology (a join, or a new topology epoch) is refused;
- at PAUSE (a volume at its hard limit, :mod:`proxy.apis.partitions_at_pause`), a heartbeat whose topology needs
  topics the broker does not have is refused the same way, whatever the quota (with ``pause_delay_ms`` as
  ``throttle_time_ms``, counted in ``volume_refused_writes_total``): no partition is added then; a member of an
  application whose topics exist joins;
- the coordinator's answer settles the charge: a topic its ``MISSING_INTERNAL_TOPICS`` status names was asked of
  the controller, and is charged the partition count it was created with, looked up off the request path once the
  answer went out (:mod:`proxy.cluster.created_counts`; when it cannot be learnt, what was declared, and at least
  Kafka's default of one partition). Every other topic's tokens are given back, as are all of them when the answer
  is an error. A count learnt is the proxy's knowledge of the topic from then on, so the other members of the
  application, joining with the same topology, are not charged for it again;
- a heartbeat with no topology (or none the proxy does not know) is forwarded, and for a charged client its answer
  read too: the coordinator configures a topology again when the topics it reads appear or change, on any member's
  heartbeat, and asks for the internal topics missing then (a member that joined before its source topics existed
  has its changelog created by a later heartbeat). What its status lists is charged once created, after the fact;
  such a heartbeat cannot be refused beforehand, at PAUSE either.

The tokens are shared across workers and sidecars as every mutation's are (the manager's usage tap: charges and
refunds alike). Two first instances of a new application joining through two workers at the same moment, before
either answer, are both told the topics are missing, and each worker learns their counts; the topic is one, so the
worker whose claim reaches the parent first charges it (:mod:`proxy.cluster.creation_claims`) and the other gives
its tokens back. Across sidecars (separate proxies) there is no such arbiter: there, each sidecar that saw the
topics reported missing in that window charges them once. What the proxy cannot do is create some of the topics
and not others, as the controller's own quota would: a topology's internal topics are admitted together. A source
topic given as a regular expression, or a regular expression's matches, are the coordinator's to resolve; the count
created is what is charged either way.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial

from proxy.apis.broker_writes import PAUSED_MESSAGE, counted_refusal, paused, refusal_throttle
from proxy.apis.decisions import Decisions
from proxy.apis.metadata import look_up_topics
from proxy.apis.mutation_charges import Charges, topic_keys
from proxy.apis.plan import FORWARD_AS_IS, AnswerLocally, ConnectionScope, ForwardRequest, Outcome, Plan
from proxy.apis.response_leg import ResponseLeg
from proxy.codec.apis import STREAMS_GROUP_HEARTBEAT
from proxy.codec.enums import MISSING_INTERNAL_TOPICS
from proxy.codec.error_codes import COORDINATOR_NOT_AVAILABLE, NONE
from proxy.codec.frame import BUFFER
from proxy.codec.header import RequestHeader
from proxy.codec.messages import Message, decode_request, decode_response
from proxy.session.session import Session

FALLBACK_PARTITIONS = 1  # a created topic whose count cannot be learnt: Kafka's own num.partitions default
REFUSED_MESSAGE = (
    "kafka-quota-proxy: creating this topology's internal topics is over controller_mutation_rate; retry after {ms} ms"
)
MAX_TOPIC_NAME = 249  # Kafka's longest topic name
_TOPIC_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def plan_streams_heartbeat(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan | None:
    quotas = scope.quotas.mutations
    client_id = header.client_id or ""
    charged = quotas.enabled and not quotas.resolve(session.user, client_id).unlimited
    if not charged and not paused(scope.quotas):
        return None
    return Plan(action=BUFFER, decide=partial(_decide, scope, session, header, client_id if charged else None))


def internal_topics(topology: Message) -> dict[str, int]:
    """The topology's internal topics, each with the partitions it declares (0: the source topics' count)."""
    declared: dict[str, int] = {}
    for sub in topology.subtopologies:
        for topic in (*sub.state_changelog_topics, *sub.repartition_source_topics):
            declared[topic.name] = max(declared.get(topic.name, 0), max(topic.partitions, 0))
    return declared


def _decide(
    scope: ConnectionScope, session: Session, header: RequestHeader, client_id: str | None, body: memoryview
) -> Outcome:
    """``client_id``: the client whose controller_mutation_rate is charged; None: none applies (planned for the
    PAUSE alone)."""
    msg = decode_request(STREAMS_GROUP_HEARTBEAT, header.api_version, body)
    if msg.topology is None:
        return _observed(scope, session, header, client_id)
    declared = internal_topics(msg.topology)
    unknown = _unknown(scope, declared)
    if not unknown:
        return _observed(scope, session, header, client_id)
    # asked of the broker first: what one worker (or sidecar) has not learnt, another may have created
    keys = [(name, None) for name in unknown]
    return look_up_topics(scope, session, keys, partial(_admit, scope, session, header, client_id, msg, unknown))


def _unknown(scope: ConnectionScope, declared: dict[str, int]) -> dict[str, int]:
    """The internal topics of ``declared`` the proxy does not know to exist (counts learnt within
    ``controller.quota.metadata.max.age.ms``)."""
    now, max_age = scope.quotas.clock.now_ms(), scope.quotas.metadata_max_age_ms
    return {name: n for name, n in declared.items() if scope.topics.partitions(name, now, max_age) is None}


def _admit(
    scope: ConnectionScope,
    session: Session,
    header: RequestHeader,
    client_id: str | None,
    msg: Message,
    asked: dict[str, int],
) -> Outcome:
    """The broker's answer learnt: the internal topics still unknown are missing; at PAUSE refused (no partition is
    added then: :mod:`proxy.apis.partitions_at_pause`), else admitted together."""
    wanted = _unknown(scope, asked)
    if not wanted:
        return _observed(scope, session, header, client_id)
    if paused(scope.quotas):
        counted_refusal(scope.quotas, STREAMS_GROUP_HEARTBEAT)
        paused_for = refusal_throttle(scope.quotas, header, Decisions())
        message = PAUSED_MESSAGE.format(what="creating a topology's internal topics")
        return AnswerLocally.failing(header, msg, COORDINATOR_NOT_AVAILABLE, paused_for, message)
    if client_id is None:
        return FORWARD_AS_IS
    mutations, now = scope.quotas.mutations, scope.quotas.clock.now_ms()
    admission = mutations.admit(session.user, client_id, [sum(wanted.values()) or None], now)
    if not admission.all_admitted:
        throttle = admission.throttle
        assert throttle is not None  # a refusal is throttled until the bucket is paid off
        mutations.record_throttle(session.user, client_id, throttle.throttle_time_ms, now, refused=True)
        message = REFUSED_MESSAGE.format(ms=throttle.throttle_time_ms)
        return AnswerLocally.failing(header, msg, COORDINATOR_NOT_AVAILABLE, throttle, message)
    charges = Charges(mutations, session.user, client_id, [(topic_keys(n), c) for n, c in wanted.items()], now)
    return _forwarded(scope, header, charges, wanted)


def _observed(scope: ConnectionScope, session: Session, header: RequestHeader, client_id: str | None) -> Outcome:
    """A heartbeat that asks for no topic the proxy does not know. For a charged client its answer is read all the
    same: the coordinator configures a group's topology again whenever the topics it reads appear or change, on any
    member's heartbeat, and asks the controller for the internal topics missing then (a member that joined before
    its source topics existed has them created by a later heartbeat carrying no topology). Those are charged once
    created, after the fact: the bucket's debt holds the tenant's next mutations."""
    if client_id is None:
        return FORWARD_AS_IS
    charges = Charges(scope.quotas.mutations, session.user, client_id, [], scope.quotas.clock.now_ms())
    return _forwarded(scope, header, charges, {})


def _forwarded(scope: ConnectionScope, header: RequestHeader, charges: Charges, wanted: dict[str, int]) -> Outcome:
    settle = partial(_settle, scope, header.api_version, charges, wanted)
    return ForwardRequest(leg=ResponseLeg(observe=settle, accounted=charges.accounted), usage=charges.usage)


def _settle(scope: ConnectionScope, version: int, charges: Charges, wanted: dict[str, int], body: memoryview) -> None:
    """The coordinator's answer: the topics it asked the controller for are charged what was created (those the
    request was not admitted for, after the fact); the rest given back."""
    answer = decode_response(STREAMS_GROUP_HEARTBEAT, version, body)
    now = scope.quotas.clock.now_ms()
    statuses = (answer.status or ()) if answer.error_code == NONE else ()
    missing = _named(statuses, wanted)
    for name in wanted:
        if name in missing:
            scope.counts.want(name, partial(_created, scope, charges, name, FALLBACK_PARTITIONS))
        else:
            charges.give_back(charges.taken_for(name), now)
    max_age = scope.quotas.metadata_max_age_ms
    for name in sorted(_reported(statuses) - wanted.keys()):
        if scope.topics.partitions(name, now, max_age) is None:
            scope.counts.want(name, partial(_created, scope, charges, name, 0))


def _named(statuses: Iterable[Message], wanted: dict[str, int]) -> set[str]:
    """The internal topics of ``wanted`` a MISSING_INTERNAL_TOPICS status names."""
    words: set[str] = set()
    for status in statuses:
        if status.status_code == MISSING_INTERNAL_TOPICS:
            words.update(_words(status.status_detail))
    return words & wanted.keys()


def _reported(statuses: Iterable[Message]) -> set[str]:
    """The topics a MISSING_INTERNAL_TOPICS status lists after its colon ("Internal topics are missing: a, b"), for
    an answer to a heartbeat that declared none the proxy did not know. A word that is no topic is looked up,
    found in no metadata, and charged nothing."""
    names: set[str] = set()
    for status in statuses:
        if status.status_code == MISSING_INTERNAL_TOPICS and ":" in status.status_detail:
            listed = _words(status.status_detail.rsplit(":", 1)[1])
            names.update(w for w in listed if w not in (".", "..") and len(w) <= MAX_TOPIC_NAME)
    return names


def _words(text: str) -> list[str]:
    """The runs of ``text`` that could be topic names (letters, digits, '.', '_' and '-'): anything else separates
    them."""
    return "".join(c if c in _TOPIC_CHARACTERS else " " for c in text).split()


def _created(scope: ConnectionScope, charges: Charges, name: str, fallback: int, partitions: int | None) -> None:
    """``name``'s count, looked up once the controller was asked to create it (None: not learnt: ``fallback`` is
    charged, 0 for a topic no request was admitted for); charged by the first worker to claim it
    (:mod:`proxy.cluster.creation_claims`; a single process: at once)."""
    now, max_age = scope.quotas.clock.now_ms(), scope.quotas.metadata_max_age_ms
    if scope.topics.partitions(name, now, max_age) is not None:
        charges.give_back(charges.taken_for(name), now)  # another member's join, answered first, was charged for it
        return
    scope.claims.claim(name, max_age, partial(_charge, scope, charges, name, fallback, partitions))


def _charge(
    scope: ConnectionScope, charges: Charges, name: str, fallback: int, partitions: int | None, first: bool
) -> None:
    """``first``: this process charges the topic created (``partitions``, None: not learnt); else another worker
    did, and the tokens taken for it are given back."""
    now = scope.quotas.clock.now_ms()
    taken = charges.taken_for(name)
    if partitions is not None:
        scope.topics.created(name, partitions, now)
    if not first:
        charges.give_back(taken, now)
    elif partitions is None:
        charges.more(fallback - taken, now)
    else:
        charges.more(partitions - taken, now)
        charges.give_back(taken - partitions, now)
