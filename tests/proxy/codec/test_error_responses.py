"""Error responses built by the codec, for every decoded API and every version, from random requests.

Each one must frame with the request's correlation id and the right response header version, decode in the
request's own version, name every item the request named (partitions, topics, coordinator
keys, quota entities), carry the code in every ``error_code`` the version has (items and top level), the message in
every ``error_message`` and ``throttle_time_ms`` where the version has them, and parse in an independent
implementation: kio (Kafka 4.x schemas, headers included) or, for the versions Kafka 4.0 removed, kafka-python.
"""

from __future__ import annotations

import io
import struct
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.codec import error_codes as E
from proxy.codec import messages as M
from proxy.codec import schema
from proxy.codec.apis import (
    CLIENT_THROTTLES_SINCE,
    STRICT_MUTATION_SINCE,
    THROTTLE_TIME_SINCE,
    client_throttles,
    has_throttle_time,
    response_header_version,
    strict_mutation_quota,
)
from proxy.codec.responses import encode_local_response, error_response
from tests.proxy.codec.strategies import kio_class, kio_plain, message_st, needs_kio, ours_plain

VERSIONS = [(key, v) for key, (lo, hi) in sorted(M.DECODED_APIS.items()) for v in range(lo, hi + 1)]
_SETTINGS = settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))
CODE = E.THROTTLING_QUOTA_EXCEEDED
# Versions kio's schemas (and kafka-python's own classes) lack: checked by our own decode and re-encode only.
NEWER_THAN_KIO = {(88, 1)}  # StreamsGroupHeartbeat v1 (Kafka 4.4)
# KIP-932's early access in Kafka 4.0 (ShareGroupHeartbeat, ShareFetch, ShareAcknowledge v0), removed in 4.1
EARLY_ACCESS = {(76, 0), (78, 0), (79, 0)}


def request_items(api_key: int, version: int, req) -> list:
    """The items a request names, keyed as its error response names them."""
    if api_key == 0:
        return [(t.name or t.topic_id, p.index) for t in req.topic_data for p in t.partition_data]
    if api_key == 1:
        return [(t.topic or t.topic_id, p.partition) for t in req.topics for p in t.partitions]
    if api_key == 3:
        return [t.name or t.topic_id for t in req.topics or ()]
    if api_key == 10:
        return list(req.coordinator_keys) if version >= 4 else []
    if api_key in (19, 37):
        return [t.name for t in req.topics]
    if api_key == 20:
        return [t.name or t.topic_id for t in req.topics] if version >= 6 else list(req.topic_names)
    if api_key == 49:
        return [tuple((e.entity_type, e.entity_name) for e in entry.entity) for entry in req.entries]
    if api_key == 21:
        return [(t.name, p.partition_index) for t in req.topics for p in t.partitions]
    if api_key == 24:
        topics = req.v3_and_below_topics if version < 4 else [t for txn in req.transactions for t in txn.topics]
        return [(t.name, p) for t in topics for p in t.partitions]
    if api_key in (32, 33, 44):
        return [(r.resource_type, r.resource_name) for r in req.resources]
    if api_key == 27:
        return [(t.name, p) for m in req.markers for t in m.topics for p in t.partition_indexes]
    return []


def response_items(api_key: int, version: int, msg) -> list:
    if api_key == 0:
        return [(t.name or t.topic_id, p.index) for t in msg.responses for p in t.partition_responses]
    if api_key == 1:
        return [(t.topic or t.topic_id, p.partition_index) for t in msg.responses for p in t.partitions]
    if api_key == 3:
        return [t.name or t.topic_id for t in msg.topics]
    if api_key == 10:
        return [c.key for c in msg.coordinators] if version >= 4 else []
    if api_key == 19:
        return [t.name for t in msg.topics]
    if api_key == 20:
        return [t.name or t.topic_id for t in msg.responses] if version >= 6 else [t.name for t in msg.responses]
    if api_key == 37:
        return [t.name for t in msg.results]
    if api_key == 49:
        return [tuple((e.entity_type, e.entity_name) for e in entry.entity) for entry in msg.entries]
    if api_key == 21:
        return [(t.name, p.partition_index) for t in msg.topics for p in t.partitions]
    if api_key == 24:
        topics = (
            msg.results_by_topic_v3_and_below
            if version < 4
            else [t for txn in msg.results_by_transaction for t in txn.topic_results]
        )
        return [(t.name, p.partition_index) for t in topics for p in t.results_by_partition]
    if api_key in (32, 33, 44):
        return [(r.resource_type, r.resource_name) for r in (msg.results if api_key == 32 else msg.responses)]
    if api_key == 27:
        return [(t.name, p.partition_index) for m in msg.markers for t in m.topics for p in t.partitions]
    return []


