"""Splicing (``connections.splice: auto``): the rest of large streamed frames moves socket to socket in the kernel.

Real clients against Tansu, default settings: large produces and fetches over many partitions with many requests
in flight, every message compared, and ``kafka_quota_proxy_spliced_bytes_total`` read to show the bytes did go
through the splice path (so these tests fail if it is never taken). Then the stream cut in the middle of a
splice: a client that closes (FIN, then RST) half-way through a large request, against Tansu; and a broker that
closes half-way through a large response, which Tansu cannot be made to do, so a scripted broker
(``tests/scripted_broker.py``) sends it.
"""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import threading
import time
from collections import defaultdict

import pytest

from proxy.codec.apis import FETCH, PRODUCE
from proxy.codec.header import encode_request_header, encode_response_header, frame
from proxy.connection.splice import SPLICE_MIN_BYTES, splice_supported
from tests.harness import Tansu, free_port, proxy_config, proxy_in_front, start_proxy
from tests.integration.faults import reset
from tests.integration.raw import connect
from tests.scripted_broker import ScriptedBroker, answer_normally

pytestmark = pytest.mark.skipif(not splice_supported(), reason="splice(2) is Linux-only")

SPLICED = "kafka_quota_proxy_spliced_bytes_total"
PARTITIONS = 12
COUNT = 3000
PAYLOAD = 8 * 1024  # 3000 x 8 KiB = 24 MiB each way: produce requests and fetch responses far above SPLICE_MIN_BYTES


def value(seq: int) -> bytes:
    """Each message's value says which it is all through, so a byte out of place anywhere fails the comparison."""
    head = f"{seq:08d}:".encode()
    return (head * (PAYLOAD // len(head) + 1))[:PAYLOAD]


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def ck_produce_large(bootstrap: str, topic: str) -> None:
    from confluent_kafka import Producer

    errors: list = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
                         "max.in.flight.requests.per.connection": 5})
    for seq in range(COUNT):
        while True:
            try:
                producer.produce(topic, key=str(seq % 97).encode(), value=value(seq),
                                 on_delivery=lambda err, msg: err and errors.append(err))
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert not errors, errors[:3]


def ck_read_all(bootstrap: str, topic: str) -> dict[int, list[bytes]]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        out: dict[int, list[bytes]] = defaultdict(list)
        got, deadline = 0, time.monotonic() + 60
        while got < COUNT and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.5):
                if not msg.error():
                    out[msg.partition()].append(msg.value())
                    got += 1
        return out
    finally:
        consumer.close()


async def aio_read_all(bootstrap: str, topic: str) -> dict[int, list[bytes]]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest",
                                max_partition_fetch_bytes=4 * 1024 * 1024)
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        out: dict[int, list[bytes]] = defaultdict(list)
        got, deadline = 0, time.monotonic() + 60
        while got < COUNT and time.monotonic() < deadline:
            for tp, records in (await consumer.getmany(timeout_ms=500)).items():
                out[tp.partition].extend(r.value for r in records)
                got += len(records)
        return out
    finally:
        await consumer.stop()


def assert_every_message(by_partition: dict[int, list[bytes]]) -> None:
    seen = sorted(int(v[:8]) for values in by_partition.values() for v in values)
    assert seen == list(range(COUNT)), f"{len(seen)} messages read back, {len(set(seen))} distinct, of {COUNT}"
    for values in by_partition.values():
        seqs = [int(v[:8]) for v in values]
        assert seqs == sorted(seqs), "out of order within a partition"
        for v in values:
            assert v == value(int(v[:8])), f"message {int(v[:8])} changed on the way"


@pytest.mark.parametrize("loop_kind", ["uvloop", "asyncio"])
def test_large_produces_and_fetches_are_spliced_and_arrive_intact(loop_kind: str) -> None:
    from tests.integration.clients import ck_create_topic

    proxy_port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    with proxy_in_front(broker, proxy_config(proxy_port, broker_port), loop_kind) as proxy:
        topic = "spliced"
        ck_create_topic(proxy.bootstrap, topic, PARTITIONS)
        ck_produce_large(proxy.bootstrap, topic)
        assert_every_message(ck_read_all(proxy.bootstrap, topic))
        assert_every_message(asyncio.run(aio_read_all(proxy.bootstrap, topic)))
        request_bytes = proxy.metric("kafka_quota_proxy_request_bytes_total", listener="PLAINTEXT", api="Produce")
        response_bytes = proxy.metric("kafka_quota_proxy_response_bytes_total", listener="PLAINTEXT", api="Fetch")
        spliced_requests = proxy.metric(SPLICED, listener="PLAINTEXT", direction="request")
        spliced_responses = proxy.metric(SPLICED, listener="PLAINTEXT", direction="response")
    # Most of the produced and fetched bytes went through the kernel (each frame's first read is copied)
    assert spliced_requests > 0.5 * request_bytes, (spliced_requests, request_bytes)
    assert spliced_responses > 0.5 * response_bytes, (spliced_responses, response_bytes)


def test_splice_off_copies_everything() -> None:
    from tests.integration.clients import ck_create_topic

    proxy_port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    config = proxy_config(proxy_port, broker_port, **{"connections.splice": "off"})
    with proxy_in_front(broker, config) as proxy:
        ck_create_topic(proxy.bootstrap, "copied", PARTITIONS)
        ck_produce_large(proxy.bootstrap, "copied")
        assert_every_message(ck_read_all(proxy.bootstrap, "copied"))
        assert proxy.metric(SPLICED, listener="PLAINTEXT", direction="request") == 0
        assert proxy.metric(SPLICED, listener="PLAINTEXT", direction="response") == 0
