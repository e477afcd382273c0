"""Cluster mode across a proxy restart, against Tansu (which advertises its own address: only the proxy's rewriting
keeps clients on the proxy), and the broker ports learnt from the cluster at start-up.

Before the broker discovery, the port of broker N stayed closed after a restart until some client sent Metadata
through the bootstrap port, and clients that only talk to the broker addresses they already know (kafka-python,
aiokafka) could not reconnect (kafka-python's producer ended in KafkaTimeoutError).
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter

import pytest
import yaml

from config.model import Address
from proxy.codec.apis import METADATA
from tests.harness import Tansu, cluster_ports, free_port, start_proxy, wait_for_port, wait_until
from tests.integration import raw
from tests.integration.clients import ck_create_topic

pytestmark = pytest.mark.integration

TANSU_NODE = 111
# kafka-python's reconnect backoff doubles from 50 ms per failed attempt up to 30 s (net/manager.py, jitter 0.8-1.2),
# so a client refused for the D seconds a new proxy process takes to start next tries up to about 1.2 D after it
# listens: the gap after the restart then measures the machine's process start, not the proxy (a CI run: down
# 5.1 s, kafka-python's producer 6.0 s and its group consumer 8.19 s without a record, aiokafka and librdkafka
# about 1 s). Java's client caps its backoff at 1 s (reconnect.backoff.max.ms); the kafka-python clients here do too.
KP_BACKOFF = {"reconnect_backoff_ms": 50, "reconnect_backoff_max_ms": 1000}
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def cluster_config(broker_port: int, bootstrap_port: int, base: int, metrics_port: int = 0) -> dict:
    return {
        "upstream": {"bootstrap_servers": [f"127.0.0.1:{broker_port}"]},
        "listeners": [
            {
                "name": "PLAINTEXT",
                "bind": f"127.0.0.1:{bootstrap_port}",
                "advertised_host": "127.0.0.1",
                "broker_port_base": base,
            }
        ],
        "metrics": {"bind": f"127.0.0.1:{metrics_port}"},
        "settings": {"shutdown.grace.period.ms": 2000},
    }


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_every_broker_port_is_open_from_start_up_and_ready_waits_for_it():
    broker_port = free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{broker_port}").start()
    bootstrap_port, base = cluster_ports()
    proxy = start_proxy(cluster_config(broker_port, bootstrap_port, base))
    try:
        # ready: the discovery's first round (one Metadata round trip) done, every broker port open, the config
        # topic read once (a few more)
        wait_until(lambda: proxy.metric("kafka_quota_proxy_ready") == 1, 15, "the proxy ready")
        assert port_open(base + TANSU_NODE)  # no client has sent Metadata: learnt by the discovery
        with urllib.request.urlopen(f"http://127.0.0.1:{proxy.metrics_port}/readyz", timeout=5) as r:
            assert r.status == 200
    finally:
        proxy.stop()
        broker.stop()


def test_not_ready_while_the_cluster_cannot_be_asked_for_its_brokers():
    bootstrap_port, base = cluster_ports()
    proxy = start_proxy(cluster_config(free_port(), bootstrap_port, base))  # nothing listens there
    try:
        time.sleep(0.5)  # deliberate: time for a discovery round, which cannot succeed
        assert proxy.metric("kafka_quota_proxy_ready") == 0
        assert not port_open(base + TANSU_NODE)  # no broker learnt, no broker port
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(f"http://127.0.0.1:{proxy.metrics_port}/readyz", timeout=5)
        assert info.value.code == 503
    finally:
        proxy.stop()


class ProxyProcess:
    def __init__(self, config: dict, path: str) -> None:
        with open(path, "w") as f:
            yaml.safe_dump(config, f)
        self.path = path
        self.proc: subprocess.Popen | None = None

    def start(self, port: int) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "proxy.cli", "run", "--config", self.path, "--log-level", "WARNING"], cwd=ROOT
        )
        wait_for_port(port, timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


class Producer(threading.Thread):
    """A producer of ``name-<i>`` values at about PACE a second until stopped; remembers what was acknowledged and
    when."""

    PACE = 200

    def __init__(self, name: str, bootstrap: str, topic: str) -> None:
        super().__init__(name=name, daemon=True)
        self.label, self.bootstrap, self.topic = name, bootstrap, topic
        self.stopping = threading.Event()
        self.acked: list[tuple[float, bytes]] = []
        self.error: BaseException | None = None

    def _ack(self, value: bytes) -> None:
        self.acked.append((time.monotonic(), value))

    def run(self) -> None:
        try:
            getattr(self, f"_run_{self.label.split('-')[0]}")()
        except BaseException as exc:  # reported by the test
            self.error = exc

    def _values(self):
        start, i = time.monotonic(), 0
        while not self.stopping.is_set():
            if i > (time.monotonic() - start) * self.PACE:
                time.sleep(0.002)  # deliberate: paced at PACE messages a second
                continue
            yield f"{self.label}-{i}".encode()
            i += 1

    def _run_kp(self) -> None:
        from kafka import KafkaProducer

        p = KafkaProducer(
            bootstrap_servers=self.bootstrap,
            client_id=self.label,
            enable_idempotence=True,
            acks="all",
            linger_ms=5,
            **KP_BACKOFF,
        )
        for value in self._values():
            p.send(self.topic, value).add_callback(lambda _md, v=value: self._ack(v))
        p.flush(30)
        p.close(10)

    def _run_ck(self) -> None:
        from confluent_kafka import Producer as CkProducer

        p = CkProducer(
            {"bootstrap.servers": self.bootstrap, "client.id": self.label, "enable.idempotence": True, "linger.ms": 5}
        )

        def delivered(err, msg) -> None:
            if err is None:
                self._ack(msg.value())

        for value in self._values():
            p.produce(self.topic, value, on_delivery=delivered)
            p.poll(0)
        assert p.flush(30) == 0

    def _run_aio(self) -> None:
        from aiokafka import AIOKafkaProducer

        async def main() -> None:
            # not idempotent: Tansu answers aiokafka's InitProducerId v0-v2 wrongly
            p = AIOKafkaProducer(bootstrap_servers=self.bootstrap, client_id=self.label, acks="all", linger_ms=5)
            await p.start()
            try:
                for value in self._values():
                    future = await p.send(self.topic, value)
                    future.add_done_callback(lambda f, v=value: f.exception() is None and self._ack(v))
                    await asyncio.sleep(0)
                await p.flush()
            finally:
                await p.stop()

        asyncio.run(main())


class GroupConsumer(threading.Thread):
    """A kafka-python consumer group member (session.timeout.ms 6000, as Tansu's group joins need) recording when
    each record arrived.

    It polls on after a retriable error that ``poll`` raises, as an application must with kafka-python 3.0.12: when
    the coordinator's connection drops, ``ensure_coordinator_ready_async`` (kafka/coordinator/base.py) takes the
    ``InvalidMetadataError`` branch for the ``KafkaConnectionError`` and awaits a metadata refresh, and the refresh's
    own ``KafkaConnectionError`` (ECONNREFUSED while nothing listens) is not caught there: ``poll`` raises it. Seen in
    a full suite (and in 2 of about 20 runs at load 20-30): the consumer thread ended on ``KafkaConnectionError('111
    ECONNREFUSED')`` while the proxy was down, and never came back. Java's consumer and librdkafka retry it inside
    poll. Anything else raised still ends the thread and fails the test."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(name="group-consumer", daemon=True)
        self.bootstrap, self.topic = bootstrap, topic
        self.stopping = threading.Event()
        self.received: list[tuple[float, bytes]] = []
        self.offsets: list[tuple[int, int]] = []  # (partition, offset) of each record received, for a failure's story
        self.assignments: list[int] = []  # of each record received: how many assignments the consumer had had by then
        self.assigned = 0
        self.error: BaseException | None = None
        self.retried: list[str] = []  # retriable errors poll raised (see above), for a failure's story

    def run(self) -> None:
        from kafka import KafkaConsumer
        from kafka.errors import RetriableError

        try:
            from kafka import ConsumerRebalanceListener

            consumer = self

            class Counting(ConsumerRebalanceListener):
                def on_partitions_revoked(self, revoked) -> None:
                    pass

                def on_partitions_assigned(self, assigned) -> None:
                    consumer.assigned += 1

            c = KafkaConsumer(
                bootstrap_servers=self.bootstrap,
                group_id="restart-group",
                client_id="restart-consumer",
                auto_offset_reset="earliest",
                session_timeout_ms=6000,
                heartbeat_interval_ms=1000,
                **KP_BACKOFF,
            )
            c.subscribe([self.topic], listener=Counting())
            try:
                while not self.stopping.is_set():
                    try:
                        polled = c.poll(timeout_ms=200)
                    except RetriableError as exc:  # kafka-python's own retriable error, surfaced (above)
                        self.retried.append(repr(exc))
                        continue
                    for records in polled.values():
                        now = time.monotonic()
                        self.received.extend((now, r.value) for r in records)
                        self.offsets.extend((r.partition, r.offset) for r in records)
                        self.assignments.extend(self.assigned for _ in records)
            finally:
                c.close()
        except BaseException as exc:
            self.error = exc


def longest_gap_around(times: list[float], at: float, span: float = 20.0) -> float:
    """The longest time without an event in [at, at + span] (``at``: the restarted proxy listens)."""
    inside = sorted(t for t in times if at <= t <= at + span)
    if not inside:
        return span
    points = [at] + inside
    return max(b - a for a, b in zip(points, points[1:]))


def read_everything(broker: str, topic: str, where: dict | None = None) -> Counter:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": broker, "group.id": "restart-check", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(3)])
    seen: Counter = Counter()
    idle_since = time.monotonic()
    try:
        while time.monotonic() - idle_since < 3:
            batch = [m for m in c.consume(10000, 0.5) if m.error() is None]
            if batch:
                idle_since = time.monotonic()
            seen.update(m.value() for m in batch)
            if where is not None:
                where.update((m.value(), (m.partition(), m.offset())) for m in batch)
    finally:
        c.close()
    return seen


@pytest.mark.timeout(150)
@pytest.mark.parametrize(
    "names",
    [("kp-producer", "ck-producer", "aio-producer"), ("kp-producer", "aio-producer")],
    ids=["all-three", "known-addresses-only"],
)
def test_a_restart_under_traffic_is_invisible_to_the_clients(tmp_path, names):
    """SIGTERM the cluster-mode proxy and start it again on the same ports while kafka-python, confluent-kafka and
    aiokafka producers and a kafka-python consumer group run through it: each resumes within a few seconds of the
    new proxy listening (how long the process took to start is the machine's, printed), and every acknowledged
    message is in the topic exactly once. ``known-addresses-only`` leaves out
    confluent-kafka, whose Metadata through the bootstrap port after a reconnect would open the broker port for
    everyone even without the proxy's own discovery."""
    broker_port = free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{broker_port}").start()
    bootstrap_port, base = cluster_ports()
    proxy = ProxyProcess(cluster_config(broker_port, bootstrap_port, base, free_port()), str(tmp_path / "proxy.yaml"))
    bootstrap = f"127.0.0.1:{bootstrap_port}"
    threads: list = []
    try:
        ck_create_topic(f"127.0.0.1:{broker_port}", "restart", 3)
        proxy.start(bootstrap_port)
        producers = [Producer(name, bootstrap, "restart") for name in names]
        consumer = GroupConsumer(bootstrap, "restart")
        threads = [*producers, consumer]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        wait_until(lambda: all(p.acked for p in producers) and consumer.received, 30, "traffic started")
        time.sleep(3)  # deliberate: 3 s of traffic before the restart
        proxy.stop()  # SIGTERM: in-flight requests finish, then the process exits
        stopped = time.monotonic()
        proxy.start(bootstrap_port)
        # From here the proxy listens again: what the clients do next is the proxy's doing; how long a new Python
        # process took to start is the machine's (a CI run on two saturated cores took 5 to 9 s, and a client's
        # reconnect backoff grows meanwhile). The gaps are measured from here.
        restarted = time.monotonic()
        print(f"restart: the proxy was down {restarted - stopped:.1f} s")
        # The clients reconnect and run on after the restart: until every one of them has gone on past the 8 s the
        # assertions below look at (was a fixed 12 s; a client that never comes back still fails them, after 60 s)
        try:
            wait_until(
                lambda: (
                    all(p.acked and p.acked[-1][0] > restarted + 8 for p in producers)
                    and consumer.received
                    and consumer.received[-1][0] > restarted + 8
                ),
                60,
                "every client running on 8 s after the restart",
            )
        except AssertionError as exc:  # which client, when it was last served, and what it raised
            last = {p.label: (round(p.acked[-1][0] - restarted, 1) if p.acked else None, p.error) for p in producers}
            served = round(consumer.received[-1][0] - restarted, 1) if consumer.received else None
            raise AssertionError(f"{exc}: {last}, consumer {served} {consumer.error!r} {consumer.retried[:3]}") from exc
        if consumer.retried:
            print(f"the consumer polled on after {len(consumer.retried)} retriable error(s): {consumer.retried[:3]}")
        for p in producers:
            p.stopping.set()
        for p in producers:
            p.join(60)
        # The consumer catches up: every acknowledged message, or 30 s (was a fixed 2 s, short under a loaded suite;
        # a message it never gets still fails the assertion below).
        acked_values = {v for p in producers for _, v in p.acked}
        catch_up = time.monotonic() + 30
        while time.monotonic() < catch_up and not acked_values <= {v for _, v in list(consumer.received)}:
            time.sleep(0.2)  # a bounded condition wait; the assertion below says which messages are missing
        consumer.stopping.set()
        consumer.join(30)
        for t in threads:
            assert t.error is None, f"{t.name}: {t.error!r}"
        gaps = {p.label: round(longest_gap_around([t for t, _ in p.acked], restarted), 2) for p in producers}
        gaps["group-consumer"] = round(longest_gap_around([t for t, _ in consumer.received], restarted), 2)
        print(f"longest gap in the 20 s after the restart: {gaps}")
        assert all(gap < 8 for gap in gaps.values()), gaps
        assert all(any(t > restarted + 8 for t, _ in p.acked) for p in producers), (
            "a producer stopped after the restart"
        )
        where: dict = {}
        seen = read_everything(f"127.0.0.1:{broker_port}", "restart", where)
        for p in producers:
            acked = [v for _, v in p.acked]
            missing = [v for v in acked if seen[v] == 0]
            twice = [v for v in acked if seen[v] > 1]
            assert not missing and not twice, (p.label, len(acked), missing[:5], twice[:5])
        received = Counter(v for _, v in consumer.received)
        missed = sorted(where.get(v, (-1, -1)) for p in producers for _, v in p.acked if v not in received)
        # A gap the broker served is not the restart's doing. Seen in full runs: the consumer got offsets 822, 823 and
        # 826 of a partition in one poll, 2 s before the restart, and 824-825 were in the topic when read afterwards;
        # in CI it got 2980-2981 and then 2983-2984 in the next poll, 8 s after the restart, with 2982 in the topic
        # (Tansu's in-memory log seems to serve a later batch before an earlier one is visible under concurrent
        # producers; the proxy passes Fetch answers on unchanged here, and a changed batch would fail its CRC). Between
        # two records of a partition received under the same assignment, the consumer's next fetch asked for the
        # offset after the first, so whatever lies between them the broker did not return. Across an assignment the
        # position comes from the committed offset, where a restart could make a gap: those misses fail.
        received_under: dict[int, list[tuple[int, int]]] = {}
        for (part, offset), assignment in zip(consumer.offsets, consumer.assignments):
            received_under.setdefault(part, []).append((offset, assignment))
        broker_served = {
            pos
            for pos in missed
            if any(
                a[0] < pos[1] < b[0] and a[1] == b[1]
                for a, b in zip(received_under.get(pos[0], []), received_under.get(pos[0], [])[1:])
            )
        }
        if broker_served:
            print(f"broker-served gaps (not failed): {sorted(broker_served)[:10]}")
        missed = [pos for pos in missed if pos not in broker_served]
        assert not missed, (
            "the group consumer missed messages (partition, offset)",
            len(missed),
            missed[:10],
            {
                part: (
                    min(o for q, o in consumer.offsets if q == part),
                    max(o for q, o in consumer.offsets if q == part),
                )
                for part in {q for q, _ in consumer.offsets}
            },
            f"restart at +{restarted - t0:.1f} s",
            [
                (round(t - t0, 1), pos)
                for (t, _), pos in zip(consumer.received, consumer.offsets)
                if missed and pos[0] == missed[0][0] and abs(pos[1] - missed[0][1]) < 3
            ],
        )
    finally:
        for t in threads:
            t.stopping.set()
        proxy.stop()
        broker.stop()


def test_a_broker_absent_past_the_removal_time_loses_its_port_and_gets_it_back_on_return():
    """The cluster's answers are driven directly here (Tansu is a one-broker cluster that cannot lose a broker): a
    broker missing from an answer keeps its port until ``cluster.broker.removal.ms`` has passed; then its port and
    its connections close (reason ``broker_removed``); when it is named again it gets the same port."""
    broker_port = free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{broker_port}").start()
    bootstrap_port, base = cluster_ports()
    config = cluster_config(broker_port, bootstrap_port, base)
    config["settings"]["cluster.broker.removal.ms"] = 1000
    proxy = start_proxy(config)
    try:
        wait_until(lambda: port_open(base + TANSU_NODE), 15, "the broker's port open (learnt)")
        client = socket.create_connection(("127.0.0.1", base + TANSU_NODE), timeout=5)
        time.sleep(0.2)  # deliberate: the connection accepted before the broker goes missing
        tansu = Address("127.0.0.1", broker_port)

        async def answer(brokers: dict) -> None:
            # the cluster's answers, driven: a one-broker Tansu cannot lose its broker and get it back
            proxy.app.discovery.learn(brokers)
            await asyncio.sleep(0.2)  # the port's listener closes in a task

        proxy.call(answer({}))  # absent, but not for long yet
        assert port_open(base + TANSU_NODE)
        time.sleep(1.1)  # deliberate: past cluster.broker.removal.ms (1 s)
        proxy.call(answer({}))
        assert not port_open(base + TANSU_NODE)
        assert (
            proxy.metric("kafka_quota_proxy_connections_closed_total", listener="PLAINTEXT", reason="broker_removed")
            == 1
        )
        client.settimeout(5)
        assert client.recv(1) == b""  # the proxy closed it
        client.close()
        proxy.call(answer({TANSU_NODE: tansu}))
        assert port_open(base + TANSU_NODE)
        with raw.connect(base + TANSU_NODE) as again:  # the same port, serving the broker again
            brokers = raw.exchange(again, METADATA, 12, topics=[]).brokers
        assert [(b.node_id, b.port) for b in brokers] == [(TANSU_NODE, base + TANSU_NODE)]
    finally:
        proxy.stop()
        broker.stop()
