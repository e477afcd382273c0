"""Issue 26's three sidecars: one tenant producing flat out through three sidecar proxies, each in front of its own
broker, gets its ``producer_byte_rate`` once in total under ``quota.scope: cluster`` (``bench/cluster_budget.py``
measures the same at length, with the shift to one sidecar and a sidecar stopped).

Three Tansu brokers, each a one-broker cluster with its own in-memory storage (Tansu cannot share one between
brokers), each advertising its sidecar's port; three proxies (in-process, as the harness runs them) in front of
them, sharing one usage topic on broker 1: sidecars 2 and 3 reach it there (``ProxyApp.usage_kafka``), through
sidecar 1 (broker 1 advertises it), which lets them write it (``admin_principals``), as a real cluster's sidecars
reach the topic's leader through its sidecar. ``quota.smoothing: on``, as README's "Cluster-wide budgets" advises
with ``cluster``. The tenant: three confluent-kafka producers (client id ``shared``), one per sidecar, each with
its local queue kept full over 6 partitions, 64 KiB batches (finer than the default 1 MB ones, so a few seconds
measure the rate and not the grain). Admitted = what they had acknowledged. The bounds are generous (a rate on a
shared machine); with no sharing the total is about 3 x, with Kafka's sampled rate (smoothing off) the first 10 s are
a burst of several times the quota, and both fail.
"""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest

from config.model import Address
from proxy.cluster.kafka_clients import OwnKafka
from tests.harness import Tansu, free_port, start_proxy, wait_until
from tests.integration.clients import flat_out_into, steady_after_debt

pytestmark = [pytest.mark.integration, pytest.mark.measures_rate]

RATE = 2_000_000  # producer_byte_rate, bytes/s
TOPIC = "tenant"
USAGE_TOPIC = "__kafka_quota_proxy_usage"
# Past the start: each sidecar lets a full bucket (one second of the quota) and more through before it sees the others
# (about 5.7 x the quota in the first second, measured quiet; 6.3 x in a full make test beside the Kafka tests), then
# all three pay that debt back (about 4 s with nothing admitted, more on a busy machine): measured from the first
# steady second after that (clients.steady_after_debt), at LATEST_START_S at the latest
LATEST_START_S = 20.0  # a starved machine lengthens the debt (tests/integration/kafka/test_quotas_cluster_budget.py)
# the window: a token bucket may admit its one second of burst after any slow second (a loaded machine stalling
# the clients), so a window of W seconds can read (W + 1) / W x the quota with the proxy exactly right: 1.25 x
# over 4 s (a make test run read 1.24 x there, the seconds around it 0.58, 0.42, 0.61, 2.08: 0.92 x in all),
# 1.125 x over 8 s, within the bound
MEASURE_S = 8.0


def sidecar_config(port: int, broker_port: int, index: int) -> dict:
    return {
        "upstream": {"bootstrap_servers": [f"127.0.0.1:{broker_port}"]},
        "listeners": [{"name": "PLAINTEXT", "bind": f"127.0.0.1:{port}"}],
        "metrics": {"bind": "127.0.0.1:0"},
        "quotas": [{"entity": {"client-id": "shared"}, "producer_byte_rate": RATE}],
        "admin_principals": ["User:ANONYMOUS"],
        "settings": {
            "quota.scope": "cluster",
            "quota.smoothing": "on",
            "quota.cluster.topic": USAGE_TOPIC,
            "quota.cluster.id": f"sidecar-{index}",
            "quota.cluster.sync.ms": 250,
            "quota.cluster.stale.ms": 2000,
            "shutdown.grace.period.ms": 500,
        },
    }


def test_one_tenant_through_three_sidecars_gets_its_quota_once():
    from confluent_kafka.admin import AdminClient, NewTopic

    ports = [(free_port(), free_port()) for _ in range(3)]  # (sidecar, broker)
    brokers, proxies = [], []
    usage = OwnKafka((Address("127.0.0.1", ports[0][1]),))
    halt = threading.Event()
    clients = []
    try:
        for port, broker_port in ports:
            brokers.append(Tansu(broker_port, advertised=f"127.0.0.1:{port}").start())
        for index, (port, broker_port) in enumerate(ports, 1):

            def prepare(app, first=index == 1):
                if not first:
                    app.usage_kafka = usage

            proxies.append(start_proxy(sidecar_config(port, broker_port, index), loop_kind="asyncio", prepare=prepare))
        for port, _ in ports:
            admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}", "client.id": "admin"})
            admin.create_topics([NewTopic(TOPIC, 6, 1)])[TOPIC].result(30)
        t0 = time.monotonic()
        acked = [Counter() for _ in ports]
        clients = [
            threading.Thread(target=flat_out_into, args=(f"127.0.0.1:{port}", TOPIC, t0, into, halt), daemon=True)
            for (port, _), into in zip(ports, acked)
        ]
        for client in clients:
            client.start()
        started = (
            wait_until(
                lambda: (
                    steady_after_debt(acked, int((time.monotonic() - t0) * 10), RATE)
                    or (time.monotonic() - t0 > LATEST_START_S and int(LATEST_START_S * 10))
                ),
                LATEST_START_S + 1,
                "the start's debt paid",
            )
            / 10
        )
        time.sleep(max(0.0, t0 + started + MEASURE_S + 0.5 - time.monotonic()))  # deliberate: the measurement window
        received = [p.metric("kafka_quota_proxy_cluster_usage_records_total", direction="received") for p in proxies]
    finally:
        halt.set()
        for client in clients:
            client.join(15)
        for proxy in proxies:
            proxy.stop()
        for broker in brokers:
            broker.stop()
    start, end = int(started * 10), int((started + MEASURE_S) * 10)
    shares = [sum(into[tenth] for tenth in range(start, end)) / MEASURE_S / RATE for into in acked]
    total = sum(shares)
    assert all(n > 0 for n in received), f"a sidecar recorded no peer's usage: {received}"
    assert all(sum(into.values()) for into in acked), "a sidecar's clients got nothing through"
    seconds = [
        round(sum(into[t] for into in acked for t in range(10 * k, 10 * k + 10)) / RATE, 2)
        for k in range(int(started + MEASURE_S))
    ]
    assert 0.8 <= total <= 1.2, (
        f"{total:.2f} x producer_byte_rate in total through three sidecars ({shares}) "
        f"from {started:.1f} s; "
        f"each second: {seconds}"
    )
