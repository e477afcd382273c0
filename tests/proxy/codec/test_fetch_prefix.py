"""The replica id read from a Fetch request's prefix (follower fetches are exempt from consumer quotas), cut
anywhere, in every version the codec has."""

from __future__ import annotations

import struct
import uuid

import pytest

from proxy.codec.apis import FETCH, FETCH_REPLICA_STATE_SINCE
from proxy.codec.header import Incomplete, encode_request_header, frame, parse_request_header
from proxy.codec.messages import DECODED_APIS, encode_request, new_request
from proxy.codec.produce_prefix import parse_request_prefix

VERSIONS = range(DECODED_APIS[FETCH][0], DECODED_APIS[FETCH][1] + 1)
BEFORE_REPLICA_STATE = range(DECODED_APIS[FETCH][0], FETCH_REPLICA_STATE_SINCE)


def fetch_frame(version: int, replica_id: int) -> bytes:
    """A Fetch from ``replica_id`` as Kafka's encoder writes it: ReplicaId in the body before v15, ReplicaState's
    tagged field from v15 (absent for a consumer, as Kafka leaves a default tagged field out)."""
    fields = {
        "max_wait_ms": 500,
        "min_bytes": 1,
        "max_bytes": 10 << 20,
        "topics": [
            {
                "topic": "orders",
                "topic_id": uuid.uuid4(),
                "partitions": [{"partition": 0, "fetch_offset": 42, "partition_max_bytes": 1 << 20}],
            }
        ],
    }
    if version >= FETCH_REPLICA_STATE_SINCE:
        fields["replica_state"] = {"replica_id": replica_id, "replica_epoch": 7 if replica_id >= 0 else -1}
    else:
        fields["replica_id"] = replica_id
    msg = new_request(FETCH, version, **fields)
    return frame(encode_request_header(FETCH, version, 3, "broker-2-fetcher-0") + encode_request(FETCH, version, msg))


@pytest.mark.parametrize("version", BEFORE_REPLICA_STATE)
def test_a_followers_replica_id_is_read_once_its_four_bytes_are_in_and_never_before(version):
    data = fetch_frame(version, 2)
    header_end = parse_request_header(data, 1 << 20).header_length
    for cut in range(header_end, header_end + 4):
        with pytest.raises(Incomplete):
            parse_request_prefix(data[:cut], 1 << 20)
    for cut in range(header_end + 4, len(data) + 1):
        assert parse_request_prefix(data[:cut], 1 << 20).replica_id == 2, cut


@pytest.mark.parametrize("version", BEFORE_REPLICA_STATE)
@pytest.mark.parametrize("replica_id", [-1, -2])
def test_a_consumers_fetch_reads_as_minus_one(version, replica_id):
    assert parse_request_prefix(fetch_frame(version, replica_id), 1 << 20).replica_id == -1


@pytest.mark.parametrize("version", range(FETCH_REPLICA_STATE_SINCE, DECODED_APIS[FETCH][1] + 1))
def test_from_v15_the_replica_id_is_not_at_a_fixed_place_and_reads_as_minus_one_at_the_header(version):
    data = fetch_frame(version, 2)
    header = parse_request_prefix(data, 1 << 20)
    assert header.replica_id == -1  # the handler decides on the decoded body
    # nothing after the header is needed: a v15+ Fetch is never waited on for its body's first bytes
    assert parse_request_prefix(data[: header.header_length], 1 << 20).replica_id == -1


def test_a_frame_that_ends_before_the_replica_id_is_a_consumers_and_not_waited_on():
    head = encode_request_header(FETCH, 4, 3, "c")
    short = frame(head + b"\x00\x00")  # two body bytes: no room for ReplicaId
    assert parse_request_prefix(short, 1 << 20).replica_id == -1
    follower = frame(head + struct.pack(">i", 5))
    assert parse_request_prefix(follower, 1 << 20).replica_id == 5
