"""Partition quotas shared between processes (``workers: N``, proxies on one usage topic): a partition's usage travels
beside its topic's (version 4 of the encoding), so a partition written through two processes is held to its one
quota, not to one quota per process. Pure, on a fake clock: each process is its topic quota managers with their taps,
a sync is :func:`~quota.sharing.usage_record.fit` (compressed, rounded) then decoded and recorded by the other."""

from __future__ import annotations

import json
import zlib

import pytest

from quota.managers.topic_quota import TopicQuotas
from quota.primitives.clock import ManualClock
from quota.primitives.decision import Throttle
from quota.primitives.entity import DEFAULT, PRODUCER_BYTE_RATE, QuotaTags
from quota.primitives.overflow import OVERFLOW
from quota.primitives.rate import QuotaWindow
from quota.primitives.topic_quotas import topic_table
from quota.sharing.cluster_peers import ClusterPeers
from quota.sharing.remote_usage import record_remote
from quota.sharing.topic_share import TopicShare
from quota.sharing.usage_delta import UsageDelta
from quota.sharing.usage_encoding import decode, encode
from quota.sharing.usage_record import fit
from quota.sharing.usage_share import TopicTap, UsageTap, partition_tap

QUOTA = 10_000  # each partition's producer_byte_rate, bytes/s
SYNC_MS, STEP_MS, CHUNK, MAX_RECORD = 1000, 10, 100, 2**20
TABLE = {("orders", DEFAULT): {PRODUCER_BYTE_RATE: QUOTA}}


class Process:
    def __init__(self, name: str, clock: ManualClock, cap: int = 1000) -> None:
        self.name = name
        self.topics = TopicQuotas(topic_table(TABLE), clock, QuotaWindow(11, 1), 30_000, cap)
        self.topics.set_smoothing(True)
        self.tap = UsageTap(max_entities=cap)
        self.topics.partition_produce.tap = self.topics.partition_fetch.tap = partition_tap(self.tap)

    def record(self, delta: UsageDelta, now: int) -> None:
        record_remote(
            delta,
            now,
            produce=None,
            fetch=None,
            mutations=None,
            producer_ids=None,
            connections=None,
            topics=self.topics,
        )


def written(shared: bool, seconds: int = 30) -> float:
    """Two processes, each with a producer asking 1 x the quota of partition 0 of orders (2 x in all), from 10 s on:
    what the partition took over the rest, as a multiple of its quota."""
    clock = ManualClock(1_000_000)
    start = clock.now_ms()
    processes = [Process(name, clock) for name in ("0", "1")]
    ready = [0.0, 0.0]
    admitted = 0
    next_sync = start + SYNC_MS
    while clock.now_ms() < start + seconds * 1000:
        now = clock.now_ms()
        for i, process in enumerate(processes):
            while ready[i] <= now:
                decision = process.topics.partition_produce.record_topic(("orders", 0), CHUNK, now)
                admitted += CHUNK if now - start >= 10_000 else 0
                throttle = decision.throttle_time_ms if isinstance(decision, Throttle) else 0
                ready[i] = max(ready[i] + 1000 * CHUNK / QUOTA, now + throttle)
        if shared and now >= next_sync:
            next_sync += SYNC_MS
            deltas = [decode(fit(p.tap.gather(p.name), MAX_RECORD).data) for p in processes]
            processes[0].record(deltas[1], now)
            processes[1].record(deltas[0], now)
        clock.advance(STEP_MS)
    return admitted / (QUOTA * (seconds - 10))


def test_a_partition_written_through_two_processes_is_held_to_its_one_quota_when_shared():
    assert written(shared=True) == pytest.approx(1.0, abs=0.05)
    assert written(shared=False) == pytest.approx(2.0, abs=0.05)  # what one quota per process would let through


def test_partition_usage_travels_as_version_4_and_topic_usage_alone_stays_version_3():
    tap = UsageTap()
    TopicTap(tap).add(PRODUCER_BYTE_RATE, QuotaTags("", "orders"), "", "orders", 700.0, 1000)
    topic_only = fit(tap.gather("a"), MAX_RECORD).data
    assert json.loads(zlib.decompress(topic_only).split(b"\n")[0])["v"] == 3  # the release before reads it
    partition_tap(tap).add(PRODUCER_BYTE_RATE, QuotaTags("orders", "3"), "orders", "3", 300.0, 1000)
    data = fit(tap.gather("a"), MAX_RECORD).data
    assert json.loads(zlib.decompress(data).split(b"\n")[0])["v"] == 4
    assert tuple(decode(data).partition_produce) == (("orders", "3", 300.0),)
    delta = UsageDelta("a", partition_fetch=(("orders", "1", 5.0),))
    assert tuple(decode(encode(delta)).partition_fetch) == (("orders", "1", 5.0),)