def error_fields(api_key: int, version: int, msg) -> tuple[list[int], list]:
    """Every ``error_code`` and ``error_message`` the response's version has, at any depth."""
    seg = schema.segment(api_key, "response", version)
    flex = seg.flexible is not None and version >= seg.flexible
    codes: list[int] = []
    messages: list = []

    def walk(node, fields) -> None:
        for f in fields:
            if not f[2][0] <= version <= f[2][1] or (f[4] is not None and not (flex and f[5][0] <= version <= f[5][1])):
                continue
            value = getattr(node, f[0])
            if f[0] in ("error_code", "partition_error_code"):
                codes.append(value)
            elif f[0] == "error_message":
                messages.append(value)
            elif f[1] == "struct" and value is not None:
                walk(value, f[8])
            elif f[1] == "[]struct":
                for item in value or ():
                    walk(item, f[8])

    walk(msg, seg.fields)
    return codes, messages


@needs_kio
@pytest.mark.parametrize("api_key,version", VERSIONS)
@_SETTINGS
@given(data=st.data())
def test_every_item_fails_with_the_code(api_key, version, data):
    request = data.draw(message_st(api_key, "request", version, kio_safe=True))
    correlation_id = data.draw(st.integers(-(2**31), 2**31 - 1))
    msg = error_response(api_key, version, request, CODE, throttle_time_ms=1234, error_message="over quota")
    wire = encode_local_response(api_key, version, correlation_id, msg)

    assert struct.unpack_from(">ii", wire) == (len(wire) - 4, correlation_id)
    header_length = 9 if response_header_version(api_key, version) == 1 else 8
    if header_length == 9:
        assert wire[8] == 0  # header v1: an empty tagged-field section
    back = M.decode_response(api_key, version, wire[header_length:])
    assert M.encode_response(api_key, version, back) == wire[header_length:]

    assert response_items(api_key, version, back) == request_items(api_key, version, request)
    codes, messages = error_fields(api_key, version, back)
    assert set(codes) <= {CODE}
    assert set(messages) <= {"over quota"}
    if (
        request_items(api_key, version, request)
        or api_key in (11, 14, 17, 18, 22, 36, 48, 60)
        or (api_key == 10 and version < 4)
    ):
        assert codes  # nothing to fail only for a request that names no item and a response without a top level
    if has_throttle_time(api_key, version):
        assert back.throttle_time_ms == 1234

    cls = kio_class(api_key, "response", version)
    if cls is not None:
        _kio_parses(cls, wire, correlation_id, header_length, back)
    elif (api_key, version) not in NEWER_THAN_KIO | EARLY_ACCESS:
        _kafka_python_parses(api_key, version, wire[header_length:])


def _kio_parses(cls, wire: bytes, correlation_id: int, header_length: int, ours) -> None:
    from kio.serial import entity_reader

    header, size = entity_reader(cls.__header_schema__)(memoryview(wire[4:]), 0)
    assert (header.correlation_id, 4 + size) == (correlation_id, header_length)
    body = wire[header_length:]
    entity, size = entity_reader(cls)(memoryview(body), 0)
    assert size == len(body)
    theirs = kio_plain(entity)
    assert ours_plain(ours, theirs) == theirs


