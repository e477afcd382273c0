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

import threading
import time

import pytest

from tests.harness import Tansu, free_port, proxy_config, start_proxy
from tests.integration import clients as c
from tests.integration.flat_clients import VALUE, Flat, aio_flat, ck_flat, consume_flat, kp_flat

pytestmark = [pytest.mark.integration, pytest.mark.measures_rate]

QUOTA = 1024 * 1024
WINDOW_NUM, WINDOW_S = 3, 1  # short windows, so the measurement spans many of them
SPAN_S = WINDOW_NUM * WINDOW_S
MEASURE_S = 8 * SPAN_S  # many windows: an aggressive client bursts again each time its oldest sample expires
PRODUCERS = ("kafka-python", "confluent", "aiokafka")


@pytest.fixture
def quota_proxy():
    proxy_port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    quotas = [
        {"entity": {"client-id": f"limited-{kind}"}, "producer_byte_rate": QUOTA, "consumer_byte_rate": QUOTA}
        for kind in PRODUCERS
    ]
    proxy = start_proxy(
        proxy_config(
            proxy_port,
            broker_port,
            quotas=quotas,
            **{"quota.window.num": WINDOW_NUM, "quota.window.size.seconds": WINDOW_S},
        )
    )
    yield proxy
    proxy.stop()
    broker.stop()


def entity_bytes(proxy, quota: str, client_id: str) -> float:
    return proxy.metric("kafka_quota_proxy_quota_bytes_total", quota=quota, user="", client_id=client_id)


def measure_rates(proxy, quota: str, client_ids, started: float) -> dict[str, float]:
    """Bytes/s counted for each entity over MEASURE_S, starting one full quota window after ``started``."""
    time.sleep(max(0.0, started + SPAN_S - time.monotonic()))  # deliberate: past the start-up burst
    b0, t0 = {c: entity_bytes(proxy, quota, c) for c in client_ids}, time.monotonic()
    time.sleep(MEASURE_S)  # deliberate: the measurement window (a rate group)
    b1, t1 = {c: entity_bytes(proxy, quota, c) for c in client_ids}, time.monotonic()
    return {c: (b1[c] - b0[c]) / (t1 - t0) for c in client_ids}


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
    with (
        flats["kafka-python"],
        flats["confluent"],
        flats["aiokafka"],
        Flat(ck_flat(proxy.bootstrap, "free-p", "free-producer")),
    ):
        rates = measure_rates(proxy, "producer_byte_rate", [f"limited-{k}" for k in PRODUCERS], started)
        free_rate = entity_bytes(proxy, "producer_byte_rate", "free-producer") / (time.monotonic() - started)
    print({k: round(r / QUOTA, 3) for k, r in rates.items()}, "free:", round(free_rate / QUOTA, 2))
    for client_id, rate in rates.items():
        assert rate <= 1.05 * QUOTA, f"{client_id} at {rate / QUOTA:.3f} x quota"
        assert rate >= 0.5 * QUOTA, f"{client_id} far below its quota ({rate / QUOTA:.3f} x): over-throttled"
        assert (
            proxy.metric(
                "kafka_quota_proxy_quota_throttled_responses_total",
                quota="producer_byte_rate",
                user="",
                client_id=client_id,
            )
            > 0
        )
    assert free_rate > 2 * QUOTA, f"the unlimited client was slowed to {free_rate / QUOTA:.2f} x the others' quota"
    assert (
        proxy.metric(
            "kafka_quota_proxy_quota_throttled_responses_total",
            quota="producer_byte_rate",
            user="",
            client_id="free-producer",
        )
        == 0
    )
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
    threads = [
        threading.Thread(
            target=consume_flat, args=(kind, proxy.bootstrap, "quota-c", f"limited-{kind}", stop, got[kind])
        )
        for kind in PRODUCERS
    ]
    threads.append(
        threading.Thread(
            target=consume_flat, args=("confluent", proxy.bootstrap, "quota-c", "free-consumer", stop, got["free"])
        )
    )
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
