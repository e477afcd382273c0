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
import gc
import threading

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from proxy.cluster.kafka_clients import start_client, stop_client
from proxy.codec.apis import METADATA
from tests.harness import Tansu, free_port
from tests.scripted_broker import ScriptedBroker, answer_normally

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


def left_running(scenario, bootstrap: str) -> list[str]:
    """Run ``scenario(bootstrap)`` on a loop of its own; the tasks still pending once it has ended, then what the
    loop's exception handler was told up to its close (what pytest -s showed as "Task was destroyed but it is
    pending!")."""
    told: list[str] = []

    async def main() -> list[str]:
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: told.append(context["message"]))
        try:
            await scenario(bootstrap)
        except asyncio.CancelledError:
            pass
        await asyncio.sleep(0.1)  # what the stop cancelled has ended by now
        return [repr(t.get_coro())[:80] for t in asyncio.all_tasks() if t is not asyncio.current_task()]

    loop = asyncio.new_event_loop()
    try:
        pending = loop.run_until_complete(main())
    finally:
        loop.close()
    gc.collect()
    return pending + told


async def started_then_stopped_at_once(bootstrap: str) -> None:
    """A consumer stopped as soon as its start returns (a follower whose first call after the start fails at once):
    its coordinator's offsets task has not run yet, and aiokafka's ``stop()`` raised CancelledError awaiting it,
    before it closed its fetcher and its connections."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, client_id="stop-test")
    await consumer.start()
    await stop_client(consumer)


def test_a_consumer_stopped_right_after_its_start_leaves_nothing_running(tansu):
    assert left_running(started_then_stopped_at_once, tansu) == []


class SilentOnMetadata(ScriptedBroker):
    """A broker that answers a Metadata request only once ``release`` is set: a client's bootstrap waits on it,
    and the test sees on the wire when the request is out (with Tansu the test watched aiokafka's private
    in-flight requests for it)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        super().__init__(self._answer)

    def _answer(self, sock, header, request) -> None:
        if header.api_key == METADATA:
            self.release.wait(10)
        answer_normally(sock, header, request)

    @property
    def metadata_asked(self) -> bool:
        return any(header.api_key == METADATA for header, _ in list(self.requests))


async def cancelled_in_bootstrap(start, broker: SilentOnMetadata) -> None:
    """A producer's start cancelled while its bootstrap connection is open (its Metadata request out, never
    answered), as ``ProxyApp.stop`` cancels a follower or publisher meanwhile; then stopped, as the proxy does."""
    producer = AIOKafkaProducer(bootstrap_servers=f"127.0.0.1:{broker.port}", client_id="stop-test")
    starting = asyncio.create_task(start(producer))
    for _ in range(1_000):
        if starting.done() or broker.metadata_asked:
            break
        await asyncio.sleep(0.01)
    assert not starting.done(), "the start ended before its bootstrap's Metadata request was seen"
    assert broker.metadata_asked, "no Metadata request reached the broker within 10 s"
    starting.cancel()
    broker.release.set()  # the answer comes as Tansu's would, after the cancellation
    await asyncio.wait({starting})
    await stop_client(producer)
    assert starting.cancelled()


@pytest.fixture
def silent():
    broker = SilentOnMetadata().start()
    yield broker
    broker.stop()


def test_a_start_cancelled_midway_closes_what_it_opened(silent):
    async def scenario(_):
        await cancelled_in_bootstrap(lambda p: start_client(p, 10.0), silent)

    assert left_running(scenario, None) == []


def test_aiokafka_alone_leaves_its_bootstrap_connection_open(silent):
    """What the test above guards against: aiokafka's own start cancelled in its bootstrap leaves that connection's
    reader task on the loop (or, collected, "Unclosed AIOKafkaConnection"), whatever stops the client afterwards."""

    async def scenario(_):
        await cancelled_in_bootstrap(lambda p: p.start(), silent)

    left = left_running(scenario, None)
    assert any("AIOKafkaConnection" in line for line in left), left  # its reader task, or the connection collected