def _kafka_python_parses(api_key: int, version: int, body: bytes) -> None:
    """Produce v0-2, Fetch v0-3, OffsetCommit v0-1, CreateTopics v0-1, DeleteTopics v0 and DescribeConfigs v0:
    kafka-python's own classes for them."""
    from kafka.protocol.old import admin, commit, fetch, produce

    classes = {
        0: produce.ProduceResponse,
        1: fetch.FetchResponse,
        8: commit.OffsetCommitResponse,
        19: admin.CreateTopicsResponse,
        20: admin.DeleteTopicsResponse,
        32: admin.DescribeConfigsResponse,
    }
    buf = io.BytesIO(body)
    parsed = classes[api_key][version].decode(buf).to_object()
    assert buf.tell() == len(body)

    def codes(value):
        if isinstance(value, dict):
            for name, inner in value.items():
                yield from ([inner] if name == "error_code" else codes(inner))
        elif isinstance(value, list):
            for inner in value:
                yield from codes(inner)

    assert set(codes(parsed)) <= {CODE}


# -- item_errors: fail some items, let the rest through ----------------------------------------------------------


def test_item_errors_by_topic_name_and_partition():
    request = M.new_request(
        19,
        7,
        topics=[
            {"name": "a", "num_partitions": 1, "replication_factor": 1},
            {"name": "b", "num_partitions": 1, "replication_factor": 1},
        ],
    )
    msg = error_response(19, 7, request, E.NONE, item_errors={"b": CODE}, error_message="quota")
    assert [(t.name, t.error_code, t.error_message) for t in msg.topics] == [("a", 0, "quota"), ("b", CODE, "quota")]

    request = M.new_request(
        0,
        9,
        acks=1,
        topic_data=[
            {"name": "t", "partition_data": [{"index": 0}, {"index": 1}, {"index": 2}]},
            {"name": "u", "partition_data": [{"index": 0}]},
        ],
    )
    msg = error_response(0, 9, request, E.NONE, item_errors={("t", 1): E.TOPIC_AUTHORIZATION_FAILED, "u": CODE})
    assert [[p.error_code for p in t.partition_responses] for t in msg.responses] == [
        [0, E.TOPIC_AUTHORIZATION_FAILED, 0],
        [CODE],
    ]
    assert msg.responses[0].partition_responses[0].base_offset == -1


def test_item_errors_by_topic_id():
    tid, other = uuid.UUID(int=7), uuid.UUID(int=8)
    request = M.new_request(
        1,
        13,
        topics=[
            {"topic_id": tid, "partitions": [{"partition": 0}, {"partition": 1}]},
            {"topic_id": other, "partitions": [{"partition": 0}]},
        ],
    )
    msg = error_response(1, 13, request, E.NONE, item_errors={(tid, 1): CODE, other: E.TOPIC_AUTHORIZATION_FAILED})
    assert msg.error_code == 0  # the request as a whole succeeds; single partitions fail
    assert [[p.error_code for p in t.partitions] for t in msg.responses] == [[0, CODE], [E.TOPIC_AUTHORIZATION_FAILED]]

    request = M.new_request(20, 6, topics=[{"name": None, "topic_id": tid}, {"name": "x"}])
    msg = error_response(20, 6, request, E.NONE, item_errors={tid: CODE})
    assert [(t.name, t.topic_id, t.error_code) for t in msg.responses] == [
        (None, tid, CODE),
        ("x", uuid.UUID(int=0), 0),
    ]


def test_item_errors_by_entry():
    request = M.new_request(10, 4, key_type=0, coordinator_keys=["g1", "g2"])
    msg = error_response(10, 4, request, E.NONE, item_errors={"g2": E.GROUP_AUTHORIZATION_FAILED})
    assert [(c.key, c.error_code, c.node_id) for c in msg.coordinators] == [
        ("g1", 0, -1),
        ("g2", E.GROUP_AUTHORIZATION_FAILED, -1),
    ]

    request = M.new_request(
        49,
        1,
        entries=[
            {"entity": [{"entity_type": "user", "entity_name": "alice"}], "ops": []},
            {
                "entity": [
                    {"entity_type": "user", "entity_name": "bob"},
                    {"entity_type": "client-id", "entity_name": None},
                ],
                "ops": [],
            },
        ],
    )
    msg = error_response(
        49, 1, request, E.NONE, item_errors={(("user", "bob"), ("client-id", None)): E.CLUSTER_AUTHORIZATION_FAILED}
    )
    assert [e.error_code for e in msg.entries] == [0, E.CLUSTER_AUTHORIZATION_FAILED]


