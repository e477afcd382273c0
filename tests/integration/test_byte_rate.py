"""Produce and fetch byte-rate quotas (KIP-13) with real clients through the proxy against Tansu.

Each client runs flat out under a 1 MiB/s quota. After the first full quota window (a fresh sensor may burst
about quota * (num - 1) * window, as in Kafka), the bytes the proxy forwards for that client's entity are
measured over eight more full windows and must stay within 1.05 x the quota, Kafka's own system-test bound.
Kafka's sampled rate lets a client that ignores throttle_time_ms burst again whenever its oldest sample
expires, so a measurement over few windows depends on where it starts in that cycle; short windows (3 x 1 s)
let the measurement cover many cycles in reasonable time. The unit tests cover Kafka's default windows. A
second client under another entity runs at the same time and must not be throttled. Nothing produced is lost
or duplicated.

A quota is enforced per request (produce) or per record batch (fetch), so a rate can only be held to within one
request or batch of the quota: the clients here use 64 KiB batches against a 1 MiB/s quota, as a real
deployment's quota would be large compared with its clients' batches.
"""

import asyncio
import threading
import time

import pytest

from tests.harness import Tansu, free_port, proxy_config, start_proxy
from tests.integration import clients as c

pytestmark = [pytest.mark.integration, pytest.mark.measures_rate]

QUOTA = 1024 * 1024
WINDOW_NUM, WINDOW_S = 3, 1  # short windows, so the measurement spans many of them
SPAN_S = WINDOW_NUM * WINDOW_S
MEASURE_S = 8 * SPAN_S  # many windows: an aggressive client bursts again each time its oldest sample expires
PRODUCERS = ("kafka-python", "confluent", "aiokafka")
VALUE = b"v" * 1000


@pytest.fixture
def quota_proxy():
    proxy_port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    quotas = [{"entity": {"client-id": f"limited-{kind}"}, "producer_byte_rate": QUOTA, "consumer_byte_rate": QUOTA}
              for kind in PRODUCERS]
    proxy = start_proxy(proxy_config(proxy_port, broker_port, quotas=quotas, **{
        "quota.window.num": WINDOW_NUM, "quota.window.size.seconds": WINDOW_S}))
    yield proxy
    proxy.stop()
    broker.stop()


def entity_bytes(proxy, quota: str, client_id: str) -> float:
    return proxy.metric("kafka_quota_proxy_quota_bytes_total", quota=quota, user="", client_id=client_id)


def measure_rates(proxy, quota: str, client_ids, started: float) -> dict[str, float]:
    """Bytes/s counted for each entity over MEASURE_S, starting one full quota window after ``started``."""
    time.sleep(max(0.0, started + SPAN_S - time.monotonic()))
    b0, t0 = {c: entity_bytes(proxy, quota, c) for c in client_ids}, time.monotonic()
    time.sleep(MEASURE_S)
    b1, t1 = {c: entity_bytes(proxy, quota, c) for c in client_ids}, time.monotonic()
    return {c: (b1[c] - b0[c]) / (t1 - t0) for c in client_ids}


class Flat:
    """Runs a producer flat out in a thread until stopped; remembers every acknowledged value."""

    def __init__(self, produce) -> None:
        self.produce = produce
        self.stop = threading.Event()
        self.acked: list[bytes] = []
        self.error = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        try:
            self.produce(self)
        except Exception as exc:  # reported by the test
            self.error = exc

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(60)
        assert not self.thread.is_alive(), "producer did not finish"
        assert self.error is None, self.error


def kp_flat(bootstrap, topic, client_id):
    def run(flat):
        from kafka import KafkaProducer

        p = KafkaProducer(bootstrap_servers=bootstrap, client_id=client_id, batch_size=64 * 1024, linger_ms=5,
                          acks=1, max_block_ms=60000)
        seq, pending = 0, []
        while not flat.stop.is_set():
            value = b"%d:" % seq + VALUE
            pending.append((value, p.send(topic, value)))
            seq += 1
            if len(pending) >= 256:  # keep a few batches queued at most (kafka-python 3 has no buffer.memory)
                value0, fut = pending.pop(0)
                fut.get(60)
                flat.acked.append(value0)
        p.flush(60)
        flat.acked.extend(v for v, f in pending if f.get(30))
        p.close(10)
    return run


def ck_flat(bootstrap, topic, client_id):
    def run(flat):
        from confluent_kafka import Producer

        acked = flat.acked
        p = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5,
                      "queue.buffering.max.kbytes": 256, "batch.size": 64 * 1024, "acks": 1})
        seq = 0
        while not flat.stop.is_set():
            value = b"%d:" % seq + VALUE
            try:
                p.produce(topic, value, on_delivery=lambda err, msg: err is None and acked.append(msg.value()))
                seq += 1
            except BufferError:
                p.poll(0.01)
            p.poll(0)
        assert p.flush(60) == 0
    return run


def aio_flat(bootstrap, topic, client_id):
    def run(flat):
        from aiokafka import AIOKafkaProducer

        async def main():
            p = AIOKafkaProducer(bootstrap_servers=bootstrap, client_id=client_id, linger_ms=5, acks=1,
                                 max_batch_size=64 * 1024)
            await p.start()
            seq, pending = 0, []
            try:
                while not flat.stop.is_set():
                    value = b"%d:" % seq + VALUE
                    pending.append((value, await p.send(topic, value)))
                    seq += 1
                    if len(pending) >= 256:  # keep at most a few batches queued, like buffer.memory would
                        value0, fut = pending.pop(0)
                        await fut
                        flat.acked.append(value0)
                for value, fut in pending:
                    await fut
                    flat.acked.append(value)
            finally:
                await p.stop()

        asyncio.run(main())
    return run


