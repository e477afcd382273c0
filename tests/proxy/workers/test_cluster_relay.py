"""``workers: N`` with ``quota.cluster.topic`` (issue 26), without a broker or processes: the parent
(proxy.workers.cluster_relay) publishes the sum of its workers' usage as the proxy's one record, passes peers' usage
and, in fallback, the silent peers' share to every worker as USAGE frames, and keeps the cluster_usage_* metrics and
the /readyz note itself; a worker's link tells the parent when it synced early; a peer's delta of thousands of
entities neither stalls the parent (encoded in a thread) nor a worker (recorded a step at a time). Wall time is a
fake clock; the Kafka side is tests/integration/test_cluster_workers.py."""

from __future__ import annotations

import asyncio
import logging
import socket

from config.loader import parse_config
from proxy.workers.cluster_relay import WorkersClusterUsage
from proxy.workers.frames import BEAT, EAGER, USAGE, pack, read_frame
from proxy.workers.link import WorkerLink
from proxy.workers.supervisor import Supervisor
from quota.primitives.clock import ManualClock
from quota.sharing.usage_delta import UsageDelta
from quota.sharing.usage_encoding import decode, encode
from tests.proxy.fake_app import FakeApp

RATE = 1000


def raw(**settings):
    return {
        "upstream": {"bootstrap_servers": ["127.0.0.1:9092"]},
        "listeners": [{"name": "PLAINTEXT", "bind": "127.0.0.1:0"}],
        "metrics": {"bind": "127.0.0.1:0"},
        "quotas": [{"entity": {"client-id": "spread"}, "producer_byte_rate": RATE}],
        "settings": {"workers": 2, "quota.scope": "cluster", "quota.cluster.topic": "__usage", **settings},
    }


def parent(**settings):
    """A supervisor (not started) with the relay start() would make, its frames to the workers collected."""
    supervisor = Supervisor(parse_config(raw(**settings)), "proxy.yaml", "info")
    sent: list[UsageDelta] = []

    def to_workers(frame: bytes) -> None:
        assert frame[4:5] == USAGE
        sent.append(decode(frame[5:]))

    wall = ManualClock(1_000_000)
    supervisor.cluster = WorkersClusterUsage(
        supervisor.config, supervisor.registry, {"PLAINTEXT": 9000}, to_workers, wall
    )
    return supervisor, supervisor.cluster, sent, wall


def metric(supervisor, name, **labels):
    return supervisor.registry.get_sample_value(f"kafka_quota_proxy_cluster_usage_{name}", labels)


def test_the_parent_publishes_its_workers_sum_under_the_proxys_one_id():
    supervisor, relay, sent, wall = parent()
    assert relay.usage.own_id.endswith(":9000")  # the parent's listener port: the same whichever worker restarts
    relay.worker_usage(encode(UsageDelta("0", produce=(("", "spread", 300.0),), ips=(("10.0.0.1", 1),))))
    relay.worker_usage(encode(UsageDelta("1", produce=(("", "spread", 200.0),))))
    relay.worker_usage(b"{broken")  # logged, left out
    published = relay.usage.take().delta
    assert (published.source, published.produce, published.ips) == (relay.usage.own_id, (("", "spread", 500.0),), ())
    assert sent == []  # nothing to record while no peer is known
    assert relay.usage.take().delta.empty  # the next sync starts afresh


def test_a_peers_record_goes_to_every_worker_and_its_own_does_not():
    supervisor, relay, sent, wall = parent(**{"quota.cluster.id": "a"})
    now = wall.now_ms()
    assert not relay.usage.take_record(b"a", encode(UsageDelta("a", produce=(("", "spread", 1.0),))), now)
    peer = UsageDelta("b", produce=(("", "spread", 700.0),), open_connections=(("total", "", 4),))
    assert relay.usage.take_record(b"b", encode(peer), now)
    assert sent == [UsageDelta("b", produce=(("", "spread", 700.0),))]  # connection counts stay per proxy
    assert [metric(supervisor, "records_total", direction=d) for d in ("received", "skipped")] == [1, 1]


def test_the_parent_publishes_its_workers_topic_usage_and_passes_a_peers_to_them():
    """Issue 47: a topic's bytes, which the workers tell beside their clients' (one delta), go into the proxy's one
    record once every live peer reads them; a peer's reach every worker."""
    supervisor, relay, sent, wall = parent(**{"quota.cluster.id": "a"})
    peer = UsageDelta("b", topic_produce=(("", "orders", 700.0),))
    assert relay.usage.take_record(b"b", encode(peer), wall.now_ms())  # b reads version 3 (it says so)
    assert sent == [peer]
    for worker, value in (("0", 300.0), ("1", 200.0)):
        relay.worker_usage(encode(UsageDelta(worker, topic_produce=(("", "orders", value),))))
    assert relay.usage.take().delta.topic_produce == (("", "orders", 500.0),)


