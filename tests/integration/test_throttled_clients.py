"""Clients as users run them, throttled by byte-rate quotas through the proxy, against Tansu: never stalled.

Producers with their default settings (confluent-kafka: 1 MB batches, acks=all, up to 1,000,000 requests in
flight; kafka-python and aiokafka defaults) and a pipelining confluent-kafka producer (16 KiB batches,
``queue.buffering.max.kbytes`` 1024, ``linger.ms`` 5, acks=1: tens of requests in flight, each spanning socket
reads anywhere), and consumers with their defaults (large ``fetch.max.bytes``) over four partitions, all with
1 KiB messages and each under its own quota (1 MiB/s; 256 KiB/s for the Python clients, see PYTHON_QUOTA), all at
once, the proxy in its own process. Before the flow rewrite the pipelining producer
stopped receiving answers after its first burst and the default confluent-kafka producer stalled at its first
throttle until librdkafka timed its requests out.

After the start-up burst (one quota window span), for every client: no gap between acknowledgements (or records)
longer than ``quota.mute.max.ms`` + 1 s (the mute cap is set to the window span here, tighter than the default),
and the rate the quota counts, measured over eight window spans (three x 1 s windows) or six spans (Kafka's
default 11 x 1 s), within RATE_BOUNDS of the quota.

RATE_BOUNDS is far wider than issue 7's target of 0.9-1.05, which is NOT met: on this two-core machine, with a
broker, the proxy and four clients sharing the cores, runs measured 0.84-1.06 x for most clients, but the
pipelining confluent-kafka producer got only 0.63-0.96 x in full-suite runs (0.985 x alone), an open defect. The
bounds here hold what is established: no client stalls (a stall shows as a gap of tens of seconds and a rate
near 0) and none gets much more than its quota.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.harness import Tansu, free_port, proxy_config, wait_for_port

pytestmark = pytest.mark.integration

QUOTA = 1024 * 1024
# kafka-python and aiokafka with their defaults (linger 0, one record per request) are latency-bound: through any
# extra TCP hop on this machine, a plain relay included, they reach only about 1-2.5 MiB/s unthrottled, so their
# quotas are set where the quota, not the client, is the limit.
PYTHON_QUOTA = 256 * 1024
VALUE = b"v" * 1024
TOPIC, SOURCE, PARTITIONS = "throttled-out", "throttled-in", 4
RATE_BOUNDS = (0.5, 1.15)


class Client:
    """Runs one client flat out in a thread; remembers when each acknowledgement (or record) arrived."""

    def __init__(self, name: str, quota: str, run) -> None:
        self.name, self.quota, self._run = name, quota, run
        self.stop = threading.Event()
        self.times: list[float] = []
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._main, name=name, daemon=True)

    def record(self, *_args) -> None:
        self.times.append(time.monotonic())

    def _main(self) -> None:
        try:
            self._run(self)
        except BaseException as exc:  # reported by the test
            self.error = exc

    def max_gap(self, since: float) -> float:
        times = [t for t in self.times if t >= since]
        return max((b - a for a, b in zip(times, times[1:])), default=float("inf"))


def ck_producer(bootstrap: str, extra: dict):
    def run(client: Client) -> None:
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": bootstrap, "client.id": client.name, **extra})
        while not client.stop.is_set():
            try:
                p.produce(TOPIC, VALUE, on_delivery=lambda err, msg: err is None and client.record())
            except BufferError:
                p.poll(0.005)  # the queue is full: wait for a delivery, briefly (a small queue drains fast)
                continue
            p.poll(0)
        p.purge()
        p.flush(5)
    return run


def kp_producer(bootstrap: str):
    def run(client: Client) -> None:
        from kafka import KafkaProducer
        from kafka.errors import KafkaTimeoutError

        p = KafkaProducer(bootstrap_servers=bootstrap, client_id=client.name)
        while not client.stop.is_set():
            p.send(TOPIC, VALUE).add_callback(client.record)
        try:
            p.close(timeout=1)  # what is still buffered is dropped: the measurement is over
        except KafkaTimeoutError:
            pass
    return run


def aio_producer(bootstrap: str):
    def run(client: Client) -> None:
        from aiokafka import AIOKafkaProducer

        async def main() -> None:
            p = AIOKafkaProducer(bootstrap_servers=bootstrap, client_id=client.name)
            await p.start()
            try:
                while not client.stop.is_set():
                    (await p.send(TOPIC, VALUE)).add_done_callback(client.record)
            finally:
                await asyncio.wait_for(p.stop(), 30)
        asyncio.run(main())
    return run


def ck_consumer(bootstrap: str):
    def run(client: Client) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        c = Consumer({"bootstrap.servers": bootstrap, "client.id": client.name, "group.id": client.name,
                      "enable.auto.commit": False})
        c.assign([TopicPartition(SOURCE, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        while not client.stop.is_set():
            for message in c.consume(500, 0.5):
                if message.error() is None:
                    client.record()
        c.close()
    return run


def kp_consumer(bootstrap: str):
    def run(client: Client) -> None:
        from kafka import KafkaConsumer, TopicPartition

        c = KafkaConsumer(bootstrap_servers=bootstrap, client_id=client.name, enable_auto_commit=False)
        partitions = [TopicPartition(SOURCE, p) for p in range(PARTITIONS)]
        c.assign(partitions)
        c.seek_to_beginning(*partitions)
        while not client.stop.is_set():
            for records in c.poll(timeout_ms=500).values():
                for _ in records:
                    client.record()
        c.close()
    return run


def aio_consumer(bootstrap: str):
    def run(client: Client) -> None:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        async def main() -> None:
            c = AIOKafkaConsumer(bootstrap_servers=bootstrap, client_id=client.name, enable_auto_commit=False)
            await c.start()
            try:
                partitions = [TopicPartition(SOURCE, p) for p in range(PARTITIONS)]
                c.assign(partitions)
                await c.seek_to_beginning(*partitions)
                while not client.stop.is_set():
                    for records in (await c.getmany(timeout_ms=500)).values():
                        for _ in records:
                            client.record()
            finally:
                await c.stop()
        asyncio.run(main())
    return run


class ProxyProcess:
    """The proxy in its own process, as deployed: the Python clients here must not share its interpreter lock."""

    def __init__(self, config: dict) -> None:
        self.metrics_port = free_port()
        config["metrics"] = {"bind": f"127.0.0.1:{self.metrics_port}"}
        self.port = int(config["listeners"][0]["bind"].rsplit(":", 1)[1])
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            yaml.safe_dump(config, f)
        self.config_path = f.name
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        self.proc = subprocess.Popen([sys.executable, "-m", "proxy.cli", "run", "--config", f.name,
                                      "--log-level", "WARNING"], cwd=root)
        wait_for_port(self.port, timeout=30)
        wait_for_port(self.metrics_port, timeout=30)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def counted(self, quota: str, client_id: str) -> float:
        """Bytes the quota counted for the entity, as Prometheus scrapes them."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10) as response:
            text = response.read().decode()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if (sample.name == "kafka_quota_proxy_quota_bytes_total" and sample.labels.get("quota") == quota
                        and sample.labels.get("client_id") == client_id):
                    return sample.value
        return 0.0

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        os.unlink(self.config_path)


