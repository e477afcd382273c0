"""Per-partition byte rates through a sidecar proxy with real clients (confluent-kafka) against Tansu: a hot partition
is held to its own quota and cannot take a cold one's.

One topic of two partitions under ``{topic: NAME, partition: <default>}``: a producer writes partition 0 flat out, a
second producer (another client id, its own connection) writes partition 1 at a fraction of the quota. The hot
writer is throttled, and what it wrote stays within what one partition's quota allows over the run (the topic's two
partitions would allow twice as much); the cold writer is never throttled. The partition's series is labelled by
its topic and ``partition="<default>"``, and ``explain`` names the partition quota that muted the hot connection.
"""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request

import pytest

from tests.harness import wait_until
from tests.integration import clients as c

pytestmark = [pytest.mark.integration, pytest.mark.measures_rate, pytest.mark.long_running(seconds=6)]

KIB = 1024
QUOTA = 64 * KIB
WINDOW_NUM = 3  # one-second samples: a fresh partition may take (num - 1) s of its quota at once
VALUE = b"v" * 1000
SLACK = 64 * KIB  # a request past the quota: recorded before its throttle mutes the connection


def partition_metric(proxy, name: str, topic: str, partition: str) -> float:
    return proxy.metric(
        f"kafka_quota_proxy_partition_quota_{name}", quota="producer_byte_rate", topic=topic, partition=partition
    )


def explained(proxy, client_id: str, topic: str, partition: int) -> dict:
    query = urllib.parse.urlencode({"client_id": client_id, "ip": "127.0.0.1", "topic": topic, "partition": partition})
    with urllib.request.urlopen(f"http://127.0.0.1:{proxy.metrics_port}/explain?{query}", timeout=10) as answer:
        return json.loads(answer.read())["answers"][0]


@pytest.mark.parametrize("upstream", ["tansu"], indirect=True)
def test_a_hot_partition_is_held_to_its_own_quota_and_a_cold_one_is_not(upstream):
    topic = "spread"  # the broker is this test's own
    quotas = [{"entity": {"topic": topic, "partition": "<default>"}, "producer_byte_rate": QUOTA}]
    settings = {"quota.window.num": WINDOW_NUM, "quota.window.size.seconds": 1}
    with upstream.sidecar(quotas, **settings) as proxy:
        c.kp_create_topic(proxy.bootstrap, topic, 2)
        hot = c.ThrottledWriter(proxy.bootstrap, "hot", (topic,), VALUE, partition=0)
        cold = c.ThrottledWriter(proxy.bootstrap, "cold", (topic,), VALUE, partition=1, per_s=16)  # a quarter of it
        started = time.monotonic()
        with hot, cold:
            wait_until(lambda: len(hot.throttles) >= 3, 30, "the hot partition's writer throttled three times")
            why = wait_until(
                lambda: next((c for c in explained(proxy, "hot", topic, 0)["connections"] if c["muted_by"]), None),
                20,
                "explain showing the hot writer's connection muted by the partition quota",
                interval=0.2,
            )
            assert why["muted_by"] == f"partition_producer_byte_rate (topic {topic} partition 0)"
            wait_until(lambda: cold.acked >= 40, 30, "the cold partition's 40 messages acknowledged")
        elapsed = time.monotonic() - started
        written = partition_metric(proxy, "bytes_total", topic, "<default>")  # both partitions, one series
        hot_written = written - cold.acked * len(VALUE)  # the cold one's values at least are its own
        allowed = QUOTA * (elapsed + WINDOW_NUM - 1) + SLACK  # one partition's quota over the run, its burst included
        print(
            f"written to the hot partition: {hot_written / allowed:.2f} of what its quota allows over {elapsed:.1f} s"
        )
        assert 0 < hot_written <= allowed, f"{hot_written:.0f} bytes written to it, at most {allowed:.0f} allowed"
        assert cold.throttles == [], "the cold partition's writer was throttled: the hot one took its budget"
        assert partition_metric(proxy, "throttled_requests_total", topic, "<default>") > 0
