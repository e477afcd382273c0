"""``quota.smoothing: on`` in force end to end: real clients (default settings) through the proxy against Tansu.

A kafka-python producer writes 600 KB as fast as it can, then a confluent-kafka consumer reads them back, each under
a 200 KB/s quota of its own (Kafka's default 11 x 1 s windows). Under Kafka's algorithm (smoothing off) a fresh
entity may take about quota x 10 s at once, so all of it would go through in a fraction of a second, unthrottled.
With smoothing on, the bucket holds one second's worth: past it each request (or fetch) is held for about its size
/ the quota, so moving 600 KB takes at least about 2 s (bounded generously below at 1.4 s) in many short throttles
(each well under the 2 s bound here; Kafka's would come as one long one). The bench (``bench/smoothing.py``) measures
the per-second rates.
"""

import time

import pytest

from tests.harness import Tansu, free_port, proxy_config, proxy_in_front

pytestmark = [pytest.mark.integration]

QUOTA = 200_000
COUNT, VALUE = 600, b"v" * 1000
TOPIC = "smooth"


def metric(proxy, name: str, quota: str, client_id: str) -> float:
    return proxy.metric(f"kafka_quota_proxy_quota_{name}", quota=quota, user="", client_id=client_id)


def test_smoothing_on_spreads_a_fast_client_in_short_throttles():
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic

    proxy_port, broker_port = free_port(), free_port()
    quotas = [
        {"entity": {"client-id": "smooth-producer"}, "producer_byte_rate": QUOTA},
        {"entity": {"client-id": "smooth-consumer"}, "consumer_byte_rate": QUOTA},
    ]
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    with proxy_in_front(
        broker, proxy_config(proxy_port, broker_port, quotas=quotas, **{"quota.smoothing": "on"})
    ) as proxy:
        admin = KafkaAdminClient(bootstrap_servers=proxy.bootstrap, client_id="admin")
        try:
            admin.create_topics([NewTopic(TOPIC, 1, 1)])
        finally:
            admin.close()

        producer = KafkaProducer(bootstrap_servers=proxy.bootstrap, client_id="smooth-producer")
        started = time.monotonic()
        try:
            for _ in range(COUNT):
                producer.send(TOPIC, VALUE)
            producer.flush(60)
        finally:
            producer.close(10)
        produced_s = time.monotonic() - started

        consumer = Consumer(
            {
                "bootstrap.servers": proxy.bootstrap,
                "group.id": "smooth",
                "client.id": "smooth-consumer",
                "enable.auto.commit": False,
            }
        )
        received, started = 0, time.monotonic()
        try:
            consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
            while received < COUNT and time.monotonic() - started < 60:
                received += sum(m.error() is None for m in consumer.consume(100, 0.5))
        finally:
            consumer.close()
        consumed_s = time.monotonic() - started

        for key, client_id, took in (
            ("producer_byte_rate", "smooth-producer", produced_s),
            ("consumer_byte_rate", "smooth-consumer", consumed_s),
        ):
            throttled = metric(proxy, "throttled_responses_total", key, client_id)
            longest = metric(proxy, "throttle_time_max_seconds", key, client_id) * 1000
            counted = metric(proxy, "bytes_total", key, client_id)
            assert counted >= COUNT * len(VALUE), (key, counted)
            assert took >= 1.4, (key, took)  # at least (600 KB - one second's 200 KB) / 200 KB/s, less a margin
            assert throttled >= 5 and 0 < longest <= 2000, (key, throttled, longest)
    assert received == COUNT
