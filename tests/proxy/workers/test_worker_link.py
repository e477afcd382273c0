"""Two workers' links joined by the test standing in for the parent (it passes each USAGE frame on, as the parent
does): usage recorded in one worker reaches the other's same quota set, the proxy's own and, under
``quota.scope: broker`` in cluster mode, each broker's. The managers run on a fake clock; the links on a real loop
over Unix socket pairs, with a short sync interval (the test waits for frames, never for time to pass)."""

from __future__ import annotations

import asyncio
import contextlib
import socket

from prometheus_client import CollectorRegistry, Counter

from proxy.cluster import creation_claims
from proxy.workers.frames import GONE, USAGE, pack, read_frame
from proxy.workers.link import WorkerLink
from proxy.workers.relay import Relay
from proxy.workers.slot import Slot
from quota.primitives.clock import ManualClock
from quota.primitives.decision import FORWARD, Throttle
from tests.proxy.fake_app import CONFIG, FakeApp


async def pass_on(source: socket.socket, to: socket.socket, frames: int) -> None:
    """The parent's part: the next ``frames`` USAGE frames from one worker written to the other."""
    reader, _ = await asyncio.open_unix_connection(sock=source)
    _, writer = await asyncio.open_unix_connection(sock=to)
    passed = 0
    while passed < frames:
        kind, payload = await read_frame(reader)
        if kind == USAGE:
            writer.write(pack(USAGE, payload))
            passed += 1
    await writer.drain()


@contextlib.asynccontextmanager
async def two_workers(clock, raw=CONFIG):
    """Two workers' apps and links (sync every 5 ms), and the parent's ends of their sockets; closed at the end."""
    a_app, b_app = FakeApp(clock, raw), FakeApp(clock, raw)
    a_ours, a_parent = socket.socketpair()
    b_ours, b_parent = socket.socketpair()
    a = WorkerLink(a_app, 0, a_ours, 5, lambda: None)
    b = WorkerLink(b_app, 1, b_ours, 5, lambda: None)
    await a.start()
    await b.start()
    try:
        yield a_app, b_app, a, a_parent, b_parent
    finally:
        await a.close()
        await b.close()
        for s in (a_parent, b_parent):
            s.close()


def test_usage_reaches_the_peers_own_and_broker_quota_sets():
    async def run():
        clock = ManualClock(1_000_000)
        a_app, b_app = FakeApp(clock), FakeApp(clock)
        a_ours, a_parent = socket.socketpair()
        b_ours, b_parent = socket.socketpair()
        lost = []
        a = WorkerLink(a_app, 0, a_ours, 5, lambda: lost.append("a"))
        b = WorkerLink(b_app, 1, b_ours, 5, lambda: lost.append("b"))
        await a.start()
        await b.start()
        a_app.quotas.produce.record_no_throttle("", "spread", 800)  # the bootstrap port's (the proxy's own) set
        broker_set = a_app.quotas.for_broker(3)  # broker 3's port: a budget of its own
        a.sync()  # its set gets a tap at the sync after it is made
        broker_set.produce.record_no_throttle("", "spread", 20000)  # 2 x the quota over 10 s
        a.sync()
        await asyncio.wait_for(pass_on(a_parent, b_parent, 2), 10)
        for _ in range(200):  # b records as soon as its read loop has both frames
            if (
                b_app.quotas.for_broker(3).produce.stats_for("", "spread") is not None
                and b_app.quotas.produce.stats_for("", "spread") is not None
            ):
                break
            await asyncio.sleep(0.01)
        now = clock.now_ms()
        own = b_app.quotas.produce.stats_for("", "spread", now)
        broker = b_app.quotas.for_broker(3).produce.stats_for("", "spread", now)
        assert own.rate == a_app.quotas.produce.stats_for("", "spread", now).rate > 0
        assert broker.rate == broker_set.produce.stats_for("", "spread", now).rate > own.rate
        assert own.value_total == broker.value_total == 0  # remote usage is not b's own
        assert b_app.quotas.for_broker(3).produce.record_and_get_throttle_time_ms("", "spread", 1, now) > 0
        await a.close()
        await b.close()
        for s in (a_parent, b_parent):
            s.close()

    asyncio.run(run())


