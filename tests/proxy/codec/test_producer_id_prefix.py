"""The producer ids read from a Produce request before it moves (KIP-936): every batch of every partition, cut
anywhere, in every version the codec has; malformed batches as the broker reads them."""

from __future__ import annotations

import uuid

import pytest

from proxy.codec import apis
from proxy.codec.header import Incomplete, encode_request_header, frame
from proxy.codec.messages import encode_request, new_request
from proxy.codec.produce_prefix import parse_request_prefix
from tests.proxy.codec.builders import record_batch


def produce_frame(version: int, records: bytes | None, topic: str = "orders-with-a-longish-name") -> bytes:
    partition = {"index": 3, "records": records}
    topic_data = {"name": topic, "topic_id": uuid.uuid4(), "partition_data": [partition]}
    msg = new_request(
        0,
        version,
        transactional_id="tx-1" if version >= 3 else None,
        acks=-1,
        timeout_ms=30000,
        topic_data=[topic_data],
    )
    return frame(encode_request_header(0, version, 9, "producer-1") + encode_request(0, version, msg))


VERSIONS = range(apis.VALID_VERSIONS[0][0], apis.VALID_VERSIONS[0][1] + 1)


@pytest.mark.parametrize("version", VERSIONS)
def test_one_batchs_producer_id_once_its_prefix_is_in_and_never_before(version):
    data = produce_frame(version, record_batch(producer_id=4242, n=30))
    whole = parse_request_prefix(data, 1 << 20, read_produce_prefix=True)
    assert whole.producer_ids == (4242,) and whole.acks == -1
    needed = None
    for cut in range(len(data)):
        try:
            header = parse_request_prefix(data[:cut], 1 << 20, read_produce_prefix=True)
        except Incomplete:
            continue
        needed = cut if needed is None else needed
        assert header.producer_ids == (4242,), cut
    assert needed is not None and needed < 200  # a bounded prefix, not the whole request (len(data) is larger)
    assert len(data) > 300


@pytest.mark.parametrize("version", VERSIONS)
def test_several_batches_are_read_whole_and_every_batch_counts(version):
    """Issue 35: a first batch without a producer id, a second with one (and a third repeating it)."""
    data = produce_frame(
        version, record_batch(producer_id=-1) + record_batch(producer_id=4242) + record_batch(producer_id=4242)
    )
    for cut in range(len(data)):  # nothing of it moves before the last batch is in
        with pytest.raises(Incomplete):
            parse_request_prefix(data[:cut], 1 << 20, read_produce_prefix=True)
    assert parse_request_prefix(data, 1 << 20, read_produce_prefix=True).producer_ids == (4242,)


@pytest.mark.parametrize("version", VERSIONS)
def test_every_batch_of_every_partition_of_every_topic(version):
    def partition(index, *pids):
        return {"index": index, "records": b"".join(record_batch(producer_id=pid) for pid in pids)}

    topic_data = [
        {"name": "a", "topic_id": uuid.uuid4(), "partition_data": [partition(0, -1, 7), partition(1, 8, 7)]},
        {
            "name": "b",
            "topic_id": uuid.uuid4(),
            "partition_data": [{"index": 0, "records": None}, partition(2, -1, -1, 9, 5)],
        },
    ]
    msg = new_request(0, version, transactional_id=None, acks=1, timeout_ms=30000, topic_data=topic_data)
    data = frame(encode_request_header(0, version, 9, "p") + encode_request(0, version, msg))
    header = parse_request_prefix(data, 1 << 20, read_produce_prefix=True)
    assert header.producer_ids == (7, 8, 9, 5) and header.only_topic is None and header.topic_count == 2