def test_top_level_answers_as_kafka_does():
    msg = error_response(22, 4, M.new_request(22, 4), E.CLUSTER_AUTHORIZATION_FAILED, throttle_time_ms=5)
    assert (msg.error_code, msg.producer_id, msg.producer_epoch, msg.throttle_time_ms) == (31, -1, -1, 5)
    msg = error_response(48, 1, M.new_request(48, 1), E.CLUSTER_AUTHORIZATION_FAILED, error_message="no")
    assert (msg.error_code, msg.error_message, msg.entries) == (31, "no", None)
    msg = error_response(3, 13, M.new_request(3, 13, topics=None), E.CLUSTER_AUTHORIZATION_FAILED)
    assert (msg.error_code, msg.topics) == (31, [])  # all topics asked for: only v13's top level carries it
    with pytest.raises(ValueError):
        error_response(2, 1, M.new_request(3, 1), CODE)  # ListOffsets is not decoded


# -- the error table and the per-API facts ---------------------------------------------------------------------------


def test_error_table():
    assert E.error_name(89) == "THROTTLING_QUOTA_EXCEEDED" and E.error_name(35) == "UNSUPPORTED_VERSION"
    assert E.error_name(-1) == "UNKNOWN_SERVER_ERROR" and E.error_name(0) == "NONE"
    assert E.error_name(9999) == "UNKNOWN_9999"
    assert E.is_retriable(89) and E.is_retriable(6) and E.is_retriable(15) and E.is_retriable(2)
    assert not E.is_retriable(29) and not E.is_retriable(47) and not E.is_retriable(0) and not E.is_retriable(9999)
    for name, value in vars(E).items():
        if name.isupper() and isinstance(value, int):
            assert E.ERROR_CODES[name] == value, name
    assert sorted(E.ERROR_NAMES) == list(range(-1, max(E.ERROR_NAMES) + 1))  # no gaps


@needs_kio
def test_error_table_matches_kio():
    from kio.schema.errors import ErrorCode

    theirs = {int(e): (e.name.upper(), e.retriable) for e in ErrorCode}
    ours = {code: (E.error_name(code), E.is_retriable(code)) for code in E.ERROR_NAMES}
    assert {code: ours.get(code) for code in theirs} == theirs


def test_throttle_time_facts_match_the_schemas():
    """THROTTLE_TIME_SINCE is the first version of each response whose schema has throttle_time_ms."""
    assert set(THROTTLE_TIME_SINCE) == set(CLIENT_THROTTLES_SINCE) == set(STRICT_MUTATION_SINCE) == set(M.DECODED_APIS)
    for api_key, (lo, hi) in M.DECODED_APIS.items():
        with_field = [
            v
            for v in range(lo, hi + 1)
            if any(
                f[0] == "throttle_time_ms" and f[2][0] <= v <= f[2][1]
                for f in schema.segment(api_key, "response", v).fields
            )
        ]
        assert THROTTLE_TIME_SINCE[api_key] == (with_field[0] if with_field else None), api_key
        assert with_field == list(range(with_field[0], hi + 1)) if with_field else True


def test_kip219_and_kip599_facts():
    assert not has_throttle_time(0, 0) and has_throttle_time(0, 1) and has_throttle_time(22, 0)
    assert not has_throttle_time(3, 2) and has_throttle_time(3, 3) and not has_throttle_time(17, 1)
    assert not client_throttles(0, 5) and client_throttles(0, 6) and client_throttles(1, 8)
    assert not client_throttles(3, 5) and client_throttles(3, 6) and client_throttles(19, 3)
    assert not client_throttles(17, 1) and not client_throttles(36, 2)  # SASL: no throttle at all
    assert not client_throttles(48, 1) and not client_throttles(60, 1)  # no shouldClientThrottle override
    assert strict_mutation_quota(19, 6) and not strict_mutation_quota(19, 5)
    assert strict_mutation_quota(20, 5) and not strict_mutation_quota(20, 4)
    assert strict_mutation_quota(37, 3) and not strict_mutation_quota(37, 2) and not strict_mutation_quota(0, 9)
