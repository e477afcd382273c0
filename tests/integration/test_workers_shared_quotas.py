"""The quotas kept per entity across ``settings.workers: 2`` (the real command line, in front of Tansu), each held
as one across the workers: what one worker's clients did counts in the other's quota, so clients whose connections
the kernel hands to the other worker find the allowance spent. A window of two minutes makes each quota a count,
not a rate (a fresh sensor's rate is taken over 60 s): without the sharing, each worker would give its own allowance.

* a topic quota (``on_exceed: reject``): about 60 KiB of the topic for the whole test, wherever its writers land;
* a request rate (``request_rate`` of a client id): about 30 Metadata requests, wherever its connections land.

One proxy for both (a module's: started once, its tests in one group)."""

from __future__ import annotations

import pytest

from proxy.codec.apis import METADATA
from tests.harness import wait_until
from tests.integration import clients as c
from tests.integration.raw import connect, exchange
from tests.integration.workers import samples, scrape, workers_proxy

pytestmark = [
    pytest.mark.integration,
    pytest.mark.long_running(seconds=16),
    pytest.mark.xdist_group("workers-shared"),  # one xdist worker runs both: one proxy
]

KIB = 1024
QUOTA = 1 * KIB  # bytes/s, over two samples of 60 s: a fresh topic may take QUOTA x 60 s at once
ALLOWANCE = QUOTA * 60
WRITTEN = "kafka_quota_proxy_topic_quota_bytes_total"
TOPIC = {"quota": "producer_byte_rate", "topic": "capped"}
REQUESTS = 30  # Metadata requests of client id raw-test: 0.5/s x the 60 s a fresh sensor's rate is taken over
COUNTED = "kafka_quota_proxy_request_rate_requests_total"
RATE = "kafka_quota_proxy_request_rate_rate"
RAW_CLIENT = {"user": "", "client_id": "raw-test", "group": ""}  # tests.integration.raw's requests
QUOTAS = (
    f"[{{entity: {{topic: capped}}, producer_byte_rate: {QUOTA}, on_exceed: reject}},"
    " {entity: {client-id: raw-test}, request_rate: 0.5}]"
)
SETTINGS = {
    "quota.window.num": 2,
    "quota.window.size.seconds": 60,
    "quota.request.rate.apis": "Metadata",
    "quota.request.rate.max.throttle.ms": 50,  # the mute after a throttled answer: short, the test not slowed
}


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    """The proxy with two workers: its bootstrap and its metrics port."""
    with workers_proxy(tmp_path_factory.mktemp("workers"), 2, QUOTAS, **SETTINGS) as (_, bootstrap, metrics_port, _):
        yield bootstrap, metrics_port


def write(bootstrap: str, client_id: str, kib: int) -> tuple[int, int]:
    """``kib`` messages of 1 KiB to the capped topic from a producer (a connection) of its own; (acknowledged,
    failed). A refused message is retried until its short timeout, then fails."""
    from confluent_kafka import Producer

    done = {"acked": 0, "failed": 0}

    def delivered(err, msg):
        done["failed" if err else "acked"] += 1

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "enable.idempotence": True,
            "batch.size": 4 * KIB,
            "linger.ms": 2,
            "message.timeout.ms": 1500,
        }
    )
    for _ in range(kib):
        producer.produce("capped", b"x" * KIB, on_delivery=delivered)
        producer.poll(0)
    producer.flush(30)
    return done["acked"], done["failed"]


def test_a_topic_quota_is_one_across_the_workers(proxy):
    bootstrap, metrics_port = proxy
    c.ck_create_topic(bootstrap, "capped", 2)
    acked, failed = write(bootstrap, "first", 100)  # more than the allowance, from one worker
    assert acked * KIB <= ALLOWANCE + 16 * KIB and failed > 0, (acked, failed)  # + what came back meanwhile
    # the writer's worker told the other: both measure the topic's rate
    wait_until(
        lambda: (
            len(
                [
                    v
                    for v in samples(scrape(metrics_port), "kafka_quota_proxy_topic_quota_byte_rate", **TOPIC).values()
                    if v > 0
                ]
            )
            == 2
        ),
        15,
        "both workers measuring the capped topic",
    )
    before = sum(samples(scrape(metrics_port), WRITTEN, **TOPIC).values())
    # writers on new connections until the kernel has put some on each worker: none finds a fresh allowance
    refused: dict[str, float] = {}
    for n in range(16):  # the kernel's hash of each connection picks its worker: 8 left both to one in a run
        write(bootstrap, f"later-{n}", 80)
        refused = samples(scrape(metrics_port), "kafka_quota_proxy_topic_quota_rejected_partitions_total", **TOPIC)
        if len([w for w, k in refused.items() if k > 0]) == 2:
            break
    assert len([w for w, k in refused.items() if k > 0]) == 2, refused  # each worker served writers, refused them
    after = samples(scrape(metrics_port), WRITTEN, **TOPIC)
    later = sum(after.values()) - before
    # what the quota gives back over the test (QUOTA per second) and a batch past it each time; a worker with an
    # allowance of its own would have taken all of it (60 KiB) from the first writer it served
    assert later < ALLOWANCE * 3 / 4, (later, after)


def metadata(sock, n: int) -> list[int]:
    """``n`` Metadata requests on one connection, one at a time: the throttle_time_ms of each answer."""
    return [exchange(sock, METADATA, 9, correlation_id=i, topics=[]).throttle_time_ms for i in range(n)]


def counting(metrics_port: int) -> dict[str, float]:
    """worker -> the requests it counted against the client's quota itself (a peer's are in its rate, not here)."""
    return {w: n for w, n in samples(scrape(metrics_port), COUNTED, **RAW_CLIENT).items() if n > 0}


def test_a_request_rate_is_one_across_the_workers(proxy):
    bootstrap, metrics_port = proxy
    port = int(bootstrap.rsplit(":", 1)[1])
    first = connect(port)
    try:
        assert metadata(first, REQUESTS) == [0] * REQUESTS  # the allowance, from one connection: one worker
    finally:
        first.close()
    (served,) = counting(metrics_port)  # the worker that served it
    wait_until(  # it told the other: both measure the client's rate
        lambda: len([v for v in samples(scrape(metrics_port), RATE, **RAW_CLIENT).values() if v > 0]) == 2,
        15,
        "both workers measuring the client's request rate",
    )
    # new connections until the kernel has put one on the other worker: none finds a fresh allowance
    throttles: list[int] = []
    counted: dict[str, float] = {}
    for _ in range(16):
        sock = connect(port)
        try:
            throttles += metadata(sock, 1)
        finally:
            sock.close()
        counted = counting(metrics_port)
        if len(counted) == 2:
            break
    assert len(counted) == 2 and counted[served] == REQUESTS + len(throttles) - 1, counted
    assert all(t > 0 for t in throttles), throttles  # a worker with an allowance of its own answered 0