def test_the_volume_throttles_scaled_quota_is_shared_as_its_own_scope():
    raw = {
        **CONFIG,
        "settings": {"workers": 2},
        "volume_usage": {"freshness_seconds": 60, "missing_data_action": "OPEN", "produce_base_rate": 1000},
    }

    async def run():
        clock = ManualClock(1_000_000)
        async with two_workers(clock, raw) as (a_app, b_app, a, a_parent, b_parent):
            a_app.quotas.volume.produce.record_no_throttle("", "spread", 20000)
            a.sync()
            await asyncio.wait_for(pass_on(a_parent, b_parent, 1), 10)
            for _ in range(200):
                if b_app.quotas.volume.produce.stats_for("", "spread") is not None:
                    break
                await asyncio.sleep(0.01)
            now = clock.now_ms()
            assert (
                b_app.quotas.volume.produce.stats_for("", "spread", now).rate
                == a_app.quotas.volume.produce.stats_for("", "spread", now).rate
                > 0
            )
            assert b_app.quotas.produce.stats_for("", "spread", now) is None  # not the plain producer_byte_rate's

    asyncio.run(run())


def test_topic_quotas_are_shared_as_their_own_scope_and_hold_across_the_workers():
    """A topic's bytes written and read through one worker reach the other's topic quotas (not its client quotas),
    so a writer of the topic on the other worker is throttled, or refused under on_exceed: reject, by the topic's
    total: one topic quota across both."""
    raw = {
        **CONFIG,
        "settings": {"workers": 2},
        "quotas": [
            {"entity": {"topic": "orders"}, "producer_byte_rate": 1000, "consumer_byte_rate": 1000},
            {"entity": {"topic": "refused"}, "producer_byte_rate": 1000, "on_exceed": "reject"},
        ],
    }

    async def run():
        clock = ManualClock(1_000_000)
        async with two_workers(clock, raw) as (a_app, b_app, a, a_parent, b_parent):
            topics = a_app.quotas.topics
            for topic in ("orders", "refused"):  # what one worker's clients wrote: the whole quota of 10 s
                topics.produce.record_topic(topic, 10_000)
            topics.fetch.record_topic("orders", 10_000)
            a.sync()
            await asyncio.wait_for(pass_on(a_parent, b_parent, 1), 10)
            theirs = b_app.quotas.topics
            for _ in range(200):
                if theirs.fetch.stats_for_topic("orders") is not None:
                    break
                await asyncio.sleep(0.01)
            now = clock.now_ms()
            for kind in ("produce", "fetch"):
                mine = getattr(theirs, kind).stats_for_topic("orders", now)
                assert mine.rate == getattr(topics, kind).stats_for_topic("orders", now).rate > 0
                assert mine.value_total == 0  # remote usage, not the receiver's own
            assert theirs.produce.record_topic("orders", 1, now).throttle_time_ms > 0  # before: a fresh topic, 0
            assert theirs.produce.admit("refused", [1], now) == (False,)
            assert b_app.quotas.produce.stats_for("", "orders", now) is None  # not a client quota's

    asyncio.run(run())


