"""What a tenant makes the broker write besides a produce (proxy.apis.broker_writes): JoinGroup, SyncGroup and the
group heartbeats (the group's and its members' records), a share group's offsets altered or deleted, OffsetDelete and
DeleteGroups (tombstones), AddPartitionsToTxn and WriteTxnMarkers (transaction markers) charged, and at PAUSE refused when over their bound, and
counted; InitProducerId (proxy.apis.transactional_ids): a transactional id its coordinator does not know refused at
PAUSE, a known one forwarded, the coordinator's answers real frames. Pure: bytes in, values out, a fake clock."""

from __future__ import annotations

import struct
import uuid

import pytest

from config.loader import parse_config
from proxy.apis import AnswerLocally, ConnectionScope, ForwardRequest, LookUp, Session, plan_request
from proxy.apis.plan import PASS
from proxy.cluster.topics import Topics
from proxy.codec.apis import (
    ADD_PARTITIONS_TO_TXN,
    ALTER_SHARE_GROUP_OFFSETS,
    API_VERSIONS,
    CONSUMER_GROUP_HEARTBEAT,
    DELETE_GROUPS,
    DELETE_SHARE_GROUP_OFFSETS,
    DESCRIBE_TRANSACTIONS,
    INIT_PRODUCER_ID,
    JOIN_GROUP,
    OFFSET_DELETE,
    SHARE_ACKNOWLEDGE,
    SHARE_FETCH,
    SHARE_GROUP_HEARTBEAT,
    STREAMS_GROUP_HEARTBEAT,
    SYNC_GROUP,
    WRITE_TXN_MARKERS,
    api_name,
    response_header_version,
)
from proxy.codec.error_codes import (
    COORDINATOR_NOT_AVAILABLE,
    ERROR_CODES,
    INVALID_REQUEST,
    KAFKA_STORAGE_ERROR,
    NONE,
    NOT_COORDINATOR,
    NOT_ENOUGH_REPLICAS,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    TRANSACTIONAL_ID_NOT_FOUND,
)
from proxy.codec.frame import BUFFER
from proxy.codec.header import encode_request_header, frame, parse_request_header
from proxy.codec.messages import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    new_request,
    new_response,
)
from proxy.codec.primitives import write_uvarint
from proxy.enforcement.proxy_quotas import ProxyQuotas
from quota.primitives.clock import ManualClock

TENANT = Session("L", "10.0.0.9")
BOUND = 65536  # volume_usage.paused_group_metadata_max_bytes' default
DELAY = 1000  # volume_usage.pause_delay_ms' default


def scope_for(*, paused: bool = True, rate: int | None = None, shadow: bool = False) -> ConnectionScope:
    raw: dict = {"upstream": {"bootstrap_servers": ["b:1"]}, "listeners": [{"name": "L", "bind": "h:2"}]}
    if paused:
        raw["volume_usage"] = {"missing_data_action": "PAUSE", "produce_base_rate": 10_000}
    if rate is not None:
        raw["quotas"] = [{"entity": {"client-id": "member"}, "producer_byte_rate": rate}]
    if shadow:
        raw["settings"] = {"quota.mode": "shadow"}
    quotas = ProxyQuotas(parse_config(raw), ManualClock(1_000_000))
    if paused:
        quotas.volume.brokers({1})  # a broker without a snapshot: the fail-safe PAUSE
        assert quotas.volume.paused
    return ConnectionScope(None, Topics(), quotas.home)


def refused(scope: ConnectionScope) -> dict[str, int]:
    return dict(scope.quotas.volume.refused_writes)


def planned(scope, api_key, version, msg, client_id="member"):
    buf = frame(encode_request_header(api_key, version, 5, client_id) + encode_request(api_key, version, msg))
    header = parse_request_header(memoryview(buf), 1 << 30)
    return plan_request(scope, TENANT, header), memoryview(buf)[header.header_length :]


def join(version: int, *metadata: bytes):
    return new_request(
        JOIN_GROUP,
        version,
        group_id="g",
        session_timeout_ms=45_000,
        rebalance_timeout_ms=300_000,
        member_id="",
        protocol_type="consumer",
        protocols=[{"name": f"p{i}", "metadata": m} for i, m in enumerate(metadata)],
    )


def sync(version: int, *assignments: bytes):
    return new_request(
        SYNC_GROUP,
        version,
        group_id="g",
        generation_id=1,
        member_id="m0",
        assignments=[{"member_id": f"m{i}", "assignment": a} for i, a in enumerate(assignments)],
    )