@pytest.mark.parametrize("version", [2, 3, 9, 13])
def test_a_batch_cut_short_or_corrupt_ends_its_partitions_walk_not_the_requests(version):
    second = record_batch(producer_id=77)
    corrupt = bytearray(record_batch(producer_id=88))
    corrupt[8:12] = (10).to_bytes(4, "big")  # a v2 batch claiming 10 bytes: shorter than any batch header
    topic_data = [
        {
            "name": "a",
            "topic_id": uuid.uuid4(),
            "partition_data": [
                {"index": 0, "records": record_batch(producer_id=-1) + second[:-1]},  # the second batch cut by one byte
                {"index": 1, "records": record_batch(producer_id=-1) + bytes(corrupt) + record_batch(producer_id=99)},
                {"index": 2, "records": record_batch(producer_id=-1) + record_batch(producer_id=5)},
            ],
        }
    ]
    msg = new_request(0, version, transactional_id=None, acks=1, timeout_ms=30000, topic_data=topic_data)
    data = frame(encode_request_header(0, version, 9, "p") + encode_request(0, version, msg))
    assert parse_request_prefix(data, 1 << 20, read_produce_prefix=True).producer_ids == (5,)


@pytest.mark.parametrize("version", [3, 9])
def test_a_request_whose_frame_ends_inside_its_partitions_gives_the_ids_read_so_far(version):
    last = record_batch(producer_id=6)
    topic_data = [
        {
            "name": "a",
            "topic_id": uuid.uuid4(),
            "partition_data": [
                {"index": 0, "records": record_batch(producer_id=-1) + record_batch(producer_id=5)},
                {"index": 1, "records": record_batch(producer_id=-1) + last},
            ],
        }
    ]
    msg = new_request(0, version, transactional_id=None, acks=1, timeout_ms=30000, topic_data=topic_data)
    data = bytearray(frame(encode_request_header(0, version, 9, "p") + encode_request(0, version, msg)))
    short = data[: data.rindex(last) + 20]  # the frame (as its size says) ends inside the last batch
    short[0:4] = (len(short) - 4).to_bytes(4, "big")
    assert parse_request_prefix(bytes(short), 1 << 20, read_produce_prefix=True).producer_ids == (5,)


def test_thousands_of_tiny_batches_are_one_step_each_and_their_ids_kept_once():
    records = b"".join(record_batch(producer_id=pid % 50, n=1) for pid in range(4000))
    data = produce_frame(9, records)
    header = parse_request_prefix(data, 1 << 30, read_produce_prefix=True)
    assert header.producer_ids == tuple(range(50))


@pytest.mark.parametrize("version", [3, 9])
def test_no_producer_id_is_minus_one(version):
    for records in (None, record_batch(producer_id=-1), record_batch(producer_id=-1) * 3, b"\x00" * 20):
        assert (
            parse_request_prefix(produce_frame(version, records), 1 << 20, read_produce_prefix=True).producer_ids == ()
        )


def test_not_asked_for_when_no_quota_is_configured():
    data = produce_frame(9, record_batch(producer_id=5))
    assert parse_request_prefix(data, 1 << 20, read_produce_prefix=False).producer_ids == ()
    assert parse_request_prefix(data, 1 << 20).producer_ids == ()


@pytest.mark.parametrize("version", VERSIONS)
def test_the_only_topic_of_a_one_topic_request_and_none_for_several(version):
    one = parse_request_prefix(
        produce_frame(version, record_batch(producer_id=7), topic="__internal"), 1 << 20, read_produce_prefix=True
    )
    if version >= 13:
        assert isinstance(one.only_topic, bytes) and len(one.only_topic) == 16  # a topic id
    else:
        assert one.only_topic == "__internal"
    partition = {"index": 0, "records": record_batch(producer_id=7)}
    msg = new_request(
        0,
        version,
        transactional_id=None,
        acks=1,
        timeout_ms=30000,
        topic_data=[
            {"name": name, "topic_id": uuid.uuid4(), "partition_data": [partition]} for name in ("__internal", "other")
        ],
    )
    two = parse_request_prefix(
        frame(encode_request_header(0, version, 9, "p") + encode_request(0, version, msg)),
        1 << 20,
        read_produce_prefix=True,
    )
    assert two.only_topic is None and two.producer_ids == (7,)
