"""One topic quota across ``settings.workers: 2`` (the real command line, in front of Tansu): what one worker's
clients wrote to a topic counts in the other's topic quota, so writers whose connections the kernel hands to the
other worker find the topic's allowance spent. ``on_exceed: reject`` and a window of two minutes make it a count,
not a rate: the topic's allowance is about 60 KiB for the whole test, wherever its writers land; without the
sharing, each worker would give its own 60 KiB."""

from __future__ import annotations

import pytest

from tests.harness import wait_until
from tests.integration import clients as c
from tests.integration.workers import samples, scrape, workers_proxy

pytestmark = [pytest.mark.integration, pytest.mark.long_running(seconds=16)]

KIB = 1024
QUOTA = 1 * KIB  # bytes/s, over two samples of 60 s: a fresh topic may take QUOTA x 60 s at once
ALLOWANCE = QUOTA * 60
WRITTEN = "kafka_quota_proxy_topic_quota_bytes_total"
TOPIC = {"quota": "producer_byte_rate", "topic": "capped"}


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


def test_a_topic_quota_is_one_across_the_workers(tmp_path):
    quotas = "[{entity: {topic: capped}, producer_byte_rate: %d, on_exceed: reject}]" % QUOTA
    with workers_proxy(tmp_path, 2, quotas, **{"quota.window.num": 2, "quota.window.size.seconds": 60}) as (
        _,
        bootstrap,
        metrics_port,
        _,
    ):
        c.ck_create_topic(bootstrap, "capped", 2)
        acked, failed = write(bootstrap, "first", 100)  # more than the allowance, from one worker
        assert acked * KIB <= ALLOWANCE + 16 * KIB and failed > 0, (acked, failed)  # + what came back meanwhile
        # the writer's worker told the other: both measure the topic's rate
        wait_until(
            lambda: (
                len(
                    [
                        v
                        for v in samples(
                            scrape(metrics_port), "kafka_quota_proxy_topic_quota_byte_rate", **TOPIC
                        ).values()
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
        for n in range(8):
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
