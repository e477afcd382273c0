"""Byte-rate quotas for clients older than KIP-219, and for acks=0, against Tansu.

kafka-python pinned to api_version (1, 0, 0) sends Produce v5 and Fetch v6. As Kafka >= 2.0 does for every version,
a throttled Produce v0-5 is answered at once, carrying throttle_time_ms, and the connection is muted (not read) until
the throttle ends: the mute, not a held response, holds a client that does not back off by itself, so a client whose
request.timeout.ms is below the throttle never resends a batch already appended. A throttled Fetch v0-7 holds the
client's next request the same way. (Tansu rejects the magic-1 messages of api_version 0.10, so Produce v2 is covered
only by the unit tests.)
"""

import struct
import time

import pytest

from proxy.codec.apis import METADATA, PRODUCE
from proxy.codec.header import encode_request_header, frame, response_header_length
from proxy.codec.messages import decode_response, encode_request, new_request
from tests.harness import Tansu, free_port, proxy_config, start_proxy
from tests.integration import clients as c
from tests.integration import raw

pytestmark = [pytest.mark.integration, pytest.mark.measures_rate]

QUOTA = 100_000  # bytes/s
WINDOW_NUM = 3
BURST = QUOTA * (WINDOW_NUM - 1)  # what a fresh sensor admits before throttling


@pytest.fixture
def proxy():
    proxy_port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    quotas = [
        {"entity": {"client-id": "old"}, "producer_byte_rate": QUOTA, "consumer_byte_rate": QUOTA},
        {"entity": {"client-id": "fire-and-forget"}, "producer_byte_rate": QUOTA},
        {"entity": {"client-id": "old-short-timeout"}, "producer_byte_rate": QUOTA},
        {"entity": {"client-id": "raw-old"}, "producer_byte_rate": QUOTA},
    ]
    running = start_proxy(proxy_config(proxy_port, broker_port, quotas=quotas, **{"quota.window.num": WINDOW_NUM}))
    yield running
    running.stop()
    broker.stop()


def test_produce_v5_clients_are_held_to_their_quota_by_the_mute(proxy):
    from kafka import KafkaProducer

    c.kp_create_topic(proxy.bootstrap, "old-p", 1)
    producer = KafkaProducer(
        bootstrap_servers=proxy.bootstrap,
        client_id="old",
        api_version=(1, 0, 0),
        acks=1,
        enable_idempotence=False,
        linger_ms=0,
        batch_size=16384,
    )
    latencies, count, value = [], 60, b"x" * 10_000
    started = time.monotonic()
    for _ in range(count):
        t = time.monotonic()
        producer.send("old-p", value).get(30)
        latencies.append(time.monotonic() - t)
    elapsed = time.monotonic() - started
    producer.close(5)
    sent = proxy.metric("kafka_quota_proxy_quota_bytes_total", quota="producer_byte_rate", user="", client_id="old")
    assert elapsed >= 0.9 * (sent - BURST) / QUOTA, f"{sent} bytes in {elapsed:.1f}s: not held to the quota"
    assert max(latencies) >= 0.5, "no request waited: the mute after a throttled Produce v5 response must hold"
    assert sum(len(v) for v in c.kp_consume(proxy.bootstrap, "old-p", count).values()) == count


