"""The producer-id quota's hold (KIP-936, ``producer.id.quota.enforcement: hold``, the default) through the sidecar
proxy in front of Apache Kafka (``kafka1``): the twin of tests/integration/test_producer_id_hold.py (Tansu).

Between the proxy and Kafka's CLIENT listener a relay (the twin's ``BrokerSideRecorder``) records when Kafka first
sees each producer id in a Produce, and every InitProducerId. A Produce bringing a new producer id its user's bucket
has no token for is held in the proxy, before Kafka sees it, until the bucket lets it through; every record is then
acknowledged once. The twin could use neither client here: Tansu rejects aiokafka's InitProducerId (v0-2), and
the Java producer's idempotent Produce needs a broker that keeps its producer state as Kafka does.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.harness import producer_id_counts
from tests.integration.kafka.quotas_common import configs, end_offsets, java_producer, perf_summary, topics
from tests.relay import BrokerSideRecorder, most_in_a_window

pytestmark = pytest.mark.integration


class Recorded:
    """The sidecar in front of a recorder in front of Kafka's CLIENT listener."""

    def __init__(self, cluster, quotas: list, init_together: int = 0, **settings) -> None:
        (node,) = cluster.nodes
        self.recorder = BrokerSideRecorder(("127.0.0.1", node.client_port), init_together)
        (self.config,) = configs(cluster, quotas, **settings)
        self.cluster = cluster

    def __enter__(self):
        self.recorder.start()
        self.config["upstream"]["bootstrap_servers"] = [f"127.0.0.1:{self.recorder.port}"]
        self._sidecars = self.cluster.sidecars(configs=[self.config])
        try:
            (self.proxy,) = self._sidecars.__enter__()
        except BaseException:
            self.recorder.stop()
            raise
        return self

    def __exit__(self, *exc):
        try:
            self._sidecars.__exit__(*exc)
        finally:
            self.recorder.stop()

    def stats(self):
        return producer_id_counts(self.proxy)


def test_java_idempotent_producers_restarted_together_have_their_new_ids_held_and_lose_nothing(kafka1):
    """One new producer id per 2 s window, one window (a burst of 1, a token every 2 s). Three ProducerPerformance
    runs (the Java producer, ``enable.idempotence=true``: each JVM a new producer id) start together, as a loop that
    restarts its producers would: the first id passes on the burst, the second and third are held in the proxy until
    their tokens, about 2 s and 4 s after the first. Kafka sees the three ids at least about 2 s apart; every run
    ends with each of its records acknowledged, and the topic holds each record once.

    "Together" is made so on a loaded machine, where three JVMs start seconds apart: the recorder passes the runs'
    InitProducerId requests on once all three came, so their first Produce requests reach the proxy within moments
    (CI once saw only one held). The user's counters are read after the runs end, when its bucket may be full
    again and its filter expired: the cache's cleanup would then drop the user with its counters, as it should
    (tests/quota/managers/test_producer_ids.py), so it runs only every 10 minutes here."""
    cluster = kafka1
    quotas = [{"entity": {"user": "<default>"}, "producer_ids_rate": 1}]
    runs, records = 3, 200
    with (
        Recorded(
            cluster,
            quotas,
            init_together=runs,
            **{
                "producer.id.quota.window.num": 1,
                "producer.id.quota.window.size.seconds": 2,
                "producer.id.quota.cache.cleanup.scheduler.interval.ms": 600_000,
            },
        ) as side,
        topics(cluster, "pid-java") as (topic,),
    ):
        procs = [
            java_producer(
                cluster,
                side.proxy.bootstrap,
                topic,
                records,
                f"java-restart-{i}",
                "enable.idempotence=true",
                "acks=all",
                record_size=100,
            )
            for i in range(runs)
        ]
        try:
            for proc in procs:
                sent, output = perf_summary(proc, 60)
                assert sent == records, output[-2000:]
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.communicate(10)
        first_seen = side.recorder.first_seen()
        assert len(first_seen) == runs, first_seen  # every run's id reached Kafka, once held long enough
        times = sorted(first_seen.values())
        gaps = [round(b - a, 2) for a, b in zip(times, times[1:])]
        assert all(gap >= 1.8 for gap in gaps), gaps  # one token every 2 s
        assert side.recorder.init_producer_ids >= runs  # InitProducerId is never held
        (stats,) = side.stats()
        # held: the runs' first Produce requests come together (their InitProducerId answered at once)
        assert stats.new_pids_total == runs and stats.held_count >= runs - 1 and stats.refused_count == 0, stats
        assert end_offsets(cluster, topic) == runs * records  # every record once


def test_an_aiokafka_idempotent_restart_loop_reaches_kafka_at_the_rate_and_every_message_is_acknowledged_once(kafka1):
    """Two new producer ids per 2 s window, one window (a burst of 2, then a token every second). Six aiokafka
    idempotent producers, one after another, each a new producer id (and connection) sending one message: the first
    two pass at once, the next four are each held about 1 s. No more than the rate plus the burst reach Kafka in any
    window; every message is acknowledged and read back exactly once. The cache's cleanup runs every 10 minutes here:
    on a loaded machine the loop once took over a window between two producers, the user's bucket was full again and
    its filter expired, and the cleanup (every second by default) dropped the user with its counters (read after the
    loop: ``new_pids_total`` 1 of 6), as it should."""
    from aiokafka import AIOKafkaProducer

    from tests.integration.clients import aio_consume

    cluster = kafka1
    rate, window_s, n = 2, 2, 6
    quotas = [{"entity": {"user": "<default>"}, "producer_ids_rate": rate}]
    with (
        Recorded(
            cluster,
            quotas,
            **{
                "producer.id.quota.window.num": 1,
                "producer.id.quota.window.size.seconds": window_s,
                "producer.id.quota.cache.cleanup.scheduler.interval.ms": 600_000,
            },
        ) as side,
        topics(cluster, "pid-aio") as (topic,),
    ):

        async def loop():
            took = []
            for i in range(n):
                producer = AIOKafkaProducer(
                    bootstrap_servers=side.proxy.bootstrap,
                    client_id=f"aio-restart-{i}",
                    enable_idempotence=True,
                    request_timeout_ms=30000,
                )
                await producer.start()
                try:
                    began = time.monotonic()
                    await producer.send_and_wait(topic, f"r{i}".encode())
                    took.append(time.monotonic() - began)
                finally:
                    await producer.stop()
            return took

        took = asyncio.run(loop())
        first_seen = side.recorder.first_seen()
        assert len(first_seen) == n, first_seen
        assert most_in_a_window(list(first_seen.values()), window_s) <= rate * 1.1 + rate, sorted(first_seen.values())
        assert max(took) >= 0.5, took  # some were held waiting for a token
        assert side.recorder.init_producer_ids == n
        (stats,) = side.stats()
        assert stats.new_pids_total == n and stats.held_count >= n - 3 and stats.refused_count == 0, stats
        got = asyncio.run(aio_consume(cluster.direct_bootstrap, topic, n, timeout=30))
        values = sorted(v for vs in got.values() for v in vs)
        assert values == sorted(f"r{i}".encode() for i in range(n))
        assert end_offsets(cluster, topic) == n  # once each
