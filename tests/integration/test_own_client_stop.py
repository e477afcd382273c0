"""Stopping one of the proxy's own aiokafka clients keeps a cancellation of the task that stops it.

aiokafka's consumer ``stop()`` cancels its own background tasks and awaits them, and those tasks end normally
when cancelled (``NoGroupCoordinator.close``: ``task.cancel(); await task``, the task catching ``CancelledError``).
A cancellation of the task calling ``stop()`` that arrives meanwhile is handed to the awaited task, which swallows
it: the caller's ``await`` returns as if nothing happened. The dynamic-config follower, stopping a consumer before
it retried when ``ProxyApp.stop`` cancelled it, ran on with a fresh consumer until ``DynamicConfig.stop``'s 5 s
bound: about one proxy stop in a hundred took 5 s (seen in test_api_versions' teardowns), and the follower was
left running on the loop. :func:`proxy.cluster.kafka_clients.stop_client` re-raises such a cancellation."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from proxy.cluster.kafka_clients import stop_client
from tests.harness import Tansu, free_port

pytestmark = pytest.mark.integration


async def cancelled_while_stopping(stop, bootstrap: str) -> tuple[bool, list[str]]:
    """A follower that stops its consumer and then goes on, cancelled while ``stop`` awaits the consumer's own
    cancelled task. Whether the follower ended cancelled, and what it did after the stop."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, client_id="stop-test")
    await consumer.start()
    consumer.assign([TopicPartition("t", 0)])
    after: list[str] = []

    async def follower() -> None:
        await stop(consumer)
        after.append("ran on after its cancellation")
        await asyncio.sleep(0)

    task = asyncio.create_task(follower())
    await asyncio.sleep(0)  # the follower now waits in consumer.stop() for the consumer's own cancelled task
    task.cancel()
    await asyncio.wait({task}, timeout=10)
    await consumer.stop()  # a no-op once stopped; stops it if the scenario went otherwise
    return task.cancelled(), after


@pytest.fixture(scope="module")
def tansu():
    port = free_port()
    broker = Tansu(port, advertised=f"127.0.0.1:{port}").start()
    yield f"127.0.0.1:{port}"
    broker.stop()


def test_a_cancellation_while_stopping_a_consumer_is_kept(tansu):
    assert asyncio.run(cancelled_while_stopping(stop_client, tansu)) == (True, [])


def test_aiokafka_alone_swallows_it(tansu):
    """What the test above guards against, shown on the aiokafka the proxy runs with."""
    async def plain_stop(consumer):
        await consumer.stop()

    assert asyncio.run(cancelled_while_stopping(plain_stop, tansu)) == (False, ["ran on after its cancellation"])
