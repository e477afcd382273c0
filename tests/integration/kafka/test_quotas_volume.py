"""Volume usage from DescribeLogDirs (``volume_usage.source: describe_log_dirs``) with the real brokers' log dirs:
three sidecars in front of ``kafka3``, each polling every broker (through the brokers' advertised addresses, the
sidecars) once a second. The twin of tests/integration/test_volume_log_dirs.py, which needs a scripted broker
(Tansu has no DescribeLogDirs), and of test_volume_usage.py's producer moving through the states.

Kafka's DescribeLogDirs v4 reports each log dir's ``TotalBytes`` and ``UsableBytes`` (Java's FileStore total and
usable space: the filesystem's blocks and the blocks available to it, as ``os.statvfs`` reads them). The test reads
the same numbers for the brokers' data folders and sets the limits around them (``MinFreeBytes``, d = 5 % of the
disk, at most a quarter of what is free), so each state engages whatever the machine's disk: soft at free + d and
hard at free - d put the volume halfway between (factor 0.5, THROTTLE); hard at free + d is past it (PAUSE); soft at
free - d is below both (OPEN). Volume limits are not dynamic settings, so each change is a new set of sidecars on
the same ports, as an operator's restart with a new YAML would be. One confluent-kafka producer (offering 4 MiB/s of
1 KiB messages, acks=all) runs through every change: throttled to about half the 1 MiB/s ``produce_base_rate``,
then nothing acknowledged while paused, with no error (NOT_ENOUGH_REPLICAS is retried), then at full speed, and
every message acknowledged is in the topic. Kafka's Java producer (ProducerPerformance, idempotent, the newest
Produce version, whose answers name topics by id) starts while produce is paused: the proxy's own answers to it
are retried until the pause is lifted, and then every record is written once.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from contextlib import contextmanager

import pytest

from tests.harness import wait_until
from tests.integration.kafka.quotas_common import configs, end_offsets, java_producer, perf_summary, topics
from tests.kafka_cluster import unique_topic

pytestmark = pytest.mark.integration

MiB = 1024 * 1024
BASE_RATE = MiB
OFFERED = 4 * MiB
JAVA_RECORDS = 2000


class PacedProducer(threading.Thread):
    """confluent-kafka at about OFFERED bytes/s of 1 KiB messages, each numbered; acknowledgements timed. The
    client lives only while the thread runs: a failed test's report keeps this object, and a client kept with it
    would go on dialling the stopped sidecars (and logging each refusal) for the rest of the run."""

    def __init__(self, bootstrap: str, topic: str, timeline: Timeline) -> None:
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.topic = topic
        self.timeline = timeline
        self.acked: list[tuple[float, int]] = []
        self.errors: list[str] = []
        self.halt = threading.Event()

    def _delivered(self, err, msg) -> None:
        if err is None:
            self.acked.append((time.monotonic(), int(msg.key())))
        else:
            self.errors.append(str(err))

    def _statistics(self, text: str) -> None:
        """librdkafka's statistics (every second): each connected broker's requests awaiting an answer and round
        trip, for the timeline."""
        brokers = [b for b in json.loads(text).get("brokers", {}).values() if b.get("nodeid", -1) >= 0]
        seen = [
            f"broker {b['nodeid']} {b['state']} awaiting {b['waitresp_cnt']} rtt {b['rtt']['avg'] / 1e6:.1f} s"
            for b in sorted(brokers, key=lambda b: b["nodeid"])
            if b["state"] != "INIT"  # never connected
        ]
        self.timeline.note("client: " + (", ".join(seen) or "no broker connection"))

    def run(self) -> None:
        from confluent_kafka import Producer

        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "linger.ms": 5,
                "message.timeout.ms": 120000,
                "client.id": "volume-producer",
                "statistics.interval.ms": 1000,
                "stats_cb": self._statistics,
                "logger": self.timeline.client_log,  # its disconnections and failed connects, timed
            }
        )
        n, start = 0, time.monotonic()
        while not self.halt.is_set():
            if n * 1024 > (time.monotonic() - start) * OFFERED:
                producer.poll(0.005)
                continue
            try:
                producer.produce(self.topic, b"v" * 1024, key=str(n).encode(), on_delivery=self._delivered)
                n += 1
            except BufferError:
                producer.poll(0.01)
            producer.poll(0)
        producer.flush(60)

    def rate(self, seconds: float) -> float:
        """Bytes/s acknowledged over the last ``seconds``."""
        since = time.monotonic() - seconds
        return sum(1 for t, _ in self.acked if t >= since) * 1024 / seconds


class Timeline(logging.Handler):
    """What a failed rate says beside its number: the acknowledgements per second, the phases, what the client
    logged and its brokers' round trips, and what each sidecar logged (volume state changes, failed dials, brokers
    that did not answer DescribeLogDirs), by sidecar, all on one clock. Whether the client stalled (no answers),
    was slow (answers, few bytes) or was refused, and by which sidecar."""

    def __init__(self) -> None:
        super().__init__()
        self.start = time.monotonic()
        self.events: list[tuple[float, str]] = []
        self.sidecars_named: dict[int, str] = {}  # a proxy's loop thread -> its name in the timeline
        self.client_log = logging.getLogger(f"{__name__}.client")
        self.client_log.propagate = False
        self.client_log.setLevel(logging.INFO)  # librdkafka says "Disconnected" at INFO
        self.client_log.addHandler(self)

    def note(self, what: str) -> None:
        self.events.append((time.monotonic(), what))

    @contextmanager
    def sidecars(self, cluster, name: str, configs: list[dict]):
        """``cluster.sidecars(configs=configs)``, a phase of the test: what its proxies log is named by phase and
        sidecar until they have stopped (a thread's id may be reused by the next phase's)."""
        with cluster.sidecars(configs=configs) as proxies:
            self.sidecars_named = {proxy.thread.ident: f"{name} sidecar {i}" for i, proxy in enumerate(proxies, 1)}
            self.note(f"-- {name}")
            try:
                yield proxies
            finally:
                self.note(f"-- {name}: stopping its sidecars")
        self.sidecars_named = {}

    def emit(self, record: logging.LogRecord) -> None:
        source = "client" if record.name == self.client_log.name else self.sidecars_named.get(record.thread)
        if source is not None:  # the test's own clients and the sidecars' start (main thread) left out
            self.events.append((time.monotonic(), f"{source}: {record.getMessage()[:200]}"))

    def story(self, acked: list[tuple[float, int]]) -> str:
        per_second: dict[int, int] = {}
        for t, _ in acked:
            per_second[int(t - self.start)] = per_second.get(int(t - self.start), 0) + 1
        end = int(time.monotonic() - self.start)
        lines = [(float(s) + 0.999, f"acknowledged {per_second.get(s, 0)}") for s in range(end + 1)]
        lines += [(t - self.start, what) for t, what in self.events]
        return "\n".join(f"{t:7.2f} {what}" for t, what in sorted(lines, key=lambda line: line[0]))


FACTOR = "kafka_quota_proxy_volume_factor"
COUNTED = "kafka_quota_proxy_quota_bytes_total"
THROTTLED = "kafka_quota_proxy_quota_throttle_time_seconds_total"


class FactorWatch(threading.Thread):
    """Each sidecar's volume factor, and the produce bytes and throttle time its quotas counted, once a second
    (one scrape of its /metrics each) while a phase runs: the factor follows the disk's free space, which every other
    writer on the machine moves too (a parallel `make test` writes brokers' logs, wheels and Spark's files to the
    same filesystem), so the rate a THROTTLE phase should give is the factor the sidecars applied, as measured, times
    the base rate. Into the timeline: the factors when they change, the counts every second."""

    def __init__(self, proxies, timeline: Timeline) -> None:
        super().__init__(daemon=True)
        self.proxies, self.timeline = proxies, timeline
        self.samples: list[tuple[float, float]] = []  # (when, the smallest factor of the sidecars)
        self.halt = threading.Event()

    def run(self) -> None:
        said = None
        while not self.halt.wait(1.0):
            try:
                scrapes = [p.scraped_together(FACTOR, COUNTED, THROTTLED) for p in self.proxies]
            except Exception as failed:  # a sidecar stopping: the phase is over
                self.timeline.note(f"factor watch: {failed!r}")
                return
            factors = [sum(scrape[FACTOR].values()) for scrape in scrapes]  # one sample, unlabelled
            counted = sum(sum(scrape[COUNTED].values()) for scrape in scrapes)
            throttled = sum(sum(scrape[THROTTLED].values()) for scrape in scrapes)
            self.samples.append((time.monotonic(), min(factors)))
            line = " ".join(f"{f:.2f}" for f in factors)
            if line != said:
                self.timeline.note(f"volume factor by sidecar {line}")
                said = line
            self.timeline.note(f"sidecars counted {counted / 1024:.0f} KiB, throttled {throttled:.1f} s")

    def mean_since(self, since: float) -> float:
        """The mean of the smallest factor over the samples after ``since``."""
        seen = [f for t, f in self.samples if t >= since]
        assert seen, "no factor sampled in the window"
        return sum(seen) / len(seen)


def disk(cluster) -> tuple[int, int]:
    """(total bytes, usable bytes) of the filesystem of the brokers' log dirs (one for all three here)."""
    found = set()
    for node in cluster.nodes:
        st = os.statvfs(node.data_dir)
        found.add(st.f_fsid)
        total, usable = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
    assert len(found) == 1, "the brokers' log dirs are on several filesystems"
    return total, usable