def answer(outcome: AnswerLocally, api_key: int, version: int):
    at = 8 + response_header_version(api_key, version)  # size, correlation id, a flexible header's tagged fields
    return decode_response(api_key, version, outcome.frame[at:])


@pytest.mark.parametrize("version", [0, 5, 6, 9])
def test_at_pause_a_member_with_ordinary_metadata_joins_and_one_over_the_bound_is_refused_and_counted(version):
    scope = scope_for()
    plan, _ = planned(scope, JOIN_GROUP, version, join(version, b"\x00\x03" + b"t" * 40, b"\x00\x01" + b"t" * 40))
    assert plan.action != BUFFER  # not decoded: a frame under the bound cannot carry more than the bound
    # over it only together: a member's protocols are its metadata
    plan, body = planned(scope, JOIN_GROUP, version, join(version, b"x" * (BOUND // 2 + 1), b"y" * (BOUND // 2)))
    outcome = plan.decide(body)
    assert isinstance(outcome, AnswerLocally)
    response = answer(outcome, JOIN_GROUP, version)
    assert response.error_code == COORDINATOR_NOT_AVAILABLE  # retriable: the coordinator is looked up again
    assert (response.generation_id, response.member_id, list(response.members)) == (-1, "", [])
    assert outcome.throttle.throttle_time_ms >= DELAY and outcome.throttle.mute_ms >= DELAY
    if version >= 2:
        assert response.throttle_time_ms >= DELAY
    assert refused(scope) == {"JoinGroup": 1}
    plan, body = planned(scope, JOIN_GROUP, version, join(version, b"x" * BOUND))  # at the bound: forwarded
    assert plan.decide(body) == ForwardRequest()
    assert refused(scope) == {"JoinGroup": 1}


@pytest.mark.parametrize("version", [0, 3, 5])
def test_at_pause_a_leaders_assignments_go_on_and_one_over_the_bound_is_refused(version):
    scope = scope_for()
    ordinary = [b"\x00\x03" + bytes(200)] * 400  # 400 members' assignments: 80 kB together, each small
    plan, body = planned(scope, SYNC_GROUP, version, sync(version, *ordinary))
    assert plan.decide(body) == ForwardRequest()
    plan, body = planned(scope, SYNC_GROUP, version, sync(version, b"a", b"b" * (BOUND + 1)))
    outcome = plan.decide(body)
    assert isinstance(outcome, AnswerLocally)
    response = answer(outcome, SYNC_GROUP, version)
    assert (response.error_code, response.assignment) == (COORDINATOR_NOT_AVAILABLE, b"")
    assert refused(scope) == {"SyncGroup": 1}


@pytest.mark.parametrize("version", [0, 1])
def test_at_pause_a_kip848_member_subscribes_to_ordinary_topics_and_a_huge_subscription_is_refused(version):
    scope = scope_for()

    def heartbeat(names: list[str], owned: int = 0):
        return new_request(
            CONSUMER_GROUP_HEARTBEAT,
            version,
            group_id="g",
            member_id="m",
            member_epoch=0,
            rebalance_timeout_ms=300_000,
            subscribed_topic_names=names,
            topic_partitions=[{"topic_id": uuid.uuid4(), "partitions": list(range(owned))}],
        )

    plan, _ = planned(scope, CONSUMER_GROUP_HEARTBEAT, version, heartbeat(["orders", "payments"]))
    assert plan.action != BUFFER  # not decoded: under the bound whole
    many = [f"topic-{i:05d}-" + "n" * 200 for i in range(400)]  # 84 kB of made-up names
    plan, body = planned(scope, CONSUMER_GROUP_HEARTBEAT, version, heartbeat(many))
    outcome = plan.decide(body)
    assert isinstance(outcome, AnswerLocally)
    response = answer(outcome, CONSUMER_GROUP_HEARTBEAT, version)
    assert (response.error_code, response.throttle_time_ms) == (COORDINATOR_NOT_AVAILABLE, DELAY)
    assert refused(scope) == {"ConsumerGroupHeartbeat": 1}
    # 52 kB of names and 5,000 partitions it owns (which the coordinator does not keep): decoded, and forwarded
    plan, body = planned(scope, CONSUMER_GROUP_HEARTBEAT, version, heartbeat(many[:250], owned=5000))
    assert plan.decide(body) == ForwardRequest()


def refused_at_pause(scope, api_key: int, version: int, msg) -> None:
    """``msg`` is decoded, answered COORDINATOR_NOT_AVAILABLE with the pause as its throttle, and counted."""
    before = refused(scope).get(api_name(api_key), 0)
    plan, body = planned(scope, api_key, version, msg)
    outcome = plan.decide(body)
    assert isinstance(outcome, AnswerLocally)
    response = answer(outcome, api_key, version)
    assert response.error_code == COORDINATOR_NOT_AVAILABLE and "paused" in response.error_message
    assert response.throttle_time_ms >= DELAY  # the pause, or its charge against the base rate when longer
    assert refused(scope)[api_name(api_key)] == before + 1


def forwarded(scope, api_key: int, version: int, msg) -> bool:
    plan, body = planned(scope, api_key, version, msg)
    return plan.action != BUFFER or plan.decide(body) == ForwardRequest()


MADE_UP = [f"made-up-{i:05d}-" + "n" * 200 for i in range(400)]  # 84 kB of topic names


@pytest.mark.parametrize("version", [0, 1])
def test_at_pause_a_share_group_member_subscribes_and_a_huge_subscription_or_rack_is_refused(version):
    """KIP-932 (ShareGroupHeartbeat v0, Kafka 4.0's early access; v1, Kafka 4.1+): the coordinator keeps the member's
    rack and subscribed topic names in its record."""
    scope = scope_for()

    def heartbeat(names: list[str] | None, rack: str | None = None):
        fields = dict(group_id="g", member_id="m", member_epoch=0, rack_id=rack, subscribed_topic_names=names)
        return new_request(SHARE_GROUP_HEARTBEAT, version, **fields)

    plan, _ = planned(scope, SHARE_GROUP_HEARTBEAT, version, heartbeat(["orders", "payments"], rack="eu-west-1a"))
    assert plan.action != BUFFER  # not decoded: under the bound whole
    refused_at_pause(scope, SHARE_GROUP_HEARTBEAT, version, heartbeat(MADE_UP))
    refused_at_pause(scope, SHARE_GROUP_HEARTBEAT, version, heartbeat(None, rack="r" * (BOUND + 1)))
    assert forwarded(scope, SHARE_GROUP_HEARTBEAT, version, heartbeat(MADE_UP[:300]))  # 63 kB: under the bound
    assert refused(scope) == {"ShareGroupHeartbeat": 2}
    assert planned(scope_for(paused=False), SHARE_GROUP_HEARTBEAT, version, heartbeat(MADE_UP))[0] is PASS


def acknowledgements(api_key: int, version: int, *batches: list[int]):
    """A share consumer's acknowledgements, one batch of ``types`` each, from offset 0 on, on one partition."""
    acks, first = [], 0
    for types in batches:
        acks.append({"first_offset": first, "last_offset": first + len(types) - 1, "acknowledge_types": types})
        first += len(types)
    fields: dict = dict(group_id="g", member_id="m", share_session_epoch=1)
    partition: dict = {"partition_index": 0, "acknowledgement_batches": acks}
    if api_key == SHARE_FETCH:
        fields.update(max_wait_ms=500, min_bytes=1, max_bytes=52_428_800)
        if version == 0:  # Kafka 4.0's early access: a partition's max bytes, not a record count
            partition["partition_max_bytes"] = 1_048_576
        else:
            fields.update(max_records=500, batch_size=500)
    topic = {"topic_id": uuid.uuid4(), "partitions": [partition]}
    return new_request(api_key, version, topics=[topic], **fields)


ACCEPT, RELEASE, REJECT = 1, 2, 3


@pytest.mark.parametrize("api_key", [SHARE_ACKNOWLEDGE, SHARE_FETCH])
@pytest.mark.parametrize("version", [0, 1, 2])
def test_at_pause_share_acknowledgements_go_on_and_a_request_writing_more_state_than_the_bound_is_refused(
    api_key, version
):
    """KIP-932: each run of one acknowledge type in a batch is a state batch (19 bytes) the share coordinator writes
    to __share_group_state. A poll's 500 records acknowledged (accepted, a few released or rejected between) go on;
    4,000 records alternating accept and release, 4,000 state batches (76 kB), are refused KAFKA_STORAGE_ERROR and
    counted; 4,000 accepted in one run are one state batch, decoded (a long request) and forwarded."""
    scope = scope_for()
    poll = acknowledgements(api_key, version, [ACCEPT] * 200, [ACCEPT] * 3 + [RELEASE] + [ACCEPT] * 290, [REJECT] * 6)
    plan, _ = planned(scope, api_key, version, poll)
    assert plan.action != BUFFER  # not decoded: too short to make the bound's state written
    hostile = acknowledgements(api_key, version, [ACCEPT, RELEASE] * 2000)
    plan, body = planned(scope, api_key, version, hostile)
    outcome = plan.decide(body)
    assert isinstance(outcome, AnswerLocally)
    response = answer(outcome, api_key, version)
    assert (response.error_code, list(response.responses)) == (KAFKA_STORAGE_ERROR, [])  # retriable: Kafka's shape
    assert "paused" in response.error_message and response.throttle_time_ms >= DELAY
    assert refused(scope) == {api_name(api_key): 1}
    one_run = acknowledgements(api_key, version, [ACCEPT] * 4000)
    plan, body = planned(scope, api_key, version, one_run)
    assert plan.action == BUFFER and plan.decide(body) == ForwardRequest()
    many_batches = acknowledgements(api_key, version, *[[ACCEPT]] * 3450)  # one record each: 3,450 state batches
    refused_or_not = planned(scope, api_key, version, many_batches)
    assert isinstance(refused_or_not[0].decide(refused_or_not[1]), AnswerLocally)  # 65,550 bytes: over the bound
    assert refused(scope) == {api_name(api_key): 2}
    assert planned(scope_for(paused=False), api_key, version, hostile)[0] is PASS


def alter_share_offsets(*topics: str, partitions: int = 3, start_offset: int = 0):
    parts = [{"partition_index": p, "start_offset": start_offset} for p in range(partitions)]
    return new_request(
        ALTER_SHARE_GROUP_OFFSETS, 0, group_id="g", topics=[{"topic_name": t, "partitions": parts} for t in topics]
    )


def delete_share_offsets(*topics: str):
    return new_request(DELETE_SHARE_GROUP_OFFSETS, 0, group_id="g", topics=[{"topic_name": t} for t in topics])


def test_at_pause_a_share_groups_offsets_are_neither_altered_nor_deleted():
    """KIP-932's admin requests (Kafka 4.1+): each rewrites the group's share-state record, whatever it names (the
    proxy cannot see how large), and writes a snapshot or a tombstone a partition to __share_group_state; at PAUSE
    the smallest is refused, retriable, and counted; outside PAUSE the broker answers them."""
    scope = scope_for()
    refused_at_pause(scope, ALTER_SHARE_GROUP_OFFSETS, 0, alter_share_offsets("orders", partitions=1))
    refused_at_pause(scope, ALTER_SHARE_GROUP_OFFSETS, 0, alter_share_offsets("orders", "payments", start_offset=-1))
    refused_at_pause(scope, DELETE_SHARE_GROUP_OFFSETS, 0, delete_share_offsets("orders"))
    refused_at_pause(scope, DELETE_SHARE_GROUP_OFFSETS, 0, delete_share_offsets("made-up"))  # still the group's record
    refused_at_pause(scope, DELETE_SHARE_GROUP_OFFSETS, 0, delete_share_offsets("orders", "orders"))
    assert refused(scope) == {"AlterShareGroupOffsets": 2, "DeleteShareGroupOffsets": 3}
    plan, body = planned(scope, DELETE_SHARE_GROUP_OFFSETS, 0, delete_share_offsets("orders"))
    response = answer(plan.decide(body), DELETE_SHARE_GROUP_OFFSETS, 0)
    assert list(response.responses) == []  # Kafka's getErrorResponse: the top-level code alone
    for api_key, msg in (
        (ALTER_SHARE_GROUP_OFFSETS, alter_share_offsets("orders")),
        (DELETE_SHARE_GROUP_OFFSETS, delete_share_offsets("orders")),
    ):
        assert planned(scope_for(paused=False), api_key, 0, msg)[0] is PASS  # nothing to charge it to: streamed
        shadow = scope_for(shadow=True)
        assert forwarded(shadow, api_key, 0, msg) and refused(shadow) == {}
        charged = scope_for(paused=False, rate=10)  # charged against producer_byte_rate as every write is
        throttles = [planned(charged, api_key, 0, msg)[0].throttle for _ in range(10)]
        assert throttles[-1] is not None and throttles[-1].throttle_time_ms > 0


def offset_delete(*topics: tuple[str, list[int]]):
    named = [{"name": t, "partitions": [{"partition_index": p} for p in partitions]} for t, partitions in topics]
    return new_request(OFFSET_DELETE, 0, group_id="g", topics=named)


def test_offsets_are_deleted_at_pause_and_a_partition_named_twice_is_an_invalid_request_in_every_state():
    """OffsetDelete: a tombstone to __consumer_offsets for each partition named that has an offset, checked against the
    offsets before the request, so each name of a partition counts and the coordinator's time grows with the square
    of the names (on Kafka 4.4, 3,000 names of one partition held it 4.5 s, 10,000 a core for over 5 minutes, never
    answered). Deleting each once goes on at PAUSE, as DeleteGroups does (what an operator does to make room: a
    key-sized tombstone for an offset on the disk already, once). A repeated name is refused INVALID_REQUEST in
    every state (PAUSE, open, shadow): one rule, not a retriable PAUSE refusal a hostile client would keep sending,
    and never counted as a PAUSE refusal. Kafka's admin client names each partition once."""
    stale = offset_delete(("orders", list(range(12))), ("payments", list(range(3))))
    hostile = (
        offset_delete(("orders", [0] * 10_000)),
        offset_delete(("orders", [0, 1, 2, 1])),
        offset_delete(("orders", [0]), ("payments", [0]), ("orders", [0])),  # the topic named twice
    )
    for scope in (scope_for(), scope_for(paused=False), scope_for(shadow=True)):
        assert forwarded(scope, OFFSET_DELETE, 0, stale)
        assert forwarded(scope, OFFSET_DELETE, 0, offset_delete(("wide", list(range(2_000)))))  # each once
        for msg in hostile:
            plan, body = planned(scope, OFFSET_DELETE, 0, msg)
            outcome = plan.decide(body)
            assert isinstance(outcome, AnswerLocally)
            response = answer(outcome, OFFSET_DELETE, 0)
            assert (response.error_code, list(response.topics)) == (INVALID_REQUEST, [])  # Kafka's shape
        assert scope.quotas.volume is None or refused(scope) == {}
    for charged_scope in (scope_for(paused=False, rate=1_000), scope_for()):  # charged as every write is
        throttles = []  # at PAUSE against produce_base_rate (10 kB/s): the requests' charge, never the pause's
        for _ in range(5):
            plan, body = planned(charged_scope, OFFSET_DELETE, 0, hostile[0])
            throttles.append(answer(plan.decide(body), OFFSET_DELETE, 0).throttle_time_ms)
        assert throttles[-1] > 0 and DELAY not in throttles


def delete_groups(version: int, client_id: str, *groups: str) -> tuple:
    """A DeleteGroups frame (the proxy does not decode its body): the header by our codec, the names as Kafka's
    DeleteGroupsRequest lays them out (v2+: compact strings and tagged fields)."""
    names = [g.encode() for g in groups]
    if version >= 2:
        body = write_uvarint(len(names) + 1) + b"".join(write_uvarint(len(n) + 1) + n for n in names) + b"\x00"
    else:
        body = struct.pack(">i", len(names)) + b"".join(struct.pack(">h", len(n)) + n for n in names)
    buf = frame(encode_request_header(DELETE_GROUPS, version, 5, client_id) + body)
    return parse_request_header(memoryview(buf), 1 << 30)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_at_pause_groups_are_deleted_and_charged_as_every_write_is(version):
    """DeleteGroups writes tombstones for what each group has, once (the broker takes each name once; a deleted group
    is gone): at PAUSE it goes on, undecoded, charged against producer_byte_rate or, where none applies, the base
    rate."""
    scope = scope_for()
    stale = [f"stale-group-{i:03d}-" + "x" * 40 for i in range(100)]  # 6 kB of names
    plans = [plan_request(scope, TENANT, delete_groups(version, "unquoted", *stale)) for _ in range(3)]
    assert all(p.action != BUFFER and p.decide is None for p in plans)  # streamed: never refused
    assert plans[0].throttle is None
    more = [plan_request(scope, TENANT, delete_groups(version, "unquoted", *stale)) for _ in range(30)]
    assert more[-1].throttle is not None and more[-1].throttle.throttle_time_ms > 0  # 200 kB over 10 kB/s
    assert refused(scope) == {}
    assert plan_request(scope_for(paused=False), TENANT, delete_groups(version, "member", "g")) is PASS
    quoted = scope_for(paused=False, rate=100)
    throttles = [plan_request(quoted, TENANT, delete_groups(version, "member", *stale)).throttle for _ in range(2)]
    assert throttles[-1] is not None and throttles[-1].throttle_time_ms > 0


def subtopology(n: int, configs: int = 2, value: str = "compact") -> dict:
    """One sub-topology as Kafka Streams describes it: a source topic, a changelog topic with its configs, a
    repartition topic it writes and one it reads."""
    kv = [{"key": f"config.{i}", "value": value} for i in range(configs)]
    return {
        "subtopology_id": str(n),
        "source_topics": [f"input-{n}"],
        "state_changelog_topics": [{"name": f"app-store-{n}-changelog", "topic_configs": kv}],
        "repartition_sink_topics": [f"app-repartition-{n + 1}"],
        "repartition_source_topics": [{"name": f"app-repartition-{n}", "partitions": 6, "topic_configs": kv}],
        "copartition_groups": [{"source_topics": [0], "repartition_source_topics": [0]}],
    }


def streams_heartbeat(version: int, subtopologies: list[dict], **member):
    return new_request(
        STREAMS_GROUP_HEARTBEAT,
        version,
        group_id="app",
        member_id="m",
        member_epoch=0,
        process_id="7b3c-process",
        topology={"epoch": 1, "subtopologies": subtopologies},
        **member,
    )


@pytest.mark.parametrize("version", [0, 1])
def test_at_pause_a_streams_member_joins_and_a_huge_topology_or_description_is_refused(version):
    """KIP-1071 (StreamsGroupHeartbeat v0-1): a joining member's topology becomes the group's record, its rack,
    instance and process ids, endpoint and client tags its own; the two together have the bound. The tasks and task
    offsets it reports are not kept, so not counted. (Its internal topics exist: a topology needing new ones is
    refused at PAUSE whatever its size, tests/proxy/apis/test_streams_topics.py.)"""
    scope = scope_for()
    for n in range(21):  # the application's changelog and repartition topics, known to the proxy
        for name in (f"app-store-{n}-changelog", f"app-repartition-{n}"):
            scope.topics.created(name, 6, scope.quotas.clock.now_ms())
    ordinary = [subtopology(n) for n in range(20)]  # a large application: 20 sub-topologies, 4 kB
    assert forwarded(scope, STREAMS_GROUP_HEARTBEAT, version, streams_heartbeat(version, ordinary, rack_id="a"))
    configs = [subtopology(0, configs=300, value="v" * 120)]  # 2 x 300 topic configs: 80 kB
    refused_at_pause(scope, STREAMS_GROUP_HEARTBEAT, version, streams_heartbeat(version, configs))
    tags = [{"key": f"zone-{i}", "value": "z" * 100} for i in range(400)]  # 43 kB of client tags
    half = [subtopology(0, configs=100, value="v" * 120)]  # and a 27 kB topology: over the bound together
    refused_at_pause(scope, STREAMS_GROUP_HEARTBEAT, version, streams_heartbeat(version, half, client_tags=tags))
    assert forwarded(scope, STREAMS_GROUP_HEARTBEAT, version, streams_heartbeat(version, [], client_tags=tags))
    endpoint = {"host": "h" * (BOUND + 1), "port": 8080}
    refused_at_pause(scope, STREAMS_GROUP_HEARTBEAT, version, streams_heartbeat(version, [], user_endpoint=endpoint))
    offsets = [{"subtopology_id": "0", "partition": p, "offset": 10**9} for p in range(8000)]  # 120 kB, not kept
    tasks = [{"subtopology_id": str(n), "partitions": list(range(1000))} for n in range(20)]
    owned = streams_heartbeat(version, ordinary, task_offsets=offsets, task_end_offsets=offsets, active_tasks=tasks)
    assert forwarded(scope, STREAMS_GROUP_HEARTBEAT, version, owned)
    assert refused(scope) == {"StreamsGroupHeartbeat": 3}


def test_outside_pause_group_metadata_is_kafkas_and_charged_against_producer_byte_rate():
    plan, _ = planned(scope_for(paused=False), JOIN_GROUP, 9, join(9, b"x" * (4 * BOUND)))
    assert plan is PASS  # no bound of the proxy's own outside PAUSE, nothing to charge it to: streamed
    scope = scope_for(paused=False, rate=1000)
    throttles = [planned(scope, JOIN_GROUP, 9, join(9, b"x" * BOUND))[0].throttle for _ in range(4)]
    assert throttles[-1] is not None and throttles[-1].throttle_time_ms > 0  # 4 x 64 kB over 1 kB/s


def test_at_pause_group_writes_are_charged_against_the_base_rate_and_shadow_mode_refuses_nothing():
    scope = scope_for()
    small = join(9, bytes(BOUND - 200))  # under the bound: forwarded, and paid for
    throttles = [planned(scope, JOIN_GROUP, 9, small, client_id="unquoted")[0].throttle for _ in range(40)]
    assert throttles[-1] is not None and throttles[-1].throttle_time_ms > 0  # 2.6 MB over the 10 kB/s base rate
    shadow = scope_for(shadow=True)
    plan, _ = planned(shadow, JOIN_GROUP, 9, join(9, b"x" * (2 * BOUND)))
    assert plan.action != BUFFER and refused(shadow) == {}


def add_partitions(version: int, partitions: int, verify_only: bool = False):
    topics = [{"name": "t", "partitions": list(range(partitions))}]
    if version < 4:
        return new_request(
            ADD_PARTITIONS_TO_TXN,
            version,
            v3_and_below_transactional_id="tx",
            v3_and_below_producer_id=7,
            v3_and_below_producer_epoch=0,
            v3_and_below_topics=topics,
        )
    txn = {"transactional_id": "tx", "producer_id": 7, "producer_epoch": 0, "verify_only": verify_only}
    return new_request(ADD_PARTITIONS_TO_TXN, version, transactions=[{**txn, "topics": topics}])


@pytest.mark.parametrize("version", [0, 3, 4, 5])
def test_at_pause_no_partition_joins_a_transaction(version):
    scope = scope_for()
    plan, body = planned(scope, ADD_PARTITIONS_TO_TXN, version, add_partitions(version, 3))
    outcome = plan.decide(body)
    assert isinstance(outcome, AnswerLocally)
    response = answer(outcome, ADD_PARTITIONS_TO_TXN, version)
    if version < 4:
        results = response.results_by_topic_v3_and_below
    else:
        assert response.error_code == COORDINATOR_NOT_AVAILABLE
        results = [t for txn in response.results_by_transaction for t in txn.topic_results]
    codes = [p.partition_error_code for t in results for p in t.results_by_partition]
    assert codes == [COORDINATOR_NOT_AVAILABLE] * 3
    assert refused(scope) == {"AddPartitionsToTxn": 1}
    if version >= 4:  # a verify-only request adds nothing: the broker answers it
        plan, body = planned(scope, ADD_PARTITIONS_TO_TXN, version, add_partitions(version, 3, verify_only=True))
        assert plan.decide(body) == ForwardRequest()
    plan, _ = planned(scope_for(paused=False), ADD_PARTITIONS_TO_TXN, version, add_partitions(version, 3))
    assert plan is PASS


@pytest.mark.parametrize("version", [1, 2])
def test_at_pause_transaction_markers_are_refused_as_a_produce_is(version):
    scope = scope_for()
    markers = new_request(
        WRITE_TXN_MARKERS,
        version,
        markers=[
            {
                "producer_id": 7,
                "producer_epoch": 0,
                "transaction_result": False,
                "topics": [{"name": "t", "partition_indexes": list(range(50))}],
                "coordinator_epoch": 0,
            }
        ],
    )
    plan, body = planned(scope, WRITE_TXN_MARKERS, version, markers)
    outcome = plan.decide(body)
    assert isinstance(outcome, AnswerLocally)
    response = answer(outcome, WRITE_TXN_MARKERS, version)
    assert [p.error_code for m in response.markers for t in m.topics for p in t.partitions] == [
        NOT_ENOUGH_REPLICAS
    ] * 50
    assert refused(scope) == {"WriteTxnMarkers": 1}


INIT_VERSIONS = range(0, 7)
SERVES_LOOKUP = {DESCRIBE_TRANSACTIONS: (0, 0)}


def txn_tenant(lookup_versions: dict | None = SERVES_LOOKUP) -> Session:
    session = Session("L", "10.0.0.9")
    session.broker_lookup_versions = lookup_versions
    return session


def init(version: int, transactional_id: str | None, client_id: str = "member"):
    msg = new_request(INIT_PRODUCER_ID, version, transactional_id=transactional_id, transaction_timeout_ms=60_000)
    buf = frame(
        encode_request_header(INIT_PRODUCER_ID, version, 5, client_id) + encode_request(INIT_PRODUCER_ID, version, msg)
    )
    header = parse_request_header(memoryview(buf), 1 << 30)
    return header, memoryview(buf)[header.header_length :]


def decided(scope, session, version, transactional_id, client_id="member"):
    header, body = init(version, transactional_id, client_id)
    plan = plan_request(scope, session, header)
    return plan, (plan.decide(body) if plan.decide is not None else None)


def coordinator_says(lookup: LookUp, error_code: int, state: str = ""):
    """The coordinator's DescribeTransactions answer for the one id the lookup asked about."""
    asked = decode_request(DESCRIBE_TRANSACTIONS, 0, lookup.body)
    (transactional_id,) = asked.transactional_ids
    reply = new_response(
        DESCRIBE_TRANSACTIONS,
        0,
        transaction_states=[
            {
                "error_code": error_code,
                "transactional_id": transactional_id,
                "transaction_state": state,
                "producer_id": -1,
            }
        ],
    )
    return lookup.then(memoryview(encode_response(DESCRIBE_TRANSACTIONS, 0, reply)))


@pytest.mark.parametrize("version", INIT_VERSIONS)
def test_at_pause_a_new_transactional_id_is_refused_and_a_known_one_reinitialised(version):
    scope = scope_for()
    plan, lookup = decided(scope, txn_tenant(), version, "payments-tx", client_id="payments")
    assert plan.action == BUFFER
    assert isinstance(lookup, LookUp) and (lookup.api_key, lookup.client_id) == (DESCRIBE_TRANSACTIONS, "payments")
    assert decode_request(DESCRIBE_TRANSACTIONS, 0, lookup.body).transactional_ids == ["payments-tx"]
    outcome = coordinator_says(lookup, TRANSACTIONAL_ID_NOT_FOUND)
    assert isinstance(outcome, AnswerLocally)
    response = answer(outcome, INIT_PRODUCER_ID, version)
    assert (response.error_code, response.producer_id, response.producer_epoch) == (COORDINATOR_NOT_AVAILABLE, -1, -1)
    assert response.throttle_time_ms >= DELAY and outcome.throttle.mute_ms >= DELAY
    assert refused(scope) == {"InitProducerId": 1}
    # known to the coordinator, in any state: re-initialised (zombies fenced, a transaction left behind aborted)
    for state in ("Empty", "Ongoing", "CompleteCommit"):
        _, lookup = decided(scope, txn_tenant(), version, "payments-tx")
        assert coordinator_says(lookup, NONE, state) == ForwardRequest()
    assert refused(scope) == {"InitProducerId": 1}


@pytest.mark.parametrize(
    "code",
    [
        NOT_COORDINATOR,
        ERROR_CODES["COORDINATOR_LOAD_IN_PROGRESS"],
        COORDINATOR_NOT_AVAILABLE,
        TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    ],
)
def test_at_pause_any_other_answer_of_the_coordinator_forwards_the_request_for_the_broker_to_answer(code):
    scope = scope_for()
    _, lookup = decided(scope, txn_tenant(), 4, "tx")
    assert coordinator_says(lookup, code) == ForwardRequest()
    assert refused(scope) == {}


def test_at_pause_an_idempotent_producer_gets_its_producer_id():
    scope = scope_for()
    for version in INIT_VERSIONS:
        plan, outcome = decided(scope, txn_tenant(), version, None)
        assert outcome == ForwardRequest()  # nothing written for it
    assert refused(scope) == {}


def test_at_pause_the_brokers_versions_are_asked_first_and_one_without_describe_transactions_cannot_tell():
    scope = scope_for()
    session = txn_tenant(lookup_versions=None)  # no ApiVersions answer seen on this connection
    _, first = decided(scope, session, 4, "tx")
    assert isinstance(first, LookUp) and first.api_key == API_VERSIONS
    without = new_response(
        API_VERSIONS, 0, api_keys=[{"api_key": INIT_PRODUCER_ID, "min_version": 0, "max_version": 5}]
    )
    outcome = first.then(memoryview(encode_response(API_VERSIONS, 0, without)))
    assert isinstance(outcome, AnswerLocally)  # refused: at PAUSE the disk comes first
    assert answer(outcome, INIT_PRODUCER_ID, 4).error_code == COORDINATOR_NOT_AVAILABLE
    assert session.broker_lookup_versions == {} and refused(scope) == {"InitProducerId": 1}
    served = new_response(
        API_VERSIONS, 0, api_keys=[{"api_key": DESCRIBE_TRANSACTIONS, "min_version": 0, "max_version": 0}]
    )
    session = txn_tenant(lookup_versions=None)
    _, first = decided(scope, session, 4, "tx")
    second = first.then(memoryview(encode_response(API_VERSIONS, 0, served)))
    assert isinstance(second, LookUp) and second.api_key == DESCRIBE_TRANSACTIONS


def test_every_init_is_charged_and_outside_pause_or_in_shadow_mode_nothing_is_looked_up():
    plan, _ = decided(scope_for(paused=False), txn_tenant(), 4, "tx")
    assert plan is PASS  # no quota to charge it to, no PAUSE: streamed
    scope = scope_for(paused=False, rate=100)
    throttles = [decided(scope, txn_tenant(), 4, "tx")[0].throttle for _ in range(100)]
    assert throttles[0] is None and throttles[-1].throttle_time_ms > 0  # 100 x 45 bytes over 100 B/s
    paused = scope_for()  # at PAUSE a client without a quota is charged against the base rate (10 kB/s)
    throttles = [decided(paused, txn_tenant(), 4, None, client_id="unquoted")[0].throttle for _ in range(3000)]
    assert throttles[0] is None and throttles[-1].throttle_time_ms > 0  # 3,000 x 45 bytes over 10 kB/s
    shadow = scope_for(shadow=True)
    plan, _ = decided(shadow, txn_tenant(), 4, "tx")
    assert plan.action != BUFFER and refused(shadow) == {}
