"""Byte-rate quotas for clients older than KIP-219, and for acks=0, against Tansu.

kafka-python pinned to api_version (1, 0, 0) sends Produce v5 and Fetch v6. Throttled Produce v0-5 responses are
held for the throttle time (KIP-13's original behaviour); a throttled Fetch v0-7 holds the client's next request.
(Tansu rejects the magic-1 messages of api_version 0.10, so Produce v2 is covered only by the unit tests.)
"""

import time

import pytest

from tests.harness import Tansu, free_port, proxy_config, start_proxy
from tests.integration import clients as c

pytestmark = [pytest.mark.integration, pytest.mark.measures_rate]

QUOTA = 100_000  # bytes/s
WINDOW_NUM = 3
BURST = QUOTA * (WINDOW_NUM - 1)  # what a fresh sensor admits before throttling


@pytest.fixture
def proxy():
    proxy_port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    quotas = [{"entity": {"client-id": "old"}, "producer_byte_rate": QUOTA, "consumer_byte_rate": QUOTA},
              {"entity": {"client-id": "fire-and-forget"}, "producer_byte_rate": QUOTA}]
    running = start_proxy(proxy_config(proxy_port, broker_port, quotas=quotas, **{"quota.window.num": WINDOW_NUM}))
    yield running
    running.stop()
    broker.stop()


def test_produce_v5_responses_are_held_for_the_throttle(proxy):
    from kafka import KafkaProducer

    c.kp_create_topic(proxy.bootstrap, "old-p", 1)
    producer = KafkaProducer(bootstrap_servers=proxy.bootstrap, client_id="old", api_version=(1, 0, 0), acks=1,
                             enable_idempotence=False, linger_ms=0, batch_size=16384)
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
    assert max(latencies) >= 0.5, "no response was held: a throttled Produce v5 response must be delayed"
    assert sum(len(v) for v in c.kp_consume(proxy.bootstrap, "old-p", count).values()) == count


def test_fetch_v6_consumer_is_held_to_its_quota(proxy):
    from confluent_kafka import Producer
    from kafka import KafkaConsumer, TopicPartition

    c.kp_create_topic(proxy.bootstrap, "old-c", 1)
    filler = Producer({"bootstrap.servers": proxy.bootstrap, "batch.size": 16384, "linger.ms": 5})
    for _ in range(60):
        filler.produce("old-c", b"z" * 10_000)
    assert filler.flush(30) == 0
    consumer = KafkaConsumer(bootstrap_servers=proxy.bootstrap, client_id="old", api_version=(1, 0, 0),
                             enable_auto_commit=False)
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
    producer = KafkaProducer(bootstrap_servers=proxy.bootstrap, client_id="fire-and-forget", acks=0,
                             linger_ms=5, batch_size=16384)
    started = time.monotonic()
    for _ in range(100):
        producer.send("a0", b"y" * 10_000)
    producer.flush(60)
    sent = 0.0
    while sent < 100 * 10_000 and time.monotonic() - started < 30:  # muted: the proxy reads as the quota allows
        time.sleep(0.1)
        sent = proxy.metric("kafka_quota_proxy_quota_bytes_total", quota="producer_byte_rate", user="",
                            client_id="fire-and-forget")
    elapsed = time.monotonic() - started
    producer.close(5)
    assert sent >= 100 * 10_000
    assert elapsed >= 0.8 * (sent - BURST) / QUOTA, f"{sent} bytes in {elapsed:.1f}s with acks=0: not muted"