@pytest.mark.long_running(seconds=120)
def test_producers_held_to_their_quota(quota_proxy):
    """kafka-python, confluent-kafka and aiokafka producers, each under its own 1 MiB/s quota, all at once, with an
    unlimited confluent-kafka producer beside them."""
    proxy = quota_proxy
    makers = {"kafka-python": kp_flat, "confluent": ck_flat, "aiokafka": aio_flat}
    for kind in PRODUCERS:
        c.kp_create_topic(proxy.bootstrap, f"quota-{kind}", 1)
    c.kp_create_topic(proxy.bootstrap, "free-p", 1)
    started = time.monotonic()
    flats = {kind: Flat(makers[kind](proxy.bootstrap, f"quota-{kind}", f"limited-{kind}")) for kind in PRODUCERS}
    with flats["kafka-python"], flats["confluent"], flats["aiokafka"], \
            Flat(ck_flat(proxy.bootstrap, "free-p", "free-producer")):
        rates = measure_rates(proxy, "producer_byte_rate", [f"limited-{k}" for k in PRODUCERS], started)
        free_rate = entity_bytes(proxy, "producer_byte_rate", "free-producer") / (time.monotonic() - started)
    print({k: round(r / QUOTA, 3) for k, r in rates.items()}, "free:", round(free_rate / QUOTA, 2))
    for client_id, rate in rates.items():
        assert rate <= 1.05 * QUOTA, f"{client_id} at {rate / QUOTA:.3f} x quota"
        assert rate >= 0.5 * QUOTA, f"{client_id} far below its quota ({rate / QUOTA:.3f} x): over-throttled"
        assert proxy.metric("kafka_quota_proxy_quota_throttled_responses_total", quota="producer_byte_rate",
                            user="", client_id=client_id) > 0
    assert free_rate > 2 * QUOTA, f"the unlimited client was slowed to {free_rate / QUOTA:.2f} x the others' quota"
    assert proxy.metric("kafka_quota_proxy_quota_throttled_responses_total", quota="producer_byte_rate",
                        user="", client_id="free-producer") == 0
    for kind, flat in flats.items():
        got = c.kp_consume(proxy.bootstrap, f"quota-{kind}", len(flat.acked))
        values = [v for vs in got.values() for v in vs]
        assert len(values) == len(set(values)) == len(flat.acked), f"{kind}: messages lost or duplicated"
        assert set(values) == set(flat.acked)


def fill(bootstrap: str, topic: str, count: int) -> None:
    from confluent_kafka import Producer

    # 64 KiB batches: a consumer receives whole batches, so their size is the granularity of its rate
    p = Producer({"bootstrap.servers": bootstrap, "client.id": "filler", "linger.ms": 20, "batch.size": 65536})
    for seq in range(count):
        while True:
            try:
                p.produce(topic, b"%d:" % seq + VALUE)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(60) == 0


def consume_flat(kind, bootstrap, topic, client_id, stop, counted):
    if kind == "kafka-python":
        from kafka import KafkaConsumer, TopicPartition

        consumer = KafkaConsumer(bootstrap_servers=bootstrap, client_id=client_id, enable_auto_commit=False,
                                 fetch_max_bytes=1 << 20)
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        while not stop.is_set():
            for records in consumer.poll(200).values():
                counted.extend(r.value for r in records)
        consumer.close()
    elif kind == "confluent":
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "g", "client.id": client_id,
                             "enable.auto.commit": False})
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        while not stop.is_set():
            for m in consumer.consume(500, 0.2):
                if not m.error():
                    counted.append(m.value())
        consumer.close()
    else:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        async def main():
            consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, client_id=client_id, enable_auto_commit=False)
            await consumer.start()
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            while not stop.is_set():
                for records in (await consumer.getmany(timeout_ms=200)).values():
                    counted.extend(r.value for r in records)
            await consumer.stop()

        asyncio.run(main())


@pytest.mark.long_running(seconds=60)
def test_consumers_held_to_their_quota(quota_proxy):
    """kafka-python, confluent-kafka and aiokafka consumers, each under its own 1 MiB/s quota, all at once, reading
    the same topic, with an unlimited confluent-kafka consumer beside them that must read everything."""
    proxy = quota_proxy
    c.kp_create_topic(proxy.bootstrap, "quota-c", 1)
    total = int((SPAN_S + MEASURE_S + 2) * QUOTA * 1.3 / (len(VALUE) + 8))
    fill(proxy.bootstrap, "quota-c", total)
    stop = threading.Event()
    got = {kind: [] for kind in (*PRODUCERS, "free")}
    threads = [threading.Thread(target=consume_flat, args=(kind, proxy.bootstrap, "quota-c", f"limited-{kind}", stop,
                                                           got[kind])) for kind in PRODUCERS]
    threads.append(threading.Thread(target=consume_flat, args=("confluent", proxy.bootstrap, "quota-c",
                                                               "free-consumer", stop, got["free"])))
    started = time.monotonic()
    for t in threads:
        t.start()
    try:
        rates = measure_rates(proxy, "consumer_byte_rate", [f"limited-{k}" for k in PRODUCERS], started)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    print({k: round(r / QUOTA, 3) for k, r in rates.items()})
    for client_id, rate in rates.items():
        assert rate <= 1.05 * QUOTA, f"{client_id} at {rate / QUOTA:.3f} x quota"
        assert rate >= 0.5 * QUOTA, f"{client_id} far below its quota ({rate / QUOTA:.3f} x): over-throttled"
    assert len(got["free"]) == total, "the unlimited consumer did not read everything while the others were throttled"
    for kind in PRODUCERS:
        assert len(got[kind]) == len(set(got[kind])), f"{kind}: duplicates delivered to a throttled consumer"
