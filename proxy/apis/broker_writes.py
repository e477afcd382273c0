"""What a tenant's requests make the broker write besides a produce: charged, and bounded while a volume is at PAUSE.

A produce is not the only way onto a broker's disk (issue 44, T3: 151.5 MB/s of offset commits reached a Kafka
broker's disk through a proxy at PAUSE). This module holds the rule for every such request, in one place:

- **OffsetCommit, TxnOffsetCommit** (:mod:`proxy.apis.offset_commits`): the broker writes each partition's offset
  and metadata to ``__consumer_offsets``. Metadata is bounded by ``offset.metadata.max.bytes`` (Kafka's own bound);
  at PAUSE by 0: offsets go on, so consumers keep their place, metadata is refused (OFFSET_METADATA_TOO_LARGE for
  that partition).
- **JoinGroup, SyncGroup**: the coordinator writes the group's record to ``__consumer_offsets`` when a generation
  is synced: every member's subscription (the metadata of its JoinGroup protocol) and assignment (from the leader's
  SyncGroup), up to the topic's ``message.max.bytes`` (about 1 MiB) a rebalance, as often as a tenant rebalances.
  At PAUSE a member's metadata (its JoinGroup protocols together) and each assignment of a SyncGroup are bounded by
  ``volume_usage.paused_group_metadata_max_bytes`` (64 KiB; an ordinary consumer's are tens to hundreds of bytes):
  a request over it is refused whole with COORDINATOR_NOT_AVAILABLE, what the coordinator answers itself when it
  cannot write the group's record (the client looks the coordinator up again and retries).
- **ConsumerGroupHeartbeat, ShareGroupHeartbeat, StreamsGroupHeartbeat** (KIP-848, KIP-932, KIP-1071): what a
  member's heartbeat makes its coordinator write to ``__consumer_offsets`` has the same bound: the member's record,
  written whenever it changes (its subscription: topic names or regular expression, rack, instance id, assignor; a
  Streams member's rack, instance and process ids, endpoint and client tags), and a joining Streams member's
  topology, the group's record (its sub-topologies' topic names and regular expressions, and the changelog and
  repartition topics with their configs). What the coordinator does not keep (the partitions or tasks a member says
  it owns, a Streams member's task offsets) is not counted. (StreamsGroupTopologyDescriptionUpdate's description
  goes to the broker's ``group.streams.topology.description.plugin.class``, if one is configured, not to a log.)
- **ShareAcknowledge, ShareFetch** (KIP-932): a share consumer's acknowledgements (either request carries them) make
  the partition's leader write the records' new states through the share coordinator to ``__share_group_state``: a
  state batch (first and last offsets, state, delivery count: 19 bytes) for each run of one acknowledge type in each
  acknowledgement batch. At PAUSE they go on, as offset commits do (an unacknowledged record is delivered again when
  its lock times out, and archived after ``group.share.delivery.count.limit`` deliveries: refusing every
  acknowledgement would skip records), with the group bound on what one request makes written; a request over it is
  refused whole with KAFKA_STORAGE_ERROR, what the leader answers when it cannot write (retriable). An ordinary
  consumer's acknowledgements of a poll are a few state batches.
- **AlterShareGroupOffsets, DeleteShareGroupOffsets** (KIP-932; an administrator's, on a share group with no member):
  the group coordinator rewrites the group's share-state record in ``__consumer_offsets`` (every topic and partition
  the group has state for: it grows with the group, and the proxy cannot see its size) for an alter naming any topic
  that exists and for every delete, even one naming only unknown topics; and the share coordinator writes to
  ``__share_group_state`` a state snapshot for each partition altered, or a tombstone for each partition of each
  topic deleted (of a topic named twice, every partition again). Neither keeps a consumer going (the group has none), and what a delete frees is a
  few dozen bytes a partition, so at PAUSE both are refused whole with COORDINATOR_NOT_AVAILABLE, what the group
  coordinator answers when it cannot write: the admin client looks the coordinator up again and retries until its
  timeout, and the operator runs it again once the PAUSE ends.
- **OffsetDelete** (``kafka-consumer-groups.sh --delete-offsets``): the coordinator writes a tombstone to
  ``__consumer_offsets`` for each partition named that has an offset, checked against the group's offsets before the
  request (Kafka's ``OffsetMetadataManager.deleteOffsets``), so a partition named n times gets n tombstones, again
  after each commit of it, and the coordinator's work grows with the square of the names: on Apache Kafka 4.4 one
  committed partition named 3,000 times (a 12 kB request) wrote 3,000 tombstones (60 kB) and held its coordinator
  4.5 s; named 10,000 times, no answer in 5 minutes, a core busy. A request naming a partition twice is therefore
  refused whole with INVALID_REQUEST in every state, PAUSE or not, in shadow mode too (a protection of the broker,
  not a quota; Kafka's admin client names a set of partitions, each once), and never counted as a PAUSE refusal.
  One naming each partition once goes on at PAUSE, as DeleteGroups does: it writes a key-sized tombstone for an
  offset already on the disk, once (deleting it again writes nothing), compaction then drops both, and deleting
  stale offsets is what an operator does to make room.
- **DeleteGroups** goes on at PAUSE, charged: the broker takes each group named once, and writes tombstones for the
  records the group has (its offsets, its metadata, a share group's state), once: a deleted group is gone, deleting
  it again writes nothing, so it writes at most a key for each record already on the disk, and compaction then drops
  both. Refusing it would block the clean-up an operator does during a PAUSE.
- **AddPartitionsToTxn** (clients' v0-3, and v4+ but for ``verify_only`` transactions): the transaction
  coordinator writes the transaction's record, every partition in it, to ``__transaction_state`` for each request,
  and a marker to each partition when the transaction ends. At PAUSE no partition may join a transaction (the
  produce that would follow is refused anyway): refused with COORDINATOR_NOT_AVAILABLE (what the coordinator
  answers when it cannot write ``__transaction_state``), the producer retries until the PAUSE ends.
- **WriteTxnMarkers**: an inter-broker request (Kafka authorizes it as ClusterAction); each partition named gets a
  marker. At PAUSE refused, every partition NOT_ENOUGH_REPLICAS, as a produce is.

InitProducerId with a transactional id (``__transaction_state``) has a rule of its own, which asks the coordinator
first: :mod:`proxy.apis.transactional_ids`; so do CreateTopics and CreatePartitions, whose new partitions' log files
are refused at PAUSE before the mutation quota counts them: :mod:`proxy.apis.partitions_at_pause`. EndTxn and AddOffsetsToTxn go on at PAUSE: a transaction cannot grow then, so the markers they lead to are those of
partitions that joined before it (and the coordinator writes them at the transaction's timeout anyway), and
AddOffsetsToTxn adds at most one ``__consumer_offsets`` partition per group.

Every request on this list is charged as a produce is, at its header: its bytes against the client's
``producer_byte_rate`` and, at PAUSE where none applies, against the volume's ``produce_base_rate`` (what a refused
produce is charged against). A refusal at PAUSE also carries the pause itself (``pause_delay_ms`` as
``throttle_time_ms`` and a mute; the longest applies) and is counted, by API
(``kafka_quota_proxy_volume_refused_writes_total``). A request too short to be over its bound is not decoded.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from proxy.apis.decisions import Decisions
from proxy.apis.plan import FORWARD_AS_IS, PASS, AnswerLocally, ConnectionScope, Outcome, Plan
from proxy.codec.apis import (
    ADD_PARTITIONS_TO_TXN,
    ALTER_SHARE_GROUP_OFFSETS,
    CONSUMER_GROUP_HEARTBEAT,
    DELETE_GROUPS,
    DELETE_SHARE_GROUP_OFFSETS,
    JOIN_GROUP,
    OFFSET_DELETE,
    SHARE_ACKNOWLEDGE,
    SHARE_FETCH,
    SHARE_GROUP_HEARTBEAT,
    STREAMS_GROUP_HEARTBEAT,
    SYNC_GROUP,
    WRITE_TXN_MARKERS,
    api_name,
)
from proxy.codec.error_codes import COORDINATOR_NOT_AVAILABLE, INVALID_REQUEST, KAFKA_STORAGE_ERROR, NOT_ENOUGH_REPLICAS
from proxy.codec.frame import BUFFER
from proxy.codec.header import RequestHeader
from proxy.codec.messages import Message, decode_request
from proxy.session.session import Session
from quota.primitives.decision import Throttle
from quota.primitives.entity import PRODUCER_BYTE_RATE

if TYPE_CHECKING:
    from proxy.enforcement.quota_managers import QuotaManagers

PAUSED_MESSAGE = "kafka-quota-proxy: a broker volume is at its hard limit; {what} is paused until usage drops (retry)"


def paused(quotas: QuotaManagers) -> bool:
    """A volume is at PAUSE, and the proxy enforces (not in shadow mode)."""
    volume = quotas.volume
    return volume is not None and volume.paused and not quotas.mode.shadow


def charged(quotas: QuotaManagers, session: Session, header: RequestHeader) -> Decisions:
    """A write's charge: the request's bytes against the client's ``producer_byte_rate``; where none applies, at
    PAUSE, against the volume's ``produce_base_rate``, unscaled (so a refused client is slowed as an answered one
    is)."""
    volume, user, client_id = quotas.volume, session.user, header.client_id or ""
    decisions = Decisions()
    if quotas.produce.enabled and not quotas.produce.resolve(user, client_id).unlimited:
        decisions.add(
            PRODUCER_BYTE_RATE, quotas.produce.record_and_decide(user, client_id, header.size), header.client_id
        )
    elif volume is not None and paused(quotas):
        decisions.add("volume_usage", volume.refused.record_and_decide(user, client_id, header.size), header.client_id)
    return decisions


def refusal_throttle(quotas: QuotaManagers, header: RequestHeader, charge: Decisions) -> Throttle:
    """The throttle of a request refused for the PAUSE whose charge was ``charge``: the pause itself
    (``pause_delay_ms``, reported and muted) or the charge's, the longer."""
    assert quotas.volume is not None  # refused at PAUSE
    delay = quotas.volume.config.pause_delay_ms
    charge.add("volume_usage", Throttle(delay, delay), header.client_id)
    assert charge.throttle is not None  # the pause itself is an applied throttle
    return charge.throttle


