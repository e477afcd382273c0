"""The usage topic's records in a sidecar (proxy.observers.cluster_usage, issue 26), without a broker: what a record
of the topic does to the sidecar's managers, and the fallback to the per-broker share with its metric, log line and
/readyz note.
The publisher's and follower's Kafka side is tests/integration/test_cluster_usage.py."""

from __future__ import annotations

import gc
import logging

from config.loader import parse_config
from proxy.app import ProxyApp
from proxy.observers import freezing
from proxy.observers.cluster_usage import ClusterUsage
from quota.primitives.clock import ManualClock
from quota.primitives.topic_quotas import topic_table
from quota.sharing.usage_delta import UsageDelta
from quota.sharing.usage_encoding import decode, encode

RATE = 1000


def sidecar(**settings):
    app = ProxyApp(
        parse_config(
            {
                "upstream": {"bootstrap_servers": ["127.0.0.1:1"]},
                "listeners": [{"name": "L", "bind": "127.0.0.1:0"}],
                "quotas": [{"entity": {"user": "<default>"}, "producer_byte_rate": RATE}],
                "settings": {
                    "quota.scope": "cluster",
                    "quota.cluster.topic": "__usage",
                    "quota.cluster.id": "a",
                    **settings,
                },
            }
        )
    )
    wall = ManualClock(1_000_000)
    app.cluster_usage = ClusterUsage.for_app(app, wall=wall)  # as app.start() makes it, without its Kafka clients
    return app, app.cluster_usage, wall


def produced(app, user="alice"):
    stats = app.quotas.produce.stats_for(user, "p")
    return 0.0 if stats is None else stats.rate


def test_a_peers_fresh_record_counts_and_its_own_stale_or_broken_ones_do_not():
    app, usage, wall = sidecar()
    now = wall.now_ms()
    record = encode(UsageDelta("b", produce=(("alice", "p", 50_000.0),)))
    assert not usage.take_record(b"a", encode(UsageDelta("a", produce=(("alice", "p", 50_000.0),))), now)  # own
    assert not usage.take_record(b"b", record, now - 10_001)  # older than quota.cluster.stale.ms
    assert not usage.take_record(b"b", b"{not json", now)
    assert produced(app) == 0
    assert usage.take_record(b"b", record, now)
    assert produced(app) > 0
    assert app.quotas.produce.stats_for("alice", "p").value_total == 0  # remote usage: not this sidecar's total
    # and its own clients are throttled by the total
    assert app.quotas.produce.record_and_get_throttle_time_ms("alice", "p", 10) > 0
    registry = app.metrics.registry
    assert [
        registry.get_sample_value("kafka_quota_proxy_cluster_usage_records_total", {"direction": d})
        for d in ("received", "skipped", "error")
    ] == [1, 2, 1]
    assert not usage.take_record(b"b", None, now)  # a tombstone: b left for good
    assert usage.peers.view(now).known == 0


def test_with_every_peer_stale_its_own_usage_counts_for_the_silent_peers_too(caplog):
    app, usage, wall = sidecar()
    usage.take_record(b"b", encode(UsageDelta("b")), wall.now_ms())
    app.quotas.produce.record_and_get_throttle_time_ms("alice", "p", 100)
    assert usage.take().delta.produce == (("alice", "", 100),)  # b fresh: published, nothing more
    before = produced(app)
    wall.advance(10_001)
    app.quotas.produce.record_and_get_throttle_time_ms("alice", "p", 100)
    with caplog.at_level(logging.WARNING, "kafka_quota_proxy.cluster_usage"):
        assert usage.take().delta.produce == (("alice", "", 100),)  # what is published stays its own usage
    assert usage.fallback
    assert app.metrics.registry.get_sample_value("kafka_quota_proxy_cluster_usage_fallback") == 1
    assert "keeping to this sidecar's share, quota / 2" in caplog.text and "(stale: b)" in caplog.text
    assert app.ready_note() == "quota.scope cluster: no peer sidecar fresh, keeping to quota / 2"
    assert app.quotas.produce.stats_for("alice", "p").value_total == 200
    assert produced(app) > before  # 100 more of its own, and 100 for b
    usage.take_record(b"b", encode(UsageDelta("b")), wall.now_ms())  # b is back
    usage.take()
    assert not usage.fallback
    assert app.ready_note() is None
    assert app.metrics.registry.get_sample_value("kafka_quota_proxy_cluster_usage_fallback") == 0


def test_readyz_stays_200_and_carries_the_note():
    import asyncio

    from prometheus_client import CollectorRegistry

    from proxy.ops.http import OpsServer

    notes = [None, "quota.scope cluster: no peer sidecar fresh, keeping to quota / 2"]
    server = OpsServer(CollectorRegistry(), lambda: None, ready_note=lambda: notes[0])

    async def readyz():
        return await server._route(b"GET", b"/readyz")

    assert asyncio.run(readyz()) == ("200 OK", "text/plain", b"ready\n")
    notes.pop(0)
    assert asyncio.run(readyz()) == ("200 OK", "text/plain", f"ready\n{notes[0]}\n".encode())
    server._scraper.shutdown(wait=False)