def prefill(broker_bootstrap: str, megabytes: int) -> None:
    """Write the consumers' topic straight to the broker (no quota), in large batches."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker_bootstrap})
    for topic in (TOPIC, SOURCE):
        for f in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
            f.result(30)
    # 64 KiB batches: a consumer receives at least one whole batch per fetch, and a batch large compared with
    # quota x window would let it exceed its quota (against Kafka too; see the README on sizing windows)
    p = Producer({"bootstrap.servers": broker_bootstrap, "linger.ms": 20, "acks": 1, "batch.size": 65536})
    for i in range(megabytes * 1024):
        while True:
            try:
                p.produce(SOURCE, VALUE, partition=i % PARTITIONS)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    assert p.flush(60) == 0


@pytest.mark.parametrize("side", ["producers", "consumers"])
@pytest.mark.parametrize("window_num, measured_spans", [(3, 8), (11, 6)])
def test_clients_under_byte_rate_quotas_are_throttled_never_stalled(window_num, measured_spans, side):
    """Producers and consumers run in separate cases: seven clients at once on two cores starve one another."""
    span_s = window_num  # 1 s windows
    measure_s = measured_spans * span_s
    proxy_port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    mute_max_ms = span_s * 1000
    names = ["ck-default", "ck-pipelining", "kp-default", "aio-default", "ck-consumer", "kp-consumer", "aio-consumer"]
    limit = {name: QUOTA if name.startswith("ck-") else PYTHON_QUOTA for name in names}
    quotas = [{"entity": {"client-id": name}, "producer_byte_rate": limit[name], "consumer_byte_rate": limit[name]}
              for name in names]
    proxy = ProxyProcess(proxy_config(proxy_port, broker_port, quotas=quotas, **{
        "quota.window.num": window_num, "quota.mute.max.ms": mute_max_ms}))
    try:
        prefill(f"127.0.0.1:{broker_port}", megabytes=(span_s + measure_s + 10) * QUOTA // 2**20 if side == "consumers" else 0)
        bootstrap = proxy.bootstrap
        pipelining = {"batch.size": 16384, "queue.buffering.max.kbytes": 1024, "linger.ms": 5, "acks": 1}
        clients = [c for c in [
            Client("ck-default", "producer_byte_rate", ck_producer(bootstrap, {})),
            Client("ck-pipelining", "producer_byte_rate", ck_producer(bootstrap, pipelining)),
            Client("kp-default", "producer_byte_rate", kp_producer(bootstrap)),
            Client("aio-default", "producer_byte_rate", aio_producer(bootstrap)),
            Client("ck-consumer", "consumer_byte_rate", ck_consumer(bootstrap)),
            Client("kp-consumer", "consumer_byte_rate", kp_consumer(bootstrap)),
            Client("aio-consumer", "consumer_byte_rate", aio_consumer(bootstrap)),
        ] if (c.quota == "consumer_byte_rate") == (side == "consumers")]

        def counted(client: Client) -> float:
            return proxy.counted(client.quota, client.name)

        for client in clients:
            client.thread.start()
        started = time.monotonic()
        time.sleep(span_s + 1)  # the start-up burst: a fresh sensor admits about quota x (num - 1) windows
        steady_from = time.monotonic()
        before = {c.name: counted(c) for c in clients}
        time.sleep(measure_s)
        after = {c.name: counted(c) for c in clients}
        elapsed = time.monotonic() - steady_from
        for client in clients:
            client.stop.set()
        for client in clients:
            client.thread.join(60)
        report = {c.name: (round((after[c.name] - before[c.name]) / elapsed / limit[c.name], 3),
                           round(c.max_gap(steady_from), 2), len(c.times)) for c in clients}
        print(f"window.num {window_num}, {side}: (rate/quota, max gap s, events) {report}")
        for client in clients:
            assert client.error is None, f"{client.name}: {client.error!r}"
            rate, gap, _ = report[client.name]
            assert gap <= mute_max_ms / 1000 + 1, f"{client.name} stalled for {gap} s: {report}"
            assert RATE_BOUNDS[0] <= rate <= RATE_BOUNDS[1], f"{client.name} at {rate} x quota: {report}"
    finally:
        proxy.stop()
        broker.stop()
