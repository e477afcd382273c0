"""``workers: N`` with ``quota.cluster.topic`` (issue 26), without a broker or processes: the parent
(proxy.workers.cluster_relay) publishes the sum of its workers' usage as the proxy's one record, passes peers' usage
and, in fallback, the silent peers' share to every worker as USAGE frames, and keeps the cluster_usage_* metrics and
the /readyz note itself; a worker's link tells the parent when it synced early. Wall time is a fake clock; the
Kafka side is tests/integration/test_cluster_workers.py."""

from __future__ import annotations

import asyncio
import logging
import socket

from config.loader import parse_config
from proxy.workers.cluster_relay import WorkersClusterUsage
from proxy.workers.frames import EAGER, USAGE, read_frame
from proxy.workers.link import WorkerLink
from proxy.workers.supervisor import Supervisor
from quota.clock import ManualClock
from quota.usage_delta import UsageDelta, decode, encode
from tests.proxy.test_worker_link import FakeApp

RATE = 1000


def raw(**settings):
    return {"upstream": {"bootstrap_servers": ["127.0.0.1:9092"]},
            "listeners": [{"name": "PLAINTEXT", "bind": "127.0.0.1:0"}], "metrics": {"bind": "127.0.0.1:0"},
            "quotas": [{"entity": {"client-id": "spread"}, "producer_byte_rate": RATE}],
            "settings": {"workers": 2, "quota.scope": "cluster", "quota.cluster.topic": "__usage", **settings}}


def parent(**settings):
    """A supervisor (not started) with the relay start() would make, its frames to the workers collected."""
    supervisor = Supervisor(parse_config(raw(**settings)), "proxy.yaml", "info")
    sent: list[UsageDelta] = []

    def to_workers(frame: bytes) -> None:
        assert frame[4:5] == USAGE
        sent.append(decode(frame[5:]))

    wall = ManualClock(1_000_000)
    supervisor.cluster = WorkersClusterUsage(supervisor.config, supervisor.registry, {"PLAINTEXT": 9000}, to_workers,
                                             wall)
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
        kinds = [(await asyncio.wait_for(read_frame(reader), 10))[0] for _ in range(2)]  # its hello, its first sync
        app.quotas.produce.record_and_get_throttle_time_ms("", "spread", RATE)  # all of a second's quota at once
        kinds = [(await asyncio.wait_for(read_frame(reader), 10))[0]]  # the early sync's delta
        app.quotas.produce.record_no_throttle("", "spread", 1)
        await link.close()  # an ordinary last sync: never followed by EAGER
        while (frame := await asyncio.wait_for(read_frame(reader), 10)) is not None:
            kinds.append(frame[0])
        theirs.close()
        return kinds

    return asyncio.run(run())


def test_a_worker_that_syncs_early_tells_the_parent_only_with_a_usage_topic():
    assert link_frames(raw()) == [USAGE, EAGER, USAGE]
    assert link_frames({**raw(), "settings": {"workers": 2}}) == [USAGE, USAGE]