def offset_metadata_bound(quotas: QuotaManagers) -> int:
    """The longest metadata one committed partition may carry: ``offset.metadata.max.bytes``, at PAUSE none."""
    return 0 if paused(quotas) else quotas.offset_metadata_max_bytes


def counted_refusal(quotas: QuotaManagers, api_key: int) -> None:
    """One request of ``api_key`` refused, wholly or in part, because a volume is at PAUSE."""
    if quotas.volume is not None:
        quotas.volume.refused_write(api_name(api_key))


@dataclass(frozen=True, slots=True)
class _AtPause:
    """One API's rule at PAUSE: how much of what it makes the broker write a request carries (``measure``), the
    bound on it (``bound``), and the refusal of a request over it (its code, and what is paused, for the message).
    ``per_byte``: the most one byte of the request can count for in ``measure`` (a request no longer than
    ``bound / per_byte`` is not decoded)."""

    measure: Callable[[Message, int], int]  # (the decoded request, its version) -> bytes or partitions
    bound: Callable[[QuotaManagers], int]
    error_code: int
    what: str
    per_byte: int = 1


def _group_bound(quotas: QuotaManagers) -> int:
    assert quotas.volume is not None  # only asked at PAUSE
    return quotas.volume.config.paused_group_metadata_max_bytes