def test_usage_that_does_not_fit_in_one_record_waits_for_the_next_counted_and_logged(caplog):
    app, usage, wall = sidecar(**{"quota.cluster.record.max.bytes": 4096})
    for i in range(2000):
        app.quotas.produce.record_and_get_throttle_time_ms(f"tenant-{i:04d}", "p", 100 + i)
    with caplog.at_level(logging.WARNING, "kafka_quota_proxy.cluster_usage"):
        first = usage.take()
    assert len(first.data) <= 4096 and 0 < first.sent < 2000 and first.carried == 2000 - first.sent
    assert f"{first.carried} of 2000 entities do not fit in one usage record of at most 4096 bytes" in caplog.text
    registry = app.metrics.registry
    assert registry.get_sample_value("kafka_quota_proxy_cluster_usage_carried_entities_total") == first.carried
    assert registry.get_sample_value("kafka_quota_proxy_cluster_usage_record_bytes", {"what": "bytes"}) == len(
        first.data
    )
    sent = sum(value for _, _, value in first.delta.produce)
    for _ in range(10):  # what did not fit, then what rounding took off: every byte sent once
        delta = usage.take().delta
        if delta.empty:
            break
        sent += sum(value for _, _, value in delta.produce)
    assert sent == sum(100 + i for i in range(2000)) and not usage.carrying
    assert "every entity fits in one usage record again" in caplog.text


def test_a_peers_record_of_tenants_new_here_leaves_their_sensors_out_of_the_garbage_collectors_sight(monkeypatch):
    """A record of 3000 new tenants makes 3000 sensors, long-lived: they are frozen (gc.freeze) as they are made, a
    thousand at a time, so the full collections the recording sets off do not walk them; the same record again
    makes none, and freezes nothing (no freeze is made: the frozen count itself may fall meanwhile, as a frozen
    object that was only passing through, a piece of the first record's decoding, is freed)."""
    freezes = []
    freeze = freezing.freeze_long_lived
    monkeypatch.setattr(freezing, "freeze_long_lived", lambda: (freezes.append(1), freeze()))
    app, usage, wall = sidecar()
    rows = tuple((f"tenant-{i:05d}", "", 1000.0) for i in range(3000))
    record = encode(UsageDelta("b", produce=rows), compress=True)
    gc.collect()
    gc.unfreeze()
    try:
        assert usage.take_record(b"b", record, wall.now_ms())
        assert len(app.quotas.produce) == 3000
        frozen = gc.get_freeze_count()
        assert frozen > 0
        watched = {id(o) for o in gc.get_objects()}  # what the collector walks (the frozen not among them)
        assert not any(id(app.quotas.produce.keeper.by_tags[(f"tenant-{i:05d}", "")]) in watched for i in (0, 1500))
        assert len(freezes) == 3  # a thousand sensors each
        wall.advance(1000)
        assert usage.take_record(b"b", record, wall.now_ms())
        assert len(freezes) == 3
        assert gc.get_freeze_count() <= frozen  # and nothing else froze anything meanwhile
    finally:
        gc.unfreeze()


# -- issue 34: every sidecar's usage applied exactly once ------------------------------------------------------------


def pair_usage(name, recorded=None, wall=None):
    """A ClusterUsage alone (no app): its own usage in a tap, a peer's recorded into ``recorded`` (user -> bytes)."""
    from prometheus_client import CollectorRegistry

    from quota.sharing.usage_share import UsageTap

    config = parse_config(
        {
            "upstream": {"bootstrap_servers": ["127.0.0.1:1"]},
            "listeners": [{"name": "L", "bind": "127.0.0.1:0"}],
            "quotas": [{"entity": {"user": "<default>"}, "producer_byte_rate": RATE}],
            "settings": {"quota.scope": "cluster", "quota.cluster.topic": "__usage", "quota.cluster.id": name},
        }
    )

    def record(delta):
        for user, _, value in delta.produce:
            recorded[user] = recorded.get(user, 0) + value

    registry = CollectorRegistry()
    usage = ClusterUsage(config.settings, None, registry, name, UsageTap(), record, wall or ManualClock(1_000_000))
    return usage, registry


