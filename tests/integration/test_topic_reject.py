"""``on_exceed: reject`` with a real producer (confluent-kafka, librdkafka, idempotent as Kafka's clients are by
default) through a sidecar on Tansu: a burst well past the topic's quota has partitions refused NOT_ENOUGH_REPLICAS
by the proxy, the producer retries them by itself (librdkafka's ``txmsgs``: messages sent more than once), every
message is acknowledged, and
every acknowledged message is read back once, in order per key: nothing acknowledged is lost, nothing written twice.
The producer is never throttled (no ``throttle_time_ms``): refused, not delayed."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from tests.integration import clients as c

pytestmark = [pytest.mark.integration, pytest.mark.long_running(seconds=4)]

KIB = 1024
QUOTA = 64 * KIB
COUNT, KEYS = 300, 6
PAD = b"x" * 500  # 300 messages of about 0.5 KiB: more than twice what the topic may take at once


@pytest.mark.parametrize("upstream", ["tansu"], indirect=True)
def test_a_rejecting_topic_quota_loses_nothing_the_producer_was_acknowledged(upstream):
    from confluent_kafka import Producer

    topic = "capped"
    quotas = [{"entity": {"topic": topic}, "producer_byte_rate": QUOTA, "on_exceed": "reject"}]
    with upstream.sidecar(quotas, **{"quota.window.num": 2, "quota.window.size.seconds": 1}) as proxy:
        c.kp_create_topic(proxy.bootstrap, topic, 2)
        acked: list[bytes] = []
        failed: list[str] = []
        sent, throttles = [0], []

        def delivered(err, msg):
            if err is None:
                acked.append(msg.value())
            else:
                failed.append(str(err))

        def stats(text: str) -> None:
            sent[0] = max(sent[0], json.loads(text)["txmsgs"])  # every message sent, each time it was sent

        producer = Producer(
            {
                "bootstrap.servers": proxy.bootstrap,
                "client.id": "rejected",
                "enable.idempotence": True,
                "linger.ms": 5,
                "batch.size": 16 * KIB,
                "statistics.interval.ms": 100,
                "stats_cb": stats,
                "throttle_cb": lambda event: throttles.append(event.throttle_time),
            }
        )
        for seq in range(COUNT):
            key = f"k{seq % KEYS}"
            producer.produce(topic, f"{key}:{seq}:".encode() + PAD, key=key.encode(), on_delivery=delivered)
            producer.poll(0)
        assert producer.flush(60) == 0
        producer.poll(0.3)  # one more statistics interval, after the last retry

        refused = proxy.metric(
            "kafka_quota_proxy_topic_quota_rejected_partitions_total", quota="producer_byte_rate", topic=topic
        )
        assert refused > 0, "the burst was never refused: nothing tested"
        assert sent[0] > COUNT, "the producer did not send the refused partitions' messages again"
        assert failed == [] and len(acked) == COUNT, (failed[:3], len(acked))
        assert throttles == [], "a rejecting quota throttled the producer"

        read = c.ck_consume(proxy.bootstrap, topic, COUNT)
        values = [v for vs in read.values() for v in vs]
        assert sorted(values) == sorted(acked), "what was acknowledged is not what is read back"
        for partition, vs in read.items():
            last: dict[str, int] = defaultdict(lambda: -1)
            for v in vs:
                key, seq, _ = v.split(b":", 2)
                assert int(seq) > last[key.decode()], f"out of order in partition {partition}: {v[:20]!r}"
                last[key.decode()] = int(seq)
        written = proxy.metric("kafka_quota_proxy_topic_quota_bytes_total", quota="producer_byte_rate", topic=topic)
        print(
            f"{refused:.0f} partitions refused, {sent[0] - COUNT} messages sent again; {written / KIB:.0f} KiB written"
        )