def test_fallback_is_decided_once_in_the_parent_and_every_worker_gets_the_silent_peers_share(caplog):
    supervisor, relay, sent, wall = parent(**{"quota.cluster.id": "a"})
    relay.usage.take_record(b"b", encode(UsageDelta("b")), wall.now_ms())
    relay.usage.take_record(b"c", encode(UsageDelta("c")), wall.now_ms())
    wall.advance(10_001)  # past quota.cluster.stale.ms: b and c are silent
    relay.worker_usage(encode(UsageDelta("0", produce=(("", "spread", 300.0),))))
    relay.worker_usage(encode(UsageDelta("1", produce=(("", "spread", 100.0),))))
    with caplog.at_level(logging.WARNING, "kafka_quota_proxy.cluster_usage"):
        assert relay.usage.take().delta.produce == (("", "spread", 400.0),)  # what is published stays its own
    # each worker records the proxy's whole usage once more for each of the 2 silent peers: quota / 3 in total
    assert sent == [UsageDelta("a", produce=(("", "spread", 800.0),))]  # (b's and c's empty records: not sent)
    assert "keeping to this sidecar's share, quota / 3" in caplog.text
    assert supervisor.ready_note() == "quota.scope cluster: no peer sidecar fresh, keeping to quota / 3"
    exposition = supervisor._exposition().decode()  # what a scrape of the parent shows (no worker serving here)
    assert "kafka_quota_proxy_cluster_usage_fallback 1.0" in exposition
    assert 'kafka_quota_proxy_cluster_usage_peers{state="known"} 2.0' in exposition
    relay.usage.take_record(b"b", encode(UsageDelta("b")), wall.now_ms())  # b is back
    relay.usage.take()
    assert supervisor.ready_note() is None and metric(supervisor, "fallback") == 0


def link_frames(config: dict) -> list[bytes]:
    """The kinds of the frames a worker's link sends when one entity's usage passes the early-sync share."""

    async def run():
        app = FakeApp(ManualClock(1_000_000), config)
        ours, theirs = socket.socketpair()
        link = WorkerLink(app, 0, ours, 10_000, lambda: None)  # no periodic sync within the test
        link._min_gap_s = 0.0  # the early sync at once, not a quarter interval after the first
        await link.start()
        reader, _ = await asyncio.open_unix_connection(sock=theirs)

        async def next_frame():  # the heartbeats (every BEAT_INTERVAL_S, whatever else is sent) left out
            while (frame := await asyncio.wait_for(read_frame(reader), 10)) is not None and frame[0] == BEAT:
                pass
            return frame

        kinds = [(await next_frame())[0] for _ in range(2)]  # its hello, its first sync
        app.quotas.produce.record_and_get_throttle_time_ms("", "spread", RATE)  # all of a second's quota at once
        kinds = [(await next_frame())[0]]  # the early sync's delta
        app.quotas.produce.record_no_throttle("", "spread", 1)
        await link.close()  # an ordinary last sync: never followed by EAGER
        while (frame := await next_frame()) is not None:
            kinds.append(frame[0])
        theirs.close()
        return kinds

    return asyncio.run(run())


def test_a_worker_that_syncs_early_tells_the_parent_only_with_a_usage_topic():
    assert link_frames(raw()) == [USAGE, EAGER, USAGE]
    assert link_frames({**raw(), "settings": {"workers": 2}}) == [USAGE, USAGE]


LARGE = 5000  # entities: more than one recording step (quota.sharing.remote_usage.RECORD_STEP), a frame past 64 KiB


def large_delta(source: str) -> UsageDelta:
    return UsageDelta(source, produce=tuple((f"user{i:05}", "spread", 10.0) for i in range(LARGE)))


def test_a_large_peer_delta_is_encoded_off_the_parents_loop():
    """A peer proxy's record of thousands of entities takes the parent a second or more to encode: meanwhile its
    loop keeps running (relaying the workers' own deltas); the frame arrives whole afterwards."""

    async def run():
        supervisor, relay, sent, wall = parent(**{"quota.cluster.id": "a"})
        ticks_when_sent = []
        ticks = 0

        def to_workers(frame: bytes) -> None:
            ticks_when_sent.append(ticks)
            sent.append(decode(frame[5:]))

        relay._send = to_workers
        assert relay.usage.take_record(b"b", encode(large_delta("b")), wall.now_ms())
        while not sent:
            ticks += 1
            await asyncio.sleep(0)
        assert sent == [large_delta("b")]
        assert ticks_when_sent[0] > 0, "the loop did nothing while the delta was encoded"
        await relay.stop()

    asyncio.run(run())


def test_a_worker_records_a_large_delta_a_step_at_a_time_serving_its_clients_in_between():
    async def run():
        app = FakeApp(
            ManualClock(1_000_000), {**raw(), "quotas": [{"entity": {"user": "<default>"}, "producer_byte_rate": RATE}]}
        )
        ours, theirs = socket.socketpair()
        link = WorkerLink(app, 0, ours, 10_000, lambda: None)
        await link.start()
        _, to_worker = await asyncio.open_unix_connection(sock=theirs)
        to_worker.write(pack(USAGE, encode(large_delta("b"))))
        produce = app.quotas.produce
        halfway = 0  # loop turns seen with the first entity recorded and the last not yet
        while produce.stats_for(f"user{LARGE - 1:05}", "spread") is None:
            if produce.stats_for("user00000", "spread") is not None:
                halfway += 1
            await asyncio.sleep(0)
        assert halfway > 0, "the whole delta was recorded in one turn of the loop"
        assert produce.stats_for(f"user{LARGE // 2:05}", "spread").rate > 0
        await link.close()
        to_worker.close()

    asyncio.run(run())