def test_failed_and_retried_publishes_and_replays_apply_each_sidecars_usage_exactly_once():
    """a publishes every sync; some sends fail before reaching the topic (broker down), one times out after the
    broker appended it (so the topic holds it twice); b follows as it goes, then reads the whole topic again (a
    reconnect): b sees a's usage exactly once. b restarted records a's usage from its start on."""
    import asyncio

    from quota.primitives.entity import PRODUCER_BYTE_RATE, QuotaTags

    wall = ManualClock(1_000_000)
    a, _ = pair_usage("a", wall=wall)
    seen: dict = {}
    b, registry = pair_usage("b", seen, wall)
    topic: list[tuple[bytes, bytes, int]] = []
    outcomes = {2: "down", 3: "appended, then timed out", 5: "down", 6: "down"}
    used = 0

    async def run():
        nonlocal used
        for sync in range(12):  # the last two with no usage: what rounding took off goes in them
            if sync < 10:
                a.own.add(PRODUCER_BYTE_RATE, QuotaTags("alice", ""), "alice", "p", 1000 + sync)
                used += 1000 + sync
            a.take()
            outcome = outcomes.get(sync)

            async def send(record):
                if outcome == "down":
                    raise ConnectionError("broker down")
                topic.append((b"a", record.data, record.stamp_ms))
                if outcome == "appended, then timed out":
                    raise TimeoutError()

            try:
                await a.send_due(send)
            except (ConnectionError, TimeoutError):
                pass
            for key, value, stamp in topic[follow.at :]:
                b.take_record(key, value, stamp)
            follow.at = len(topic)
            wall.advance(500)

    class follow:
        at = 0

    asyncio.run(run())
    assert len(a.outbox) == 0 and len(topic) == 13  # every record sent; the one that timed out twice
    assert seen == {"alice": used}
    for key, value, stamp in topic:  # b's follower reconnects and reads the topic from the beginning
        b.take_record(key, value, stamp)
    assert seen == {"alice": used}
    assert (
        registry.get_sample_value("kafka_quota_proxy_cluster_usage_records_total", {"direction": "duplicate"}) == 14
    )  # the retried one, then the whole topic again
    # b restarted: its follower reads the topic's history (still fresh) to learn its peers, but records none of it
    # (it starts with full buckets): only what a sends from b's start, less one sync interval, on
    wall.advance(2000)
    fresh: dict = {}
    restarted, _ = pair_usage("b", fresh, wall)
    for key, value, stamp in topic:
        assert not restarted.take_record(key, value, stamp)
    assert fresh == {} and restarted.peers.view(wall.now_ms()).fresh == 1
    a.own.add(PRODUCER_BYTE_RATE, QuotaTags("alice", ""), "alice", "p", 700)
    a.take()
    asyncio.run(a.send_due(lambda record: asyncio.sleep(0, topic.append((b"a", record.data, record.stamp_ms)))))
    assert restarted.take_record(*topic[-1]) and fresh == {"alice": 700}


def test_records_dated_more_than_30_s_ahead_are_counted_logged_and_not_taken(caplog):
    app, usage, wall = sidecar()
    now = wall.now_ms()
    record = encode(UsageDelta("b", produce=(("alice", "p", 50_000.0),), incarnation="x", seq=1))
    with caplog.at_level(logging.WARNING, "kafka_quota_proxy.cluster_usage"):
        assert not usage.take_record(b"b", record, now + 3_600_000)  # b's clock runs an hour fast
        assert not usage.take_record(b"b", record, now + 3_600_000)
    assert produced(app) == 0 and usage.peers.view(now).known == 0
    assert caplog.text.count("sidecar b dates its records 3600 s ahead") == 1
    registry = app.metrics.registry
    assert registry.get_sample_value("kafka_quota_proxy_cluster_usage_records_total", {"direction": "future"}) == 2
    with caplog.at_level(logging.WARNING, "kafka_quota_proxy.cluster_usage"):
        assert usage.take_record(b"b", record, now + 30_000)  # within 30 s: taken
    assert "sidecar b dates its records within 30 s of this host's clock again" in caplog.text
    assert produced(app) > 0


def test_a_peer_silent_while_the_topic_goes_on_is_forgotten_and_logged(caplog):
    app, usage, wall = sidecar(**{"quota.cluster.forget.ms": 30_000})
    usage.take_record(b"dead", encode(UsageDelta("dead")), wall.now_ms())
    usage.take()
    assert app.metrics.registry.get_sample_value("kafka_quota_proxy_cluster_usage_peers", {"state": "known"}) == 1
    for _ in range(31):  # this sidecar's own records go on appearing on the topic
        wall.advance(1000)
        usage.take_record(b"a", encode(UsageDelta("a")), wall.now_ms())
    with caplog.at_level(logging.WARNING, "kafka_quota_proxy.cluster_usage"):
        usage.take()
    assert "forgetting 1 sidecar(s) silent for 30000 ms while the topic went on" in caplog.text
    assert app.metrics.registry.get_sample_value("kafka_quota_proxy_cluster_usage_peers", {"state": "known"}) == 0
    assert not usage.fallback


