"""The active producer-id quota (KIP-936) through the proxy, against Tansu, with idempotent producers in a loop,
under ``producer.id.quota.enforcement: throttle`` (the KIP's behaviour: forwarded, then throttled).

Each new idempotent producer gets a new producer id from InitProducerId; its first Produce carries it. With
``producer_ids_rate`` 3 per one-hour window and one window (a burst of 3), the first three producers are not
throttled; the fourth one's Produce response carries a throttle (an hour / 3 per new id below zero, capped at
``quota.mute.max.ms``, 3 s here). The bucket refills 3 ids an hour, a token every 20 minutes: with a 10 s window
(0.3 ids a second) a slow machine, where starting three producers took over 3.3 s, had the fourth not throttled and
the test failed once; here the bucket holds what the producers took for as long as any machine runs the test,
with nothing of the proxy read or replaced (its clock is its own). The throttle is what the client reports
(kafka-python logs it, confluent-kafka calls ``throttle_cb``); every message is still
acknowledged and read back. Every connection's user is ANONYMOUS until SASL lands, so "another user is
unaffected" is covered by the unit tests of the quota manager, not here. aiokafka is not used: Tansu rejects its
InitProducerId v0.
"""

from __future__ import annotations

import logging
import time

import pytest

from tests.harness import Tansu, free_port, proxy_config, start_proxy
from tests.integration.clients import ck_create_topic

pytestmark = pytest.mark.integration

TOPIC = "pids"
RATE, WINDOW_S = 3, 3600
MUTE_MAX_MS = 3000  # the throttle reported and the mute: the fourth producer's next send waits this long


@pytest.fixture
def cluster():
    proxy_port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    quotas = [{"entity": {"user": "<default>"}, "producer_ids_rate": RATE}]
    try:
        proxy = start_proxy(
            proxy_config(
                proxy_port,
                broker_port,
                quotas=quotas,
                **{
                    "producer.id.quota.enforcement": "throttle",  # the KIP's behaviour (hold: test_producer_id_hold.py)
                    "producer.id.quota.window.num": 1,
                    "producer.id.quota.window.size.seconds": WINDOW_S,
                    "quota.mute.max.ms": MUTE_MAX_MS,
                },
            )
        )
    except BaseException:
        broker.stop()
        raise
    try:
        ck_create_topic(proxy.bootstrap, TOPIC, 3)
        yield proxy
    finally:
        try:
            proxy.stop()
        finally:
            broker.stop()  # never left running, even when the proxy fails to stop


def read_back(bootstrap: str, expected: int) -> list[bytes]:
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "check",
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
        }
    )
    consumer.subscribe([TOPIC])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(values) < expected and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            values.append(msg.value())
    consumer.close()
    return values


def test_kafka_python_producers_in_a_loop_the_fourth_new_producer_id_is_throttled(cluster, caplog):
    from kafka import KafkaProducer

    proxy = cluster
    throttled_after = []
    for i in range(5):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="kafka"):
            producer = KafkaProducer(
                bootstrap_servers=proxy.bootstrap, enable_idempotence=True, acks="all", client_id=f"loop-{i}"
            )
            producer.send(TOPIC, f"m{i}".encode()).get(30)
            producer.send(TOPIC, f"n{i}".encode()).get(30)  # the same producer id: not counted again
            producer.close(5)
        throttled_after.append(any("ProduceResponse throttled" in r.getMessage() for r in caplog.records))
    assert throttled_after[:3] == [False, False, False], throttled_after
    assert throttled_after[3], throttled_after
    assert proxy.metric("kafka_quota_proxy_producer_ids_new_total", user="ANONYMOUS") == 5
    for i in range(5):  # InitProducerId answers attributed to who asked
        assert (
            proxy.metric(
                "kafka_quota_proxy_producer_ids_issued_total", user="ANONYMOUS", client_id=f"loop-{i}", ip="127.0.0.1"
            )
            == 1
        )
    assert proxy.metric("kafka_quota_proxy_producer_ids_throttled_requests_total", user="ANONYMOUS") >= 2
    assert sorted(read_back(proxy.bootstrap, 10)) == sorted(
        [f"m{i}".encode() for i in range(5)] + [f"n{i}".encode() for i in range(5)]
    )


def test_confluent_kafka_producers_in_a_loop_the_fourth_new_producer_id_is_throttled(cluster):
    from confluent_kafka import Producer

    proxy = cluster
    throttles: list[list[int]] = []
    for i in range(4):
        seen: list[int] = []
        producer = Producer(
            {
                "bootstrap.servers": proxy.bootstrap,
                "enable.idempotence": True,
                "client.id": f"ck-loop-{i}",
                "throttle_cb": lambda e: seen.append(e.throttle_time),
            }
        )
        producer.produce(TOPIC, f"c{i}".encode())
        assert producer.flush(30) == 0
        producer.poll(0.5)  # serve the throttle callback
        throttles.append(seen)
    assert throttles[:3] == [[], [], []], throttles
    # an hour / 3 for one id below zero, capped (confluent-kafka reports seconds)
    assert throttles[3] and max(throttles[3]) == MUTE_MAX_MS / 1000, throttles
    assert sorted(read_back(proxy.bootstrap, 4)) == [f"c{i}".encode() for i in range(4)]
