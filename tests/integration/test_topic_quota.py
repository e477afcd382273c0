"""Per-topic byte rates through a sidecar proxy with real clients (confluent-kafka), as a hostile tenant would try to
escape them, against Tansu (the mechanics; the rate itself is measured against Apache Kafka in
tests/integration/kafka/test_topic_quota_rate.py).

One tenant writes a capped topic through three producers, each with its own client id and connection, every one of
its requests also writing a second topic that is far within its own quota: the capped topic's quota is the topic's,
not a client's, so every one of the three is throttled, the topic's bytes stay within what one quota allows over
the run (three clients' quotas would allow three times as much), and the second topic's quota throttles nothing. A
fourth producer, with the first one's client id on a connection of its own, writes only the second topic and is
never throttled: the topic quota holds back the capped topic's writers, not a client id. Then two consumers with
client ids of their own read the capped topic under its ``consumer_byte_rate`` and are throttled by it, while a
third reads the other topic unthrottled. ``explain`` names the topic quota that muted a writer's connection.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
import urllib.request

import pytest

from tests.harness import wait_until
from tests.integration import clients as c

pytestmark = [pytest.mark.integration, pytest.mark.long_running(seconds=13)]

KIB = 1024
PRODUCE_QUOTA, FETCH_QUOTA = 64 * KIB, 96 * KIB
WINDOW_NUM = 3  # one-second samples: a fresh topic may take (num - 1) s of its quota at once
VALUE = b"v" * 1000
SLACK = 3 * 64 * KIB  # a request per writer past the quota: recorded before its throttle mutes the connection


def quotas(capped: str) -> list[dict]:
    return [
        {"entity": {"topic": capped}, "producer_byte_rate": PRODUCE_QUOTA, "consumer_byte_rate": FETCH_QUOTA},
        {
            "entity": {"topic": "<default>"},
            "producer_byte_rate": 1024 * 1024 * KIB,
            "consumer_byte_rate": 1024 * 1024 * KIB,
        },
    ]


def reader(bootstrap: str, client_id: str, topic: str, stop: threading.Event, throttles: list, counted: list) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "group.id": client_id,
            "enable.auto.commit": False,
            "throttle_cb": lambda event: throttles.append(event.throttle_time),
        }
    )
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])  # no group rebalance to wait for
    try:
        while not stop.is_set():
            for msg in consumer.consume(500, 0.2):
                if msg.error() is None:
                    counted.append(len(msg.value()))
    finally:
        consumer.close()


def topic_metric(proxy, name: str, quota: str, topic: str) -> float:
    return proxy.metric(f"kafka_quota_proxy_topic_quota_{name}", quota=quota, topic=topic)


def explained(proxy, client_id: str, topic: str) -> dict:
    query = urllib.parse.urlencode({"client_id": client_id, "ip": "127.0.0.1", "topic": topic})
    with urllib.request.urlopen(f"http://127.0.0.1:{proxy.metrics_port}/explain?{query}", timeout=10) as answer:
        return json.loads(answer.read())["answers"][0]


@pytest.mark.parametrize("upstream", ["tansu"], indirect=True)
def test_a_topic_quota_holds_every_writer_and_reader_of_the_topic_and_no_one_else(upstream):
    capped, other = "capped", "other"  # the broker is this test's own
    settings = {"quota.window.num": WINDOW_NUM, "quota.window.size.seconds": 1}
    with upstream.sidecar(quotas(capped), **settings) as proxy:
        for topic in (capped, other):
            c.kp_create_topic(proxy.bootstrap, topic, 1)
        run(proxy, capped, other)


def run(proxy, capped: str, other: str) -> None:
    writers = [c.ThrottledWriter(proxy.bootstrap, f"tenant-{i}", (capped, other), VALUE) for i in range(3)]
    bystander = c.ThrottledWriter(proxy.bootstrap, "tenant-0", (other,), VALUE)
    started = time.monotonic()
    with writers[0], writers[1], writers[2], bystander:
        wait_until(lambda: all(w.throttles for w in writers), 30, "every writer of the capped topic throttled")
        # the topic quota names the topic that muted the connection, whose client id is the writer's
        why = wait_until(
            lambda: next((c for c in explained(proxy, "tenant-1", capped)["connections"] if c["muted_by"]), None),
            20,
            "explain showing a writer's connection muted by the topic quota",
            interval=0.2,
        )
        assert why["muted_by"] == f"topic_producer_byte_rate (topic {capped})"
        wait_until(lambda: bystander.acked >= 2000, 30, "the bystander's 2,000 messages acknowledged")
    elapsed = time.monotonic() - started
    written = topic_metric(proxy, "bytes_total", "producer_byte_rate", capped)
    allowed = PRODUCE_QUOTA * (elapsed + WINDOW_NUM - 1) + SLACK  # one topic quota over the run, its burst included
    print(f"written to the capped topic: {written / allowed:.2f} of what one quota allows over {elapsed:.1f} s")
    assert 0 < written <= allowed, f"{written:.0f} bytes written to the capped topic, at most {allowed:.0f} allowed"
    assert topic_metric(proxy, "throttled_requests_total", "producer_byte_rate", capped) > 0
    assert topic_metric(proxy, "throttled_requests_total", "producer_byte_rate", "<default>") == 0
    assert topic_metric(proxy, "bytes_total", "producer_byte_rate", "<default>") > 0  # the other topic, counted
    assert bystander.throttles == [], "the bystander (same client id, other topic only) was throttled"

    stop = threading.Event()
    throttles = {name: [] for name in ("reader-a", "reader-b", "reader-other")}
    counted = {name: [] for name in throttles}
    threads = [
        threading.Thread(target=reader, args=(proxy.bootstrap, name, topic, stop, throttles[name], counted[name]))
        for name, topic in (("reader-a", capped), ("reader-b", capped), ("reader-other", other))
    ]
    started = time.monotonic()
    for t in threads:
        t.start()
    try:
        wait_until(
            lambda: len(throttles["reader-a"]) >= 3 and len(throttles["reader-b"]) >= 3,
            30,
            "both readers of the capped topic throttled three times",
        )
        wait_until(lambda: len(counted["reader-other"]) >= 2000, 30, "the other topic's reader reading")
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    elapsed = time.monotonic() - started
    read = topic_metric(proxy, "bytes_total", "consumer_byte_rate", capped)
    allowed = FETCH_QUOTA * (elapsed + WINDOW_NUM - 1) + 2 * 64 * KIB  # a batch per reader past its headroom
    print(f"read from the capped topic: {read / allowed:.2f} of what one quota allows over {elapsed:.1f} s")
    assert 0 < read <= allowed, f"{read:.0f} bytes read from the capped topic, at most {allowed:.0f} allowed"
    assert throttles["reader-other"] == [], "the other topic's reader was throttled"
    assert topic_metric(proxy, "throttled_requests_total", "consumer_byte_rate", "<default>") == 0