def _partitions_joining(msg: Message, version: int) -> int:
    """Partitions an AddPartitionsToTxn adds to transactions (v4+: verify-only transactions add none)."""
    if version < 4:
        return sum(len(t.partitions) for t in msg.v3_and_below_topics)
    return sum(len(t.partitions) for txn in msg.transactions if not txn.verify_only for t in txn.topics)


# The fields of each group heartbeat that its coordinator keeps in ``__consumer_offsets`` (Kafka's
# ConsumerGroupMemberMetadataValue, ShareGroupMemberMetadataValue, StreamsGroupMemberMetadataValue and
# StreamsGroupTopologyValue records); every field is present in every version, at its default where the version lacks it
_KEPT: dict[int, tuple[str, ...]] = {
    CONSUMER_GROUP_HEARTBEAT: (
        "subscribed_topic_names",
        "subscribed_topic_regex",
        "rack_id",
        "instance_id",
        "server_assignor",
    ),
    SHARE_GROUP_HEARTBEAT: ("subscribed_topic_names", "rack_id"),
    STREAMS_GROUP_HEARTBEAT: ("topology", "instance_id", "rack_id", "process_id", "user_endpoint", "client_tags"),
}


def _kept(msg: Message, version: int) -> int:
    """Bytes of what a group heartbeat's coordinator keeps of it: the fields of :data:`_KEPT`."""
    fields = msg.to_dict()
    return sum(_size(fields[name]) for name in _KEPT[msg.API_KEY])