def volume_configs(cluster, soft_free: float, hard_free: float) -> list[dict]:
    out = configs(cluster, **{"quota.window.num": 2, "upstream.connect.timeout.ms": 2000})
    for config in out:
        config["volume_usage"] = {
            "source": "describe_log_dirs",
            # a broker's data goes stale (and missing_data_action, PAUSE, applies) after a minute without an
            # answer: with 10 s (as first written) a loaded machine's polls (each bounded by 2 s here, through these
            # in-process sidecars) timed out for long enough, and a sidecar paused the producer for 4.4 s in the
            # middle of the OPEN phase
            "freshness_seconds": 60,
            "produce_base_rate": BASE_RATE,
            "pause_delay_ms": 500,
            "describe_log_dirs": {
                "interval_seconds": 1,
                "soft_limit": {"type": "MinFreeBytes", "level": int(soft_free)},
                "hard_limit": {"type": "MinFreeBytes", "level": int(hard_free)},
            },
        }
    return out


def states(proxies) -> list[str | None]:
    """Each proxy's volume state, as its /metrics shows it (``volume_state{state}`` 1)."""
    return [
        next(
            (s for s in ("OPEN", "THROTTLE", "PAUSE") if p.metric("kafka_quota_proxy_volume_state", state=s) == 1), None
        )
        for p in proxies
    ]


