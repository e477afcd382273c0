"""Well-formed frames to start fuzzing from: what real clients send, and one filled message per API version.

``client_frames()`` are request frames encoded by kafka-python's own protocol code (a real client's bytes for
ApiVersions, Metadata, Produce with a real record batch, Fetch, FindCoordinator). ``schema_frames()`` are, for
every (API key, direction, version) the codec decodes, a frame whose message has every field of that version set
to a non-default value (arrays of one element, records a real v2 batch, an unknown tagged field in flexible
versions), encoded by our codec with the right header. :func:`seed_inputs` turns both into inputs of
:func:`tests.fuzz.codec_driver.drive`.
"""

from __future__ import annotations

import uuid

from proxy.codec import messages as M
from proxy.codec import schema
from proxy.codec.header import encode_request_header, encode_response_header, frame
from tests.fuzz.codec_driver import TARGETS, encode_input


def record_batch(producer_id: int = 7, records: int = 2) -> bytes:
    """A real magic-2 record batch, built by kafka-python's record builder."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=producer_id,
        producer_epoch=0,
        base_sequence=0,
        batch_size=1 << 20,
    )
    for i in range(records):
        builder.append(i, timestamp=None, key=b"k", value=b"v" * 10, headers=[])
    return bytes(builder.build())


_SCALARS = {
    "int8": 1,
    "int16": 2,
    "int32": 3,
    "int64": 4,
    "uint16": 5,
    "float64": 0.5,
    "bool": True,
    "string": "t",
    "bytes": b"b",
    "uuid": uuid.UUID(int=0x1234),
}


def filled_message(api_key: int, direction: str, version: int) -> M.Message:
    """The top-level message of this version with every field present in it set to a non-default value."""
    seg = schema.segment(api_key, direction, version)
    flexible = seg.flexible is not None and version >= seg.flexible

    def present(f: tuple) -> bool:
        versions, tag, tagged = f[2], f[4], f[5]
        if not versions[0] <= version <= versions[1]:
            return False
        return tag is None or (flexible and tagged is not None and tagged[0] <= version <= tagged[1])

    def build(fields: tuple) -> M.Message:
        msg = seg.classes[id(fields)]()
        for f in fields:
            if present(f):
                setattr(msg, f[0], value(f))
        return msg

    def value(f: tuple):
        kind = f[1]
        if kind == "struct":
            return build(f[8])
        if kind == "[]struct":
            return [build(f[8])]
        if kind == "records":
            return memoryview(record_batch())
        if kind.startswith("[]"):
            return [_SCALARS[kind[2:]]]
        return _SCALARS[kind]

    msg = build(seg.fields)
    if flexible:
        msg._unknown_tags = {99: b"\x01\x02"}
    return msg


def schema_frames() -> list[tuple[tuple[int, str, int], bytes]]:
    """((api_key, direction, version), whole frame) for every version the codec decodes."""
    out = []
    for api_key, direction, version in TARGETS:
        msg = filled_message(api_key, direction, version)
        if direction == "request":
            body = M.encode_request(api_key, version, msg)
            head = encode_request_header(api_key, version, 1000 + version, "fuzz-client")
        else:
            body = M.encode_response(api_key, version, msg)
            head = encode_response_header(api_key, version, 1000 + version)
        out.append(((api_key, direction, version), frame(head + body)))
    return out


def client_frames() -> list[tuple[tuple[int, str, int], bytes]]:
    """Request frames as kafka-python encodes them (its own header and body code), one per request."""
    from kafka.protocol.consumer import FetchRequest
    from kafka.protocol.metadata import ApiVersionsRequest, FindCoordinatorRequest, MetadataRequest
    from kafka.protocol.parser import KafkaProtocol
    from kafka.protocol.producer import ProduceRequest

    topic = ProduceRequest.TopicProduceData
    partition = topic.PartitionProduceData
    batch = record_batch(producer_id=42, records=3)
    requests = [
        ApiVersionsRequest(version=v, client_software_name="kafka-python", client_software_version="3.0")
        for v in range(4)
    ]
    requests += [
        MetadataRequest(version=v, topics=[MetadataRequest.MetadataRequestTopic(name="topic-a")]) for v in (1, 4, 9, 12)
    ]
    requests += [
        ProduceRequest(
            version=v,
            acks=acks,
            timeout_ms=30000,
            transactional_id=None,
            topic_data=[topic(name="topic-a", partition_data=[partition(index=0, records=batch)])],
        )
        for v, acks in ((3, 1), (7, -1), (8, 0), (9, -1))
    ]
    fetch_topic = FetchRequest.FetchTopic
    fetch_partition = fetch_topic.FetchPartition
    requests += [
        FetchRequest(
            version=v,
            max_wait_ms=500,
            min_bytes=1,
            max_bytes=52428800,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[
                fetch_topic(
                    topic="topic-a",
                    partitions=[
                        fetch_partition(partition=0, fetch_offset=0, log_start_offset=-1, partition_max_bytes=1048576)
                    ],
                )
            ],
            forgotten_topics_data=[],
            rack_id="",
        )
        for v in (4, 11, 12)
    ]
    requests += [FindCoordinatorRequest(version=v, key="group-a", key_type=0) for v in (1, 3)]
    out = []
    for request in requests:
        protocol = KafkaProtocol(client_id="kafka-python-fuzz")
        protocol.send_request(request)
        whole = protocol.send_bytes()
        out.append(((request.API_KEY, "request", request.API_VERSION), whole))
    return out


def seed_inputs() -> list[bytes]:
    """Driver inputs: each frame alone (whole, and fed in 7-byte chunks), and its body alone, selected for its own
    API version."""
    seeds = []
    for target, whole in client_frames() + schema_frames():
        seeds.append(encode_input(target, 0, whole))
        seeds.append(encode_input(target, 7, whole))
    for target, whole in schema_frames():
        api_key, direction, version = target
        if direction == "request":
            skip = len(encode_request_header(api_key, version, 1000 + version, "fuzz-client")) + 4
        else:
            skip = len(encode_response_header(api_key, version, 1000 + version)) + 4
        seeds.append(encode_input(target, 0, whole[skip:]))
    return seeds