def test_request_rates_are_shared_per_client_entity_and_per_group_and_hold_across_the_workers():
    """Requests counted by request_rate on one worker reach the other's request-rate quotas, a client entity's and
    a group's each in its own scope (a group named as a client id stays a group): a client of the same user, or a
    member of the same group, on the other worker is throttled by the total; before the sync it was not."""
    raw = {
        **CONFIG,
        "settings": {"workers": 2},
        "quotas": [
            {"entity": {"user": "<default>"}, "request_rate": 5},
            {"entity": {"client-id": "etl"}, "request_rate": 5},
            {"entity": {"group": "<default>"}, "request_rate": 2},
        ],
    }

    async def run():
        clock = ManualClock(1_000_000)
        async with two_workers(clock, raw) as (a_app, b_app, a, a_parent, b_parent):
            mine, theirs = a_app.quotas.requests, b_app.quotas.requests
            now = clock.now_ms()
            for i in range(100):  # 10 requests/s over the 10 s window: twice the user's quota, from client ids
                mine.record_client("alice", f"rotated-{i}", now)
            for _ in range(40):  # twice the group's quota
                mine.record_group("etl", now)
            assert theirs.clients.stats_for("alice", "x") is None  # b knows nothing of them before the sync
            a.sync()
            await asyncio.wait_for(pass_on(a_parent, b_parent, 2), 10)  # the scopes requests and groups
            for _ in range(200):
                if theirs.groups.stats_for("", "etl") is not None and theirs.clients.stats_for("alice", "x"):
                    break
                await asyncio.sleep(0.01)
            for kind, user, name in (("clients", "alice", "any"), ("groups", "", "etl")):
                seen = getattr(theirs, kind).stats_for(user, name, now)
                assert seen.rate == getattr(mine, kind).stats_for(user, name, now).rate > 0
                assert seen.value_total == 0  # remote usage, not the receiver's own
            assert theirs.clients.stats_for("", "etl", now) is None  # the group etl is not the client id etl
            assert isinstance(theirs.record_client("alice", "new-id", now), Throttle)
            assert isinstance(theirs.record_group("etl", now), Throttle)
            assert theirs.record_group("other", now) == FORWARD  # each group on its own

    asyncio.run(run())


def test_open_connections_reach_the_peer_and_a_gone_worker_is_forgotten():
    async def run():
        clock = ManualClock(1_000_000)
        async with two_workers(clock) as (a_app, b_app, a, a_parent, b_parent):
            for _ in range(2):
                a_app.connection_quotas.admit("PLAINTEXT", "10.0.0.1", clock.now_ms())
            a.sync()
            from_a, _ = await asyncio.open_unix_connection(sock=a_parent)
            _, to_b = await asyncio.open_unix_connection(sock=b_parent)
            while (frame := await asyncio.wait_for(read_frame(from_a), 10))[0] != USAGE:
                pass
            to_b.write(pack(*frame))
            peers = b_app.connection_quotas.peers
            for _ in range(200):
                if peers.total():
                    break
                await asyncio.sleep(0.01)
            assert (peers.total(), peers.ip("10.0.0.1")) == (2, 2)
            to_b.write(pack(GONE, b"0"))  # the parent: worker 0 exited
            for _ in range(200):
                if not peers.total():
                    break
                await asyncio.sleep(0.01)
            assert (peers.total(), peers.ip("10.0.0.1")) == (0, 0)
            to_b.close()

    asyncio.run(run())


def test_a_topic_two_workers_saw_created_is_charged_by_the_first_to_claim_it_through_the_parent(monkeypatch):
    """Both workers claim the same created topic through the parent's relay (its real reading of their links): the
    first claim is answered True, the other False; a name claimed again past its time is a new creation."""
    monkeypatch.setattr(creation_claims, "CLAIM_TIMEOUT_S", 60.0)  # a busy machine's slow answer is still awaited

    async def run():
        clock = ManualClock(1_000_000)
        async with two_workers(clock) as (a_app, b_app, _, a_parent, b_parent):
            now = [100.0]
            slots = [Slot(0), Slot(1)]
            forwarded = Counter("t_forwarded", "", ["outcome"], registry=CollectorRegistry())
            relay = Relay(slots, forwarded, lambda _: None, lambda: None, lambda: now[0], lambda: False)
            readers = []
            for slot, end in zip(slots, (a_parent, b_parent)):
                reader, slot.writer = await asyncio.open_unix_connection(sock=end)
                readers.append(asyncio.ensure_future(relay.read(slot, reader)))

            async def claim(app) -> bool:
                answer = asyncio.get_running_loop().create_future()
                app.creation_claims.claim("app-store-changelog", 30_000, answer.set_result)
                return await asyncio.wait_for(answer, 30)

            assert await claim(a_app) is True  # a's claim reaches the parent first
            assert await claim(b_app) is False
            now[0] += 31  # past its time: a topic deleted and created again is charged again
            assert await claim(b_app) is True
            for task in readers:
                task.cancel()

    asyncio.run(run())