@pytest.fixture
def timeline():
    """A :class:`Timeline` hearing every thread's log records while the test runs."""
    line = Timeline()
    logging.getLogger().addHandler(line)
    yield line
    logging.getLogger().removeHandler(line)
    line.client_log.removeHandler(line)


# rates against real clocks: at the measurements' priority in make test (tests/conftest.py), its brokers, sidecars and
# clients with it; at normal priority beside the other measurements (nice -10) this test's process got no CPU for
# 4-5 s at a time (THROTTLE 0.13 x in a loop with one busy loop at nice -10)
@pytest.mark.measures_rate(group="kafka3")
def test_real_log_dirs_move_a_producer_through_throttle_and_pause_and_raised_limits_release_it(kafka3, timeline):
    cluster = kafka3
    total, usable = disk(cluster)
    d = min(0.05 * total, usable / 4)
    node_ids = {node.node_id for node in cluster.nodes}
    java_id = unique_topic("volume-java")
    java = None
    with topics(cluster, "volume", count=2) as (topic, java_topic):
        producer = PacedProducer(cluster.proxy_bootstrap, topic, timeline)
        try:
            # THROTTLE: free space halfway between the soft (free + d) and the hard (free - d) limits
            with timeline.sidecars(cluster, "THROTTLE", volume_configs(cluster, usable + d, usable - d)) as proxies:
                wait_until(lambda: states(proxies) == ["THROTTLE"] * 3, 15, "THROTTLE on every sidecar")
                for proxy in proxies:  # as /metrics shows each sidecar's view of the cluster
                    assert proxy.scraped("kafka_quota_proxy_volume_missing_data") == {}  # no live broker without data
                    ages = proxy.scraped("kafka_quota_proxy_volume_snapshot_age_seconds")
                    assert {int(dict(labels)["node_id"]) for labels in ages} == node_ids  # every one answered
                    assert proxy.metric("kafka_quota_proxy_volume_volumes") == len(node_ids)  # one log dir each
                    # one scrape: two may straddle a new snapshot (a CI-like run: the broker had written 16 KiB)
                    sizes = proxy.scraped_together(
                        "kafka_quota_proxy_volume_used_bytes", "kafka_quota_proxy_volume_free_bytes"
                    )
                    used = sizes["kafka_quota_proxy_volume_used_bytes"]
                    free = sizes["kafka_quota_proxy_volume_free_bytes"]
                    assert {(int(dict(labels)["node_id"]), dict(labels)["volume"]) for labels in free} == {
                        (node.node_id, str(node.data_dir)) for node in cluster.nodes
                    }
                    for labels, free_bytes in free.items():
                        assert used[labels] + free_bytes == total
                        assert abs(free_bytes - usable) < 0.01 * total
                    assert proxy.metric("kafka_quota_proxy_volume_factor") == pytest.approx(0.5, abs=0.1)
                watch = FactorWatch(proxies, timeline)
                watch.start()
                producer.start()
                wait_until(lambda: producer.acked, 30, lambda: f"the first acknowledgement\n{timeline.story([])}")
                timeline.note("first acknowledgement")
                # measured: the acknowledgements of the last 8 of these 9 s. One answer acknowledges a whole batch,
                # so a short window moves with where the throttled answers fall: 4 s read 0.0 once in a make test
                # at load 19 (0.36 run alone)
                time.sleep(9)
                throttled = producer.rate(8)
                factor = watch.mean_since(time.monotonic() - 8)  # about 0.5, unless others filled the disk meanwhile
                watch.halt.set()
                watch.join(10)
                timeline.note(
                    f"measured over the last 8 s: {throttled / BASE_RATE:.2f} x produce_base_rate, the factor {factor:.2f}"
                )
                print(f"throttled: {throttled / BASE_RATE:.2f} x produce_base_rate at factor {factor:.2f}")
                assert 0.4 * factor * BASE_RATE < throttled < 1.6 * factor * BASE_RATE, (  # factor x the base rate
                    f"{throttled / BASE_RATE:.2f} x produce_base_rate at factor {factor:.2f}\n"
                    f"{timeline.story(producer.acked)}"
                )

            # PAUSE: the hard limit (free + d) is passed
            with timeline.sidecars(cluster, "PAUSE", volume_configs(cluster, usable + 2 * d, usable + d)) as proxies:
                wait_until(lambda: states(proxies) == ["PAUSE"] * 3, 15, "PAUSE on every sidecar")
                java = java_producer(
                    cluster, cluster.proxy_bootstrap, java_topic, JAVA_RECORDS, java_id, "acks=all", record_size=100
                )
                tools_log = cluster.directory / "tools.log"
                # the Java producer's idempotent id is set (InitProducerId is never paused): its Produce follows
                wait_until(
                    lambda: (
                        tools_log.exists() and f"[Producer clientId={java_id}] ProducerId set" in tools_log.read_text()
                    ),
                    30,
                    "the Java producer's producer id",
                )
                time.sleep(1.5)  # answers already on their way may still be acknowledged
                paused_at = len(producer.acked)
                time.sleep(2.5)  # deliberate: time paused, in which nothing may be acknowledged
                assert len(producer.acked) == paused_at, (
                    f"acknowledgements while paused\n{timeline.story(producer.acked)}"
                )
                assert not producer.errors, producer.errors[:3]  # retriable: the client retries, reports nothing
                assert java.poll() is None and end_offsets(cluster, java_topic) == 0  # Java's retries wait too
                assert (
                    sum(
                        p.metric("kafka_quota_proxy_requests_total", api="Produce", listener="PLAINTEXT")
                        for p in proxies
                    )
                    > 0
                )  # the producer kept trying through the new sidecars

            # raised limits: OPEN, full speed
            with timeline.sidecars(cluster, "OPEN", volume_configs(cluster, usable - d, usable - 2 * d)) as proxies:
                wait_until(lambda: states(proxies) == ["OPEN"] * 3, 15, "OPEN on every sidecar")
                resumed = len(producer.acked)
                wait_until(
                    lambda: len(producer.acked) > resumed + 2 * OFFERED // 1024,
                    20,
                    lambda: f"two seconds' worth acknowledged after the PAUSE\n{timeline.story(producer.acked)}",
                )
                time.sleep(2.5)  # deliberate: the Java producer runs on open before its summary is read
                sent, output = perf_summary(java, 60)  # every record acknowledged once open
                assert sent == JAVA_RECORDS, output[-2000:]
                full = producer.rate(2)
                timeline.note(f"measured over the last 2 s: {full / BASE_RATE:.2f} x produce_base_rate")
                print(f"open again: {full / OFFERED:.2f} x offered")
                # not slowed by the volume quota: well above the THROTTLE phase's rate, measured the same way in
                # the same run (an absolute floor measured the machine: 1.5 x BASE_RATE failed at 1.04 x with both
                # cores kept busy; THROTTLE gives about 0.5 x)
                assert full > 1.5 * throttled, (
                    f"{full / BASE_RATE:.2f} x produce_base_rate open, {throttled / BASE_RATE:.2f} x throttled\n"
                    f"{timeline.story(producer.acked)}"
                )
                producer.halt.set()
                producer.join(60)
        finally:
            producer.halt.set()
            if producer.is_alive():
                producer.join(60)
            if java is not None and java.poll() is None:
                java.kill()
                java.communicate(10)
        assert not producer.errors, producer.errors[:3]
        assert end_offsets(cluster, java_topic) == JAVA_RECORDS  # idempotent: its retries wrote nothing twice
        acked = {key for _, key in producer.acked}

        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer(
            {"bootstrap.servers": cluster.direct_bootstrap, "group.id": "volume-check", "enable.auto.commit": False}
        )
        consumer.assign([TopicPartition(topic, 0, 0)])
        found: set[int] = set()
        deadline = time.monotonic() + 30
        while not acked <= found and time.monotonic() < deadline:
            for msg in consumer.consume(10000, 0.5):
                if not msg.error():
                    found.add(int(msg.key()))
        consumer.close()
        assert acked <= found, f"{len(acked - found)} acknowledged messages missing"
