"""Real clients through the proxy against a real Kafka-protocol broker (Tansu), in sidecar mode."""

import asyncio

import pytest

from tests.integration import clients as c

pytestmark = pytest.mark.integration

COUNT = 10_000
PARTITIONS = 4


def test_kafka_python_round_trip(sidecar):
    """kafka-python: create a topic, produce 10,000 keyed messages idempotently, read them back, delete."""
    c.kp_create_topic(sidecar.bootstrap, "kp", PARTITIONS)
    c.kp_produce(sidecar.bootstrap, "kp", COUNT, enable_idempotence=True, acks="all")
    c.assert_exactly_once_in_order(c.kp_consume(sidecar.bootstrap, "kp", COUNT), COUNT)
    c.kp_delete_topic(sidecar.bootstrap, "kp")
    assert sidecar.proxy.metric("kafka_quota_proxy_requests_total", listener="PLAINTEXT", api="Produce") > 0
    assert sidecar.proxy.metric("kafka_quota_proxy_requests_total", listener="PLAINTEXT", api="InitProducerId") >= 1


def test_aiokafka_round_trip(sidecar):
    """aiokafka (not idempotent: Tansu fails the InitProducerId v0-2 aiokafka's idempotent producer sends)."""

    async def run():
        await c.aio_create_topic(sidecar.bootstrap, "aio", PARTITIONS)
        await c.aio_produce(sidecar.bootstrap, "aio", COUNT, acks="all")
        got = await c.aio_consume(sidecar.bootstrap, "aio", COUNT)
        await c.aio_delete_topic(sidecar.bootstrap, "aio")
        return got

    c.assert_exactly_once_in_order(asyncio.run(run()), COUNT)


def test_confluent_kafka_round_trip(sidecar):
    """confluent-kafka (librdkafka): idempotent producer."""
    c.ck_create_topic(sidecar.bootstrap, "ck", PARTITIONS)
    c.ck_produce(sidecar.bootstrap, "ck", COUNT, **{"enable.idempotence": True, "linger.ms": 5})
    c.assert_exactly_once_in_order(c.ck_consume(sidecar.bootstrap, "ck", COUNT), COUNT)
    c.ck_delete_topic(sidecar.bootstrap, "ck")


def test_acks0_kafka_python_stays_in_sync(sidecar):
    """Tansu answers acks=0 produces; the proxy drops those answers, so the client's next requests still match."""
    c.kp_create_topic(sidecar.bootstrap, "a0kp", 1)
    c.kp_produce(sidecar.bootstrap, "a0kp", 500, acks=0)
    c.kp_produce(sidecar.bootstrap, "a0kp", 500, acks=1)
    got = c.kp_consume(sidecar.bootstrap, "a0kp", 1000)
    assert sum(len(v) for v in got.values()) == 1000
    assert sidecar.proxy.metric("kafka_quota_proxy_frame_errors_total", listener="PLAINTEXT", direction="response") == 0


def test_acks0_aiokafka_stays_in_sync(sidecar):
    async def run():
        await c.aio_create_topic(sidecar.bootstrap, "a0aio", 1)
        await c.aio_produce(sidecar.bootstrap, "a0aio", 500, acks=0)
        await c.aio_produce(sidecar.bootstrap, "a0aio", 500, acks=1)
        return await c.aio_consume(sidecar.bootstrap, "a0aio", 1000)

    got = asyncio.run(run())
    assert sum(len(v) for v in got.values()) == 1000