def test_partition_usage_waits_until_every_live_peer_reads_version_4():
    """A peer of the release before (reading version 3) keeps getting the topic usage; the partition usage is left
    out (each sidecar keeps the partition quotas to itself meanwhile), said once; once it reads 4, it goes."""
    peers = ClusterPeers("a", 10_000, since_ms=0)
    share = TopicShare()
    tap = UsageTap()

    def settled(reads: int) -> tuple[UsageDelta, str | None]:
        assert peers.accept("b", 1000, 1000)
        peers.reads("b", reads)
        TopicTap(tap).add(PRODUCER_BYTE_RATE, QuotaTags("", "orders"), "", "orders", 700.0, 1000)
        partition_tap(tap).add(PRODUCER_BYTE_RATE, QuotaTags("orders", "3"), "orders", "3", 300.0, 1000)
        gathered = tap.gather("a")
        leftover, note = share.settle(gathered, fit(gathered, MAX_RECORD).leftover, peers, 1000)
        assert not len(leftover)
        return gathered.top(), note

    delta, note = settled(reads=3)
    assert (len(delta.topic_produce), len(delta.partition_produce)) == (1, 0)
    assert share.shared and not share.partitions_shared
    assert note is not None and "do not read partition usage" in note and "topic usage" not in note
    assert settled(reads=3)[1] is None  # said once
    delta, note = settled(reads=4)
    assert (len(delta.topic_produce), len(delta.partition_produce)) == (1, 1)
    assert note == "every live sidecar reads partition usage now: partition quotas are one budget across the sidecars"
    delta, note = settled(reads=2)  # a rollback to a release reading neither: one line, the topics'
    assert (len(delta.topic_produce), len(delta.partition_produce)) == (0, 0)
    assert note is not None and "do not read topic usage" in note and "partition" not in note


def test_a_peer_known_only_by_records_not_taken_holds_topic_usage_back_unlogged():
    """A peer heard of only through records too old to take (from before this sidecar followed the topic, as at
    every start beside running peers, or delayed past ``stale_ms``) has said nothing of what it reads: the topic
    usage waits for it, but no line calls it an earlier release (CI logged ``an earlier release: sidecar-2`` of a
    sidecar of the same release, and every start beside a running peer logged it of that peer)."""
    peers = ClusterPeers("a", 2_000, since_ms=0, forget_ms=60_000)
    share = TopicShare()
    tap = UsageTap()

    def settled(now_ms: int) -> tuple[UsageDelta, str | None]:
        TopicTap(tap).add(PRODUCER_BYTE_RATE, QuotaTags("", "orders"), "", "orders", 700.0, now_ms)
        gathered = tap.gather("a")
        leftover, note = share.settle(gathered, fit(gathered, MAX_RECORD).leftover, peers, now_ms)
        return gathered.top(), note

    assert peers.judge("b", 1_000, 5_000) == "stale"  # known, not taken
    delta, note = settled(5_000)
    assert (delta.topic_produce, note, share.shared) == ((), None, False)
    assert peers.accept("c", 5_000, 5_000)
    peers.reads("c", 2)  # c says it reads version 2 only: an earlier release
    assert settled(5_000)[1] == (
        "1 sidecar(s) do not read topic usage (an earlier release: c): each sidecar keeps the topic quotas to "
        "itself until every live sidecar reads it"
    )
    assert peers.accept("b", 5_000, 5_000)
    peers.reads("b", 4)
    peers.reads("c", 4)
    delta, note = settled(5_000)
    assert len(delta.topic_produce) == 1 and note is not None and "every live sidecar reads topic usage" in note


def test_a_partition_flood_grows_neither_the_record_nor_the_peers_tables():
    """Past ``max_entities`` partitions in one sync, the others are told as one ``<overflow>`` partition of the
    topic, which a peer counts under the topic's ``partition: <default>`` as one partition."""
    cap = 50
    clock = ManualClock(0)
    sender, receiver = Process("a", clock, cap), Process("b", clock, cap)
    for i in range(20 * cap):
        sender.topics.partition_produce.record_topic(("orders", i), 10, 0)
    delta = fit(sender.tap.gather("a"), MAX_RECORD).delta
    assert len(delta.partition_produce) == cap + 1
    assert ("orders", OVERFLOW) in {row[:2] for row in delta.partition_produce}
    assert sum(row[2] for row in delta.partition_produce) == pytest.approx(20 * cap * 10, rel=0.1)
    for k in range(5):
        receiver.record(
            UsageDelta("a", partition_produce=tuple(("orders", str(k * cap + i), 10.0) for i in range(cap))), 0
        )
    assert len(receiver.topics.partition_produce) <= cap