def test_produce_v5_with_a_request_timeout_below_the_throttle_is_answered_at_once_and_never_resent(proxy):
    """kafka-python with Produce v5, request.timeout.ms 2 s, retries (its default: unbounded), no idempotence: one
    request of 60 x 10 KB (600 KB) over three partitions on a fresh 100 KB/s quota (a burst of 200 KB) is throttled
    for about 4 s, longer than the request timeout. Kafka answers it at once and mutes the connection; so does the
    proxy, and every record is acknowledged once and appended once. (Holding the response instead, as the proxy
    did, timed the request out: the client resent batches already appended, each copy throttled longer, so the
    topic held them two times or more.) One request, not several in flight: a request a pre-KIP-219 client sends
    behind a throttled one waits out the mute unread, against Kafka as through the proxy, and times out there too."""
    from kafka import KafkaProducer

    c.kp_create_topic(proxy.bootstrap, "old-timeout", 3)
    count, value = 60, b"t" * 10_000
    producer = KafkaProducer(
        bootstrap_servers=proxy.bootstrap,
        client_id="old-short-timeout",
        api_version=(1, 0, 0),
        acks=1,
        enable_idempotence=False,
        request_timeout_ms=2000,
        delivery_timeout_ms=30_000,
        linger_ms=10_000,
        batch_size=1_000_000,
        max_request_size=2_000_000,
    )
    try:
        futures = [producer.send("old-timeout", value, partition=i % 3) for i in range(count)]
        producer.flush(40)  # one batch per partition, all in one request
        offsets = sorted(f.get(1).offset for f in futures)
    finally:
        producer.close(5)
    labels = {"quota": "producer_byte_rate", "user": "", "client_id": "old-short-timeout"}
    throttled = proxy.metric("kafka_quota_proxy_quota_throttled_responses_total", **labels)
    throttle_ms = proxy.metric("kafka_quota_proxy_quota_throttle_time_seconds_total", **labels) * 1000
    assert throttled == 1 and throttle_ms > 2000, (throttled, throttle_ms)  # one request, throttled past its timeout
    assert offsets == sorted(list(range(count // 3)) * 3)
    by_partition = c.kp_consume(proxy.bootstrap, "old-timeout", 2 * count, timeout=10)
    assert sum(len(v) for v in by_partition.values()) == count, "the batch was appended more than once"


def _produce_v5(corr: int, records: bytes) -> bytes:
    body = encode_request(
        PRODUCE,
        5,
        new_request(
            PRODUCE,
            5,
            acks=1,
            timeout_ms=10_000,
            topic_data=[{"name": "old-raw", "partition_data": [{"index": 0, "records": records}]}],
        ),
    )
    return frame(encode_request_header(PRODUCE, 5, corr, "raw-old") + body)


def test_a_throttled_produce_v5_response_comes_at_once_and_the_next_request_waits_for_the_throttle(proxy):
    """Raw frames on one connection: a Produce v5 of about 500 KB (fresh quota of 100 KB/s, a burst of 200 KB),
    then at once a Metadata request. The Produce response comes first, carrying throttle_time_ms (T, about 3 s),
    and the Metadata answer only about T later, however the machine is loaded: the proxy read nothing more from the
    client until the throttle ended. Measured as lower bounds only (from the Produce to the Metadata answer, and
    between the two answers: about 0 when the Produce response was held for T, as before)."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    c.kp_create_topic(proxy.bootstrap, "old-raw", 1)
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for i in range(50):
        builder.append(i, timestamp=None, key=None, value=bytes(10_000), headers=[])
    records = bytes(builder.build())
    metadata = frame(
        encode_request_header(METADATA, 1, 2, "raw-old")
        + encode_request(METADATA, 1, new_request(METADATA, 1, topics=[{"name": "old-raw"}]))
    )
    sock = raw.connect(proxy.port)
    sock.settimeout(30)
    try:
        sent = time.monotonic()
        sock.sendall(_produce_v5(1, records) + metadata)
        first = raw.read_frame(sock)
        first_at = time.monotonic()
        second = raw.read_frame(sock)
        second_at = time.monotonic()
    finally:
        sock.close()
    assert struct.unpack_from(">i", first)[0] == 1 and struct.unpack_from(">i", second)[0] == 2
    whole = struct.pack(">i", len(first)) + first
    produced = decode_response(PRODUCE, 5, whole[response_header_length(PRODUCE, 5, whole) :])
    throttle_s = produced.throttle_time_ms / 1000
    assert throttle_s > 1.5, produced.throttle_time_ms
    assert [p.error_code for t in produced.responses for p in t.partition_responses] == [0]
    assert second_at - sent >= 0.9 * throttle_s, "the next request was read before the throttle ended"
    assert second_at - first_at >= 0.5 * throttle_s, (
        f"the Produce response came {first_at - sent:.1f} s after it was sent, the next answer "
        f"{second_at - first_at:.1f} s after it: the response was held for the throttle instead of sent at once"
    )


def test_fetch_v6_consumer_is_held_to_its_quota(proxy):
    from confluent_kafka import Producer
    from kafka import KafkaConsumer, TopicPartition

    c.kp_create_topic(proxy.bootstrap, "old-c", 1)
    filler = Producer({"bootstrap.servers": proxy.bootstrap, "batch.size": 16384, "linger.ms": 5})
    for _ in range(60):
        filler.produce("old-c", b"z" * 10_000)
    assert filler.flush(30) == 0
    consumer = KafkaConsumer(
        bootstrap_servers=proxy.bootstrap, client_id="old", api_version=(1, 0, 0), enable_auto_commit=False
    )
    tp = TopicPartition("old-c", 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    got, started = 0, time.monotonic()
    while got < 60 and time.monotonic() - started < 30:
        got += sum(len(r) for r in consumer.poll(200).values())
    elapsed = time.monotonic() - started
    consumer.close()
    assert got == 60
    fetched = proxy.metric("kafka_quota_proxy_quota_bytes_total", quota="consumer_byte_rate", user="", client_id="old")
    assert fetched >= 60 * 10_000
    assert elapsed >= 0.8 * (fetched - BURST) / QUOTA, f"{fetched} bytes in {elapsed:.1f}s: not held to the quota"


def test_acks0_producer_is_muted_to_its_quota(proxy):
    """acks=0: there is no response to carry throttle_time_ms, so the mute alone holds the client."""
    from kafka import KafkaProducer

    c.kp_create_topic(proxy.bootstrap, "a0", 1)
    producer = KafkaProducer(
        bootstrap_servers=proxy.bootstrap, client_id="fire-and-forget", acks=0, linger_ms=5, batch_size=16384
    )
    started = time.monotonic()
    for _ in range(100):
        producer.send("a0", b"y" * 10_000)
    producer.flush(60)
    sent = 0.0
    while sent < 100 * 10_000 and time.monotonic() - started < 30:  # muted: the proxy reads as the quota allows
        time.sleep(0.1)  # a bounded condition wait: its duration is measured (a rate group)
        sent = proxy.metric(
            "kafka_quota_proxy_quota_bytes_total", quota="producer_byte_rate", user="", client_id="fire-and-forget"
        )
    elapsed = time.monotonic() - started
    producer.close(5)
    assert sent >= 100 * 10_000
    assert elapsed >= 0.8 * (sent - BURST) / QUOTA, f"{sent} bytes in {elapsed:.1f}s with acks=0: not muted"
