"""``quota.scope: cluster`` between cluster-mode proxies (issue 26): two cluster-mode proxies in front of one Tansu
(replicas of one Deployment, each fronting every broker) share the usage topic, so one tenant producing flat out
through both (an aiokafka producer bootstrapping at each proxy) gets about its producer_byte_rate in total, not
once per proxy (without the topic: once per replica). Then one replica stops: its tombstone makes the other forget
it at once, without falling back. Measured figures in the README's "Cluster-wide budgets".
"""

from __future__ import annotations

import time

import pytest

from tests.harness import Tansu, cluster_ports, free_port, start_proxy, wait_until
from tests.integration.clients import kp_create_topic
from tests.integration.cluster_sidecars import MEASURE_S, RATE, TOPIC, USAGE_TOPIC, WARM_UP_S, Producers

pytestmark = [pytest.mark.integration, pytest.mark.measures_rate]


def replica_config(broker_port: int, replica: str, topic: str | None) -> tuple[dict, int]:
    bootstrap, base = cluster_ports()
    settings = {"quota.scope": "cluster", "quota.window.num": 2, "quota.window.size.seconds": 1}
    if topic is not None:
        settings.update(
            {
                "quota.cluster.topic": topic,
                "quota.cluster.id": replica,
                "quota.cluster.sync.ms": 200,
                "quota.cluster.stale.ms": 2000,
            }
        )
    return {
        "upstream": {"bootstrap_servers": [f"127.0.0.1:{broker_port}"]},
        "listeners": [
            {
                "name": "PLAINTEXT",
                "bind": f"127.0.0.1:{bootstrap}",
                "advertised_host": "127.0.0.1",
                "broker_port_base": base,
            }
        ],
        "metrics": {"bind": "127.0.0.1:0"},
        "quotas": [{"entity": {"client-id": "shared"}, "producer_byte_rate": RATE}],
        "settings": settings,
    }, bootstrap


# Without the topic each replica keeps its own budget: about 2 x, 1.58 x seen at load 20 on 2 cores. That case runs
# Kafka's stop-and-go (quota.smoothing is on only with a usage topic): over 2 windows of 1 s a replica admits up to a
# window's worth beyond its rate before it throttles, so a measurement of W seconds reads its budget within 1 / W
# either way by where the pauses fall: 2/3 of it over 3 s, which both replicas read at once in a CI run (0.67 and
# 0.65, 1.32 x in all). It is measured over 6 s (at least 5/6 of each budget).
@pytest.mark.parametrize("topic,low,high,measure_s", [(USAGE_TOPIC, 0.6, 1.5, MEASURE_S), (None, 1.4, 2.6, 6.0)])
def test_one_tenant_through_two_cluster_mode_replicas_gets_its_quota_once_with_the_usage_topic(
    topic, low, high, measure_s
):
    broker_port = free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{broker_port}").start()
    replicas, producers = [], []
    try:
        ports = []
        for name in ("r1", "r2"):
            raw, bootstrap = replica_config(broker_port, name, topic)
            replicas.append(start_proxy(raw, loop_kind="asyncio"))
            ports.append(bootstrap)
        kp_create_topic(f"127.0.0.1:{ports[0]}", TOPIC, 2)
        producers = [Producers("127.0.0.1", port) for port in ports]
        for p in producers:
            p.add()
        start = time.monotonic()
        time.sleep(WARM_UP_S + measure_s)  # deliberate: warm-up and measurement window (a rate group)
        per_replica = [p.rate(start + WARM_UP_S, start + WARM_UP_S + measure_s) for p in producers]
        for p in producers:
            p.stop()
        producers = []
        if topic is not None:
            received = [
                r.metric("kafka_quota_proxy_cluster_usage_records_total", direction="received") for r in replicas
            ]
            assert all(n > 0 for n in received), f"a replica recorded no peer usage: {received}"
            first = replicas[0]
            assert first.metric("kafka_quota_proxy_cluster_usage_peers", state="known") == 1
            replicas.pop().stop()
            wait_until(
                lambda: first.metric("kafka_quota_proxy_cluster_usage_peers", state="known") == 0, 10, "r1 forgets r2"
            )
            assert first.metric("kafka_quota_proxy_cluster_usage_fallback") == 0
    finally:
        for p in producers:
            p.running = False
        for replica in replicas:
            replica.stop()
        broker.stop()
    assert all(share > 0 for share in per_replica), f"a producer got nothing through: {per_replica}"
    total = sum(per_replica)
    print(f"\nusage topic {topic}: {total:.2f} x producer_byte_rate in total ({per_replica})", flush=True)
    assert low <= total <= high, f"usage topic {topic}: {total:.2f} x producer_byte_rate in total ({per_replica})"
