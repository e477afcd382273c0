"""The producer id read from a Produce request's prefix (KIP-936), cut anywhere, in every version the codec has."""

from __future__ import annotations

import uuid

import pytest

from proxy.codec import apis
from proxy.codec.header import Incomplete, encode_request_header, frame
from proxy.codec.produce_prefix import parse_request_prefix
from proxy.codec.messages import encode_request, new_request
from tests.codec.test_records_and_helpers import _batch


class _On:
    enabled = True


def produce_frame(version: int, records: bytes | None, topic: str = "orders-with-a-longish-name") -> bytes:
    partition = {"index": 3, "records": records}
    topic_data = {"name": topic, "topic_id": uuid.uuid4(), "partition_data": [partition]}
    msg = new_request(0, version, transactional_id="tx-1" if version >= 3 else None, acks=-1, timeout_ms=30000,
                      topic_data=[topic_data])
    return frame(encode_request_header(0, version, 9, "producer-1") + encode_request(0, version, msg))


VERSIONS = range(apis.VALID_VERSIONS[0][0], apis.VALID_VERSIONS[0][1] + 1)


@pytest.mark.parametrize("version", VERSIONS)
def test_the_first_batchs_producer_id_once_its_prefix_is_in_and_never_before(version):
    data = produce_frame(version, _batch(producer_id=4242) + _batch(producer_id=4242))
    whole = parse_request_prefix(data, 1 << 20, producer_ids=_On())
    assert whole.producer_id == 4242 and whole.acks == -1
    needed = None
    for cut in range(len(data)):
        try:
            header = parse_request_prefix(data[:cut], 1 << 20, producer_ids=_On())
        except Incomplete:
            continue
        needed = cut if needed is None else needed
        assert header.producer_id == 4242, cut
    assert needed is not None and needed < 200  # a bounded prefix, not the whole request (len(data) is larger)
    assert len(data) > 300


@pytest.mark.parametrize("version", [3, 9])
def test_no_producer_id_is_minus_one(version):
    for records in (None, _batch(producer_id=-1), b"\x00" * 20):
        assert parse_request_prefix(produce_frame(version, records), 1 << 20, producer_ids=_On()).producer_id == -1


def test_not_asked_for_when_no_quota_is_configured():
    class Off:
        enabled = False
    data = produce_frame(9, _batch(producer_id=5))
    assert parse_request_prefix(data, 1 << 20, producer_ids=Off()).producer_id == -1
    assert parse_request_prefix(data, 1 << 20).producer_id == -1


@pytest.mark.parametrize("version", VERSIONS)
def test_the_only_topic_of_a_one_topic_request_and_none_for_several(version):
    one = parse_request_prefix(produce_frame(version, _batch(producer_id=7), topic="__internal"), 1 << 20,
                               producer_ids=_On())
    if version >= 13:
        assert isinstance(one.only_topic, bytes) and len(one.only_topic) == 16  # a topic id
    else:
        assert one.only_topic == "__internal"
    partition = {"index": 0, "records": _batch(producer_id=7)}
    msg = new_request(0, version, transactional_id=None, acks=1, timeout_ms=30000, topic_data=[
        {"name": name, "topic_id": uuid.uuid4(), "partition_data": [partition]} for name in ("__internal", "other")])
    two = parse_request_prefix(frame(encode_request_header(0, version, 9, "p") + encode_request(0, version, msg)),
                               1 << 20, producer_ids=_On())
    assert two.only_topic is None and two.producer_id == 7
