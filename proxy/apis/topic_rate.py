"""Byte rates per topic (``entity: {topic: ...}``): Produce and Fetch stages beside the client quotas' own.

Both kinds apply to one request: the whole request is charged to its client's quota (:mod:`proxy.apis.byte_rate`)
and each topic's record bytes to that topic's quota, here; the request is given the longest of their throttles
(:meth:`proxy.apis.plan.Plan.then`), reported in ``throttle_time_ms`` and muted for, as a client quota's is.

**Produce**: the request is read whole (every topic it writes must be known before any of it moves) and each
topic's record bytes (every partition's ``records``) recorded against its quota
(:class:`quota.managers.topic_quota.TopicQuotaManager`); it is forwarded at once, as a client quota forwards it, and
over quota the response carries the throttle and the connection is muted for it, so a producer writing a capped
topic through many client ids or connections is held to the topic's rate: every connection that writes it is
throttled by the same sensor. Under an entry with ``on_exceed: reject`` the topic's partitions are admitted while it
is within its quota and the rest refused with a retriable error (:mod:`proxy.apis.topic_reject`), not throttled. A
topic named by its id (Produce v13+) the proxy cannot name yet is looked up first
(:func:`proxy.apis.metadata.look_up_topics`); one the broker cannot name either is not charged (the broker writes
nothing for an id it does not know).

**Fetch**: each topic's record bytes in the answer are charged as the client gets them, after every trim of the
request's earlier stages; a topic over quota has its records cut at a record-batch boundary to its headroom (its
first batch always kept, so the consumer makes progress; batches never split or re-encoded), the other topics of
the answer untouched, so a large answer cannot carry a topic far past its quota in one throttle (throttles are
capped at ``quota.mute.max.ms``). A Fetch v13+ names topics by id: its body is read first and an id the proxy does
not know looked up, so its answer can be charged by name. A follower's Fetch (replication) is exempt, as from the
client quota. A ShareFetch (KIP-932) is charged the same way, by id, but never trimmed: its records are acquired by
the member, and one cut away would stay locked until its lock timed out (:mod:`proxy.apis.byte_rate`).

A topic quota in shadow mode (its entry's ``mode: shadow``, or ``quota.mode: shadow``) is recorded and counted,
nothing cut or applied. The bytes charged go to the usage log's row of the request (``topic_bytes``), by the
topic's metric label (its name when its own entry sets the quota, else ``<default>``).

Partition quotas (``{topic: NAME, partition: N|<default>}``) are asked beside the topic's, per partition
(:mod:`proxy.apis.partition_rate`); their bytes go to the usage log's ``partition_bytes``.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import TypeVar

from proxy.apis.byte_rate import trim_partitions
from proxy.apis.decisions import Decisions
from proxy.apis.metadata import look_up_topics
from proxy.apis.partition_rate import (
    Partition,
    ProducePartitions,
    count_fetched,
    of_partition,
    trim_fetched,
)
from proxy.apis.plan import FORWARD_AS_IS, ConnectionScope, ForwardRequest, Outcome, Plan
from proxy.apis.response_leg import Account, ResponseLeg
from proxy.apis.topic_reject import Refused, reason, refuse_partitions
from proxy.apis.usage import Usage
from proxy.cluster.topics import Topics
from proxy.codec.apis import FETCH_REPLICA_STATE_SINCE, FETCH_TOPIC_IDS_SINCE, PRODUCE
from proxy.codec.frame import BUFFER
from proxy.codec.header import RequestHeader
from proxy.codec.messages import Message, decode_request, decode_response, encode_response
from proxy.codec.primitives import ZERO_UUID
from proxy.session.session import Session
from quota.managers.topic_quota import NamedRateManager
from quota.primitives.decision import FORWARD, Decision, Throttle
from quota.primitives.topic_quotas import (
    PARTITION_CONSUMER_BYTE_RATE,
    TOPIC_CONSUMER_BYTE_RATE,
    TOPIC_PRODUCER_BYTE_RATE,
)


def plan_produce(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan | None:
    """Produce's stage of the topic ``producer_byte_rate``: the body read whole, each topic's record bytes charged."""
    if not scope.quotas.topics.produce_enabled:
        return None
    return Plan(action=BUFFER, decide=_ProduceCharge(scope, session, header).decide)


def plan_fetch(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan | None:
    """Fetch's stage of the topic ``consumer_byte_rate``: each topic's records in the answer trimmed to its
    headroom and charged."""
    if header.replica_id >= 0 or not scope.quotas.topics.fetch_enabled:  # a follower broker (Fetch v0-14)
        return None
    charge = _FetchCharge(scope, session, header, trims=True)
    # v13+: topics by id, looked up before the request goes; v15+: the replica id is in the body's tagged fields
    if header.api_version >= min(FETCH_TOPIC_IDS_SINCE, FETCH_REPLICA_STATE_SINCE):
        return Plan(action=BUFFER, decide=charge.decide)  # the leg goes with the decision (a follower's: none)
    return Plan(leg=charge.leg())


def plan_share_fetch(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan | None:
    """ShareFetch's stage of the topic ``consumer_byte_rate``: each topic's records in the answer charged, never
    trimmed (they are acquired by the member: :mod:`proxy.apis.byte_rate`). Topics by id, looked up first."""
    if not scope.quotas.topics.fetch_enabled:
        return None
    charge = _FetchCharge(scope, session, header, trims=False)
    return Plan(action=BUFFER, decide=charge.decide)


N = TypeVar("N")


def _name(item: Message, named: str, topics: Topics) -> str | None:
    """The topic an item of a Produce or Fetch names: by its id from v13 (None: an id the proxy cannot name)."""
    topic_id = getattr(item, "topic_id", None)
    if topic_id is not None and topic_id != ZERO_UUID:
        return topics.name_for(topic_id)
    return named or None


def _unknown_ids(items: list[Message], topics: Topics) -> list[uuid.UUID]:
    return [
        item.topic_id
        for item in items
        if getattr(item, "topic_id", None) not in (None, ZERO_UUID) and topics.name_for(item.topic_id) is None
    ]


class _ProduceCharge:
    """One Produce's topics: named (after a lookup of ids not known yet), then charged."""

    __slots__ = ("scope", "session", "header", "looked_up")

    def __init__(self, scope: ConnectionScope, session: Session, header: RequestHeader) -> None:
        self.scope, self.session, self.header = scope, session, header
        self.looked_up = False

    def decide(self, body: memoryview) -> Outcome:
        msg = decode_request(PRODUCE, self.header.api_version, body)
        topics = self.scope.topics
        unknown = _unknown_ids(msg.topic_data, topics)
        if unknown and not self.looked_up:
            self.looked_up = True
            kept = bytes(body)  # the client's buffer is not ours past this call
            return look_up_topics(
                self.scope, self.session, [(None, i) for i in unknown], lambda: self.decide(memoryview(kept))
            )
        quotas = self.scope.quotas.topics
        produce = quotas.produce
        # each partition's own quota, asked first (None: no partition quota, nothing more to pay per request)
        partitions = ProducePartitions(quotas.partition_produce) if quotas.partition_produce.enabled else None
        counted: dict[str, int] = {}  # the record bytes of each topic under a throttling quota
        written: dict[str, int] = {}  # and of each under a rejecting one, what was admitted of it
        refused: Refused = []
        by_topic: list[str] = []  # the topics whose own quota refused partitions
        for item in msg.topic_data:
            name = _name(item, item.name, topics)
            if name is None:
                continue
            data = item.partition_data
            sizes = [0 if p.records is None else len(p.records) for p in data]
            if partitions is not None:  # the topic's quota asked of what the partitions' own let through
                own = partitions.admit(name, data, sizes)
                refused += [(item, p) for p, ok in zip(data, own) if not ok]
                data = [p for p, ok in zip(data, own) if ok]
                sizes = [n for n, ok in zip(sizes, own) if ok]
            if produce.rejecting(name):
                admitted = produce.admit(name, sizes)
                for p, n, ok in zip(data, sizes, admitted):
                    if not ok:
                        refused.append((item, p))
                        by_topic.append(name)
                        if partitions is not None:
                            partitions.give_back(name, p, n)
                written[name] = written.get(name, 0) + sum(n for n, ok in zip(sizes, admitted) if ok)
            else:
                if produce.shadow_rejecting(name):  # what it would refuse, counted; all of it written
                    produce.admit(name, sizes, shadow=True)
                counted[name] = counted.get(name, 0) + sum(sizes)
        decisions = Decisions()
        for name, size in counted.items():
            decision = _of_topic(produce.record_topic(name, size), TOPIC_PRODUCER_BYTE_RATE, name)
            decisions.add(TOPIC_PRODUCER_BYTE_RATE, decision, self.header.client_id)
        if partitions is not None:
            partitions.decide(decisions, self.header.client_id)
        for name, size in written.items():
            counted[name] = counted.get(name, 0) + size
        usage = decisions.usage + Usage(topic_bytes=_labelled(produce, counted))
        if partitions is not None:
            usage += Usage(partition_bytes=partitions.labelled())
        if refused:
            message = reason(by_topic, partitions.refused if partitions is not None else ())
            return refuse_partitions(self.header, msg, refused, message, decisions.throttle, usage)
        return ForwardRequest(throttle=decisions.throttle, usage=usage)