def _size(value: Any) -> int:
    """A decoded value's bytes as a record holds them, near enough: strings (UTF-8) and bytes by their length, a
    number at 4 bytes, lists and structs (dicts, from :meth:`Message.to_dict`) by their parts."""
    if isinstance(value, str):
        return len(value.encode())
    if isinstance(value, (bytes, memoryview)):
        return len(value)
    if isinstance(value, dict):
        return sum(_size(v) for v in value.values())
    if isinstance(value, list):
        return sum(_size(v) for v in value)
    return 0 if value is None or isinstance(value, bool) else 4


STATE_BATCH_BYTES = 19  # a share-partition state batch: first and last offsets (int64), state (int8), count (int16)


def _acknowledged(msg: Message, version: int) -> int:
    """Bytes of share-partition state a ShareAcknowledge's or ShareFetch's acknowledgements make written: a state batch
    for each run of one acknowledge type in each acknowledgement batch (at most one a byte of the request)."""
    runs = 0
    for topic in msg.topics:
        for partition in topic.partitions:
            for batch in partition.acknowledgement_batches:
                types = batch.acknowledge_types
                runs += sum(1 for i, kind in enumerate(types) if i == 0 or kind != types[i - 1])
    return STATE_BATCH_BYTES * runs


def _rewrites_the_group(msg: Message, version: int) -> int:
    """A share group's offsets altered or deleted: one write at least, the group's share-state record (of a size the
    proxy cannot see); the broker decides which, so every request counts."""
    return 1


NAMED_AGAIN_MESSAGE = (
    "kafka-quota-proxy: this OffsetDelete names a partition more than once; the coordinator checks every name "
    "against the offsets as they were before the request, so its work grows with the square of the names: name "
    "each partition once"
)


def _each_partition_once(header: RequestHeader, charge: Decisions) -> Callable[[memoryview], Outcome]:
    """An OffsetDelete naming a partition twice is refused with INVALID_REQUEST, not forwarded, whatever the volume's
    state and in shadow mode too: the coordinator checks each name against the group's offsets before the request (a
    tombstone for each), so its time grows with the square of the names. On Apache Kafka 4.4 one committed partition
    named 3,000 times held the coordinator 4.5 s; named 10,000 times (a 40 kB request), it kept a core busy for more
    than 5 minutes and never answered: every group on that coordinator stalled. Kafka's admin client names a set of
    partitions, each once. The refusal carries the request's charge (at PAUSE, the volume's base rate where no
    producer_byte_rate applies), not the pause: it is the request's fault, not the disk's."""

    def decide(body: memoryview) -> Outcome:
        msg = decode_request(header.api_key, header.api_version, body)
        if not _named_again(msg):
            return FORWARD_AS_IS
        throttle = charge.throttle or Throttle(0, 0)
        return AnswerLocally.failing(header, msg, INVALID_REQUEST, throttle, NAMED_AGAIN_MESSAGE)

    return decide


def _named_again(msg: Message) -> int:
    """Partitions an OffsetDelete names more than once (each name a tombstone, when the partition has an offset)."""
    named = [(t.name, p.partition_index) for t in msg.topics for p in t.partitions]
    return len(named) - len(set(named))