def test_a_sidecar_that_stops_sends_what_is_waiting_and_its_last_usage_before_its_tombstone():
    import asyncio

    from quota.primitives.entity import PRODUCER_BYTE_RATE, QuotaTags

    class Producer:
        def __init__(self):
            self.sent = []

        async def send_and_wait(self, topic, value, key, timestamp_ms):
            self.sent.append((key, value))

        async def stop(self):
            pass

    usage, registry = pair_usage("a")
    usage.own.add(PRODUCER_BYTE_RATE, QuotaTags("alice", ""), "alice", "p", 100)
    usage.take()  # its send failed: waiting
    usage.own.add(PRODUCER_BYTE_RATE, QuotaTags("alice", ""), "alice", "p", 200)  # since the last sync
    usage._producer = producer = Producer()
    asyncio.run(usage.stop())
    values = [value for _, value in producer.sent]
    assert values[-1] is None and all(key == b"a" for key, _ in producer.sent)
    assert [(decode(v).seq, decode(v).produce) for v in values[:-1]] == [
        (1, (("alice", "", 100),)),
        (2, (("alice", "", 200),)),
    ]


def test_a_topics_usage_is_published_beside_the_clients_and_a_peers_counts_in_the_topic_quota():
    """Issue 47: the sidecar's topic quota managers tell its record what they count, and a peer's topic usage goes
    into them, so the topic's quota is one budget whichever sidecar its leaders are behind."""
    app, usage, wall = sidecar()
    usage.take_record(b"b", encode(UsageDelta("b")), wall.now_ms())  # b reads topic usage (version 3)
    topics = app.quotas.topics
    topics.update(topic_table({"orders": {"producer_byte_rate": RATE}}))
    topics.produce.record_topic("orders", 300)
    topics.produce.record_topic("free", 300)  # no quota covers it: nothing kept, nothing told
    app.quotas.produce.record_and_get_throttle_time_ms("alice", "p", 100)
    delta = usage.take().delta
    assert (delta.produce, delta.topic_produce) == ((("alice", "", 100),), (("", "orders", 300),))
    assert usage.take_record(b"b", encode(UsageDelta("b", topic_produce=(("", "orders", 50_000.0),))), wall.now_ms())
    assert topics.produce.stats_for_topic("orders").value_total == 300  # the peer's usage: not this sidecar's total
    assert topics.produce.record_topic("orders", 10).throttle_time_ms > 0  # but its writers are held by the whole
    assert app.quotas.produce.record_and_get_throttle_time_ms("alice", "p", 10) == 0  # its clients are not


def test_topic_usage_waits_until_every_live_sidecar_reads_it(caplog):
    """A peer of an earlier release refuses a version 3 record whole (its clients' usage included): while one is
    live, the topic usage is left out of the records (the topic quotas kept per sidecar), said once in the log and
    by ``cluster_usage_topic_quotas_shared``; once it is upgraded, the topics are shared again."""
    app, usage, wall = sidecar()
    topics = app.quotas.topics
    topics.update(topic_table({"orders": {"producer_byte_rate": RATE}}))
    shared = "kafka_quota_proxy_cluster_usage_topic_quotas_shared"
    topics.produce.record_topic("orders", 300)
    assert usage.take().delta.topic_produce == ()  # no peer known: nobody to tell
    earlier = b'{"v":2,"source":"b","scope":"","listeners":[],"ips":[],"open":[]}'  # says nothing of what it reads
    assert usage.take_record(b"b", earlier, wall.now_ms())
    topics.produce.record_topic("orders", 300)
    app.quotas.produce.record_and_get_throttle_time_ms("alice", "p", 100)
    with caplog.at_level(logging.WARNING, "kafka_quota_proxy.cluster_usage"):
        fitted = usage.take()
        usage.take()
    assert (fitted.delta.produce, fitted.delta.topic_produce) == ((("alice", "", 100),), ())
    assert decode(fitted.data).reads == 4 and fitted.data  # and its clients' usage readable by b (version 2)
    assert [r.getMessage() for r in caplog.records] == [
        "cluster usage: 1 sidecar(s) do not read topic usage (an earlier release: b): each sidecar keeps the topic "
        "quotas to itself until every live sidecar reads it"
    ]
    assert app.metrics.registry.get_sample_value(shared) == 0
    assert usage.take_record(b"b", encode(UsageDelta("b")), wall.now_ms())  # b upgraded
    topics.produce.record_topic("orders", 300)
    caplog.clear()
    with caplog.at_level(logging.WARNING, "kafka_quota_proxy.cluster_usage"):
        assert usage.take().delta.topic_produce == (("", "orders", 300),)
    assert "every live sidecar reads topic usage now" in caplog.text
    assert app.metrics.registry.get_sample_value(shared) == 1