def _of_topic(decision: Decision, quota: str, topic: str) -> Decision:
    """A topic quota's decision as the request carries it: it says which topic decided it (for ``explain``), and
    carries no client byte-rate figures (``bound``: the usage log's ``quota_rate`` is the client's quota; the topic's
    bytes have their own field, ``topic_bytes``)."""
    if not isinstance(decision, Throttle):
        return decision
    return dataclasses.replace(decision, bound=0.0, observed_rate=0.0, by=f"{quota} (topic {topic})")


def _labelled(quota: NamedRateManager[N], counted: dict[N, int]) -> tuple[tuple[str, int], ...]:
    """The bytes of the topics (or partitions) ``quota`` covers, by metric label (bounded by the configuration)."""
    out: dict[str, int] = {}
    for name, size in counted.items():
        label = quota.label(name)
        if label is not None:
            out[label] = out.get(label, 0) + size
    return tuple(out.items())


class _FetchCharge:
    """One Fetch or ShareFetch: its topic ids named before it goes, its answer trimmed per topic (``trims``: a
    Fetch's), then charged."""

    __slots__ = ("scope", "session", "header", "trims", "looked_up", "counted", "partitions", "decisions")

    def __init__(self, scope: ConnectionScope, session: Session, header: RequestHeader, trims: bool) -> None:
        self.scope, self.session, self.header, self.trims = scope, session, header, trims
        self.looked_up = False
        self.counted: dict[str, int] = {}  # the record bytes of each topic of the answer the client gets
        self.partitions: dict[Partition, int] = {}  # and of each partition, under partition quotas
        self.decisions = Decisions()

    def leg(self) -> ResponseLeg:
        """What the answer goes through: trimmed, then charged."""
        return ResponseLeg(rewrite=self.trim, record_response=self.charge, accounted=self.accounted)

    def decide(self, body: memoryview) -> Outcome:
        """The request forwarded with the leg its answer goes through (a follower's Fetch v15+, replication, with
        none: exempt), after a lookup of the topic ids the proxy cannot name yet."""
        version = self.header.api_version
        msg = decode_request(self.header.api_key, version, body)
        if self.trims and version >= FETCH_REPLICA_STATE_SINCE and msg.replica_state.replica_id >= 0:
            return FORWARD_AS_IS
        charged = ForwardRequest(leg=self.leg())
        unknown = _unknown_ids(msg.topics, self.scope.topics)
        if unknown and not self.looked_up:
            self.looked_up = True
            return look_up_topics(self.scope, self.session, [(None, i) for i in unknown], lambda: charged)
        return charged

    def trim(self, body: memoryview) -> bytes | None:
        """The answer as the client gets it (after the earlier stages' rewrites): each enforced topic's records cut
        to its headroom; every topic's record bytes counted for :meth:`charge`. None: nothing cut."""
        api_key, version = self.header.api_key, self.header.api_version
        msg = decode_response(api_key, version, body)
        quota, topics = self.scope.quotas.topics.fetch, self.scope.topics
        per_partition = self.scope.quotas.topics.partition_fetch
        cut = False
        for item in msg.responses:
            name = _name(item, getattr(item, "topic", ""), topics)
            if name is None:
                continue  # dropped from what the proxy knows since the request went: not charged
            if per_partition.enabled and self.trims:  # each partition cut to its own headroom, then the topic
                cut = trim_fetched(per_partition, name, item.partitions) or cut
            resolved = quota.resolve_topic(name)
            if not resolved.unlimited:
                if self.trims and not (quota.shadow or resolved.shadow):
                    cut = trim_partitions(item.partitions, int(quota.headroom(name)))[1] or cut
                size = sum(len(p.records) for p in item.partitions if p.records is not None)
                self.counted[name] = self.counted.get(name, 0) + size
            if per_partition.enabled:  # what the client gets of each, after both trims
                count_fetched(self.partitions, name, item.partitions)
        return encode_response(api_key, version, msg) if cut else None

    def charge(self, response_size: int) -> Decision:
        """Each topic's bytes of the answer recorded (``response_size``, the whole answer's, is the client quota's)."""
        quota, client_id = self.scope.quotas.topics.fetch, self.header.client_id
        for name, size in self.counted.items():
            decision = _of_topic(quota.record_topic(name, size), TOPIC_CONSUMER_BYTE_RATE, name)
            self.decisions.add(TOPIC_CONSUMER_BYTE_RATE, decision, client_id)
        per_partition = self.scope.quotas.topics.partition_fetch
        for partition, size in self.partitions.items():
            decision = of_partition(
                per_partition.record_topic(partition, size), PARTITION_CONSUMER_BYTE_RATE, partition
            )
            self.decisions.add(PARTITION_CONSUMER_BYTE_RATE, decision, client_id)
        return self.decisions.throttle or FORWARD

    def accounted(self, later: Account) -> Usage:
        quotas = self.scope.quotas.topics
        return self.decisions.usage + Usage(
            topic_bytes=_labelled(quotas.fetch, self.counted),
            partition_bytes=_labelled(quotas.partition_fetch, self.partitions) if self.partitions else (),
        )