_AT_PAUSE: dict[int, _AtPause] = {
    JOIN_GROUP: _AtPause(
        lambda msg, v: sum(len(p.metadata) for p in msg.protocols),
        _group_bound,
        COORDINATOR_NOT_AVAILABLE,
        "joining a group with this much metadata",
    ),
    SYNC_GROUP: _AtPause(
        lambda msg, v: max((len(a.assignment) for a in msg.assignments), default=0),
        _group_bound,
        COORDINATOR_NOT_AVAILABLE,
        "an assignment this large",
    ),
    CONSUMER_GROUP_HEARTBEAT: _AtPause(_kept, _group_bound, COORDINATOR_NOT_AVAILABLE, "a subscription this large"),
    SHARE_GROUP_HEARTBEAT: _AtPause(_kept, _group_bound, COORDINATOR_NOT_AVAILABLE, "a subscription this large"),
    STREAMS_GROUP_HEARTBEAT: _AtPause(
        _kept, _group_bound, COORDINATOR_NOT_AVAILABLE, "a Streams member or topology this large"
    ),
    SHARE_ACKNOWLEDGE: _AtPause(
        _acknowledged, _group_bound, KAFKA_STORAGE_ERROR, "acknowledging this many records", STATE_BATCH_BYTES
    ),
    SHARE_FETCH: _AtPause(
        _acknowledged, _group_bound, KAFKA_STORAGE_ERROR, "acknowledging this many records", STATE_BATCH_BYTES
    ),
    ALTER_SHARE_GROUP_OFFSETS: _AtPause(
        _rewrites_the_group, lambda quotas: 0, COORDINATOR_NOT_AVAILABLE, "altering a share group's offsets"
    ),
    DELETE_SHARE_GROUP_OFFSETS: _AtPause(
        _rewrites_the_group, lambda quotas: 0, COORDINATOR_NOT_AVAILABLE, "deleting a share group's offsets"
    ),
    ADD_PARTITIONS_TO_TXN: _AtPause(
        _partitions_joining, lambda quotas: 0, COORDINATOR_NOT_AVAILABLE, "adding partitions"
    ),
    WRITE_TXN_MARKERS: _AtPause(
        lambda msg, v: sum(len(t.partition_indexes) for m in msg.markers for t in m.topics),
        lambda quotas: 0,
        NOT_ENOUGH_REPLICAS,
        "writing transaction markers",
    ),
}
_GO_ON_AT_PAUSE = frozenset((DELETE_GROUPS, OFFSET_DELETE))  # charged, never refused for the PAUSE
WRITES = frozenset(_AT_PAUSE) | _GO_ON_AT_PAUSE  # the APIs :func:`plan_write` plans


def plan_write(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan:
    """A JoinGroup, SyncGroup, a group heartbeat, a share consumer's acknowledgements, a share group's offsets altered
    or deleted, OffsetDelete, DeleteGroups, AddPartitionsToTxn or WriteTxnMarkers: charged; at PAUSE, refused whole
    when it carries more than its bound of what the broker would write (DeleteGroups and OffsetDelete have none); an
    OffsetDelete naming a partition twice is refused in every state."""
    quotas = scope.quotas
    charge = charged(quotas, session, header)
    plan = charge.plan() or PASS
    if header.api_key == OFFSET_DELETE:  # one rule in every state
        return plan.then(Plan(action=BUFFER, decide=_each_partition_once(header, charge)), header)
    rule = _AT_PAUSE.get(header.api_key) if paused(quotas) else None
    if rule is None:  # not at PAUSE, or goes on at PAUSE
        return plan
    bound = rule.bound(quotas)
    if header.size * rule.per_byte <= bound:  # cannot carry more than its own size allows
        return plan

    def decide(body: memoryview) -> Outcome:
        version = header.api_version
        msg = decode_request(header.api_key, version, body)
        if rule.measure(msg, version) <= bound:
            return FORWARD_AS_IS
        counted_refusal(quotas, header.api_key)
        refused = refusal_throttle(quotas, header, charge)
        return AnswerLocally.failing(header, msg, rule.error_code, refused, PAUSED_MESSAGE.format(what=rule.what))

    return plan.then(Plan(action=BUFFER, decide=decide), header)
