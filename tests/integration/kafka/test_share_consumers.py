"""A share consumer (KIP-932) under ``consumer_byte_rate``, through a cluster-mode proxy in front of Apache Kafka 4.4
(kafka1), which serves share groups by default: confluent-kafka's ShareConsumer (librdkafka's KIP-932 client), as an
application runs it, implicit acknowledgements.

Its ShareFetch answers are charged as a consumer's Fetch answers are: reading a topic written directly takes at least
the time the quota allows (the proxy's throttles counted), where, uncharged, the same consumer reads it as fast as the
broker answers; and each answer's records to the topic's own ``consumer_byte_rate`` (set high here: it counts, it does
not decide). Nothing is trimmed, so every record reaches the member whole, once: a record cut from an answer would
have stayed locked and come back with a second delivery. Cluster mode skims every ShareFetch and ShareAcknowledge
answer for node endpoints to rewrite (Kafka's own frames here, none of them naming a new leader: one node).
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from tests.harness import cluster_config, cluster_ports, start_proxy, wait_until
from tests.integration.kafka.quotas_common import topics
from tests.kafka_cluster import unique_topic

pytestmark = [pytest.mark.integration, pytest.mark.long_running(seconds=9)]

QUOTA = 64 * 1024  # bytes/s
WINDOWS = 2  # of 1 s: a fresh sensor's burst is QUOTA x (WINDOWS - 1)
COUNT, SIZE = 300, 1000  # 300 kB: about 4 s at the quota past the burst
CLIENT_ID = "share-reader"


def _earliest(bootstrap: str, group: str) -> None:
    """The group starts at the log's start (a share group's default is its end: records written before it joined
    would not be delivered)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entry = ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)
    for future in admin.incremental_alter_configs(
        [ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])]
    ).values():
        future.result(timeout=30)


def _write(bootstrap: str, topic: str) -> set[bytes]:
    values = {b"%05d" % i + b"x" * (SIZE - 5) for i in range(COUNT)}
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 8192})  # many batches
    for value in sorted(values):
        producer.produce(topic, value)
    assert producer.flush(30) == 0
    return values


def test_a_share_consumer_is_held_to_its_consumer_byte_rate_and_gets_every_record_once(kafka1):
    direct = kafka1.direct_bootstrap
    bootstrap_port, base = cluster_ports()
    with topics(kafka1, "share-rate", 1, 3) as (topic,):
        proxy = start_proxy(
            cluster_config(
                direct.split(","),
                bootstrap_port,
                base,
                dynamic_config={"enabled": False},
                settings={"quota.window.num": WINDOWS, "quota.window.size.seconds": 1},
                quotas=[
                    {"entity": {"client-id": CLIENT_ID}, "consumer_byte_rate": QUOTA},
                    {"entity": {"topic": topic}, "consumer_byte_rate": 1 << 30},
                ],
            )
        )
        try:
            group = unique_topic("share-rate-group")
            _earliest(direct, group)
            written = _write(direct, topic)
            received, took = _read(f"127.0.0.1:{bootstrap_port}", topic, group)
            labels = {"quota": "consumer_byte_rate", "client_id": CLIENT_ID}
            throttled = proxy.scraped_sum("kafka_quota_proxy_quota_throttled_responses_total", **labels)
            charged = proxy.scraped_sum("kafka_quota_proxy_quota_bytes_total", **labels)
            topic_bytes = proxy.scraped_sum(
                "kafka_quota_proxy_topic_quota_bytes_total", quota="consumer_byte_rate", topic=topic
            )
        finally:
            proxy.stop()
    assert sorted(received) == sorted(written)  # every record, whole, once: nothing trimmed, nothing redelivered
    assert throttled > 0
    assert charged >= COUNT * SIZE  # the records and their framing
    assert topic_bytes >= COUNT * SIZE  # each answer decoded, its records counted for the topic
    # At most the burst and the first answer before any throttle; the rest at the quota, however fast the broker.
    floor = (COUNT * SIZE - QUOTA * WINDOWS) / QUOTA
    ratio = COUNT * SIZE / took / QUOTA
    print(f"{COUNT * SIZE} bytes in {took:.1f} s ({ratio:.2f} x the quota), {throttled:.0f} throttles")
    # Half of it: timed from the first record the application polled, which may come after a few answers (a busy
    # machine); uncharged, the whole topic arrives in about 0.1 s.
    assert took >= 0.5 * floor, f"{ratio:.2f} x the quota"


def _read(bootstrap: str, topic: str, group: str) -> tuple[list[bytes], float]:
    """What the share consumer got, until it has as many records as were written, and how long they took to come
    from the first."""
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": CLIENT_ID})
    received: list[bytes] = []
    first = None
    try:
        consumer.subscribe([topic])

        def all_read() -> bool:
            nonlocal first
            for message in consumer.poll(1.0):
                assert message.error() is None, message.error()
                first = first or time.monotonic()
                received.append(message.value())
            return len(received) >= COUNT

        wait_until(all_read, 120, "every record read through the proxy", interval=0)
        return received, time.monotonic() - first
    finally:
        consumer.close()
