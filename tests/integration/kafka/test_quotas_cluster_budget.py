"""A cluster-wide budget across the three sidecars of ``kafka3`` (``settings.quota.scope: cluster`` with
``settings.quota.cluster.topic``): the twin of tests/integration/test_cluster_budget.py (Tansu).

The twin needs three one-broker Tansu clusters and a usage topic reached on broker 1 from every sidecar; here the
three sidecars front one real three-broker cluster, as docker-compose.yml runs them: the usage topic is a topic of
that cluster (created by the first sidecar with the brokers' default replication factor, 3, and
``min.insync.replicas`` 2), each sidecar's own clients reach its leader through the leader's sidecar, and the
tenant's partitions are led by all three brokers, so each of its producers writes through every sidecar. The usage
topic has a name of its own (the cluster is shared with other tests) and is deleted afterwards.

The tenant: three confluent-kafka producers (client id ``shared``), each bootstrapped through another sidecar, with
their local queues kept full over 6 partitions (acks=all), 64 KiB batches. Admitted = what they had acknowledged
over 8 s, measured once the start's debt is paid (each sidecar starts with a full bucket and admits what is queued
before it sees the others; see README, "Cluster-wide budgets"): from the first second after a stall that admitted at
least half the quota (tests/integration/clients.steady_after_debt; at 20 s at the latest). With no sharing each sidecar would let the tenant through at its
quota, about 3 x in total, and there would be no debt to wait for.

The test creates the usage topic itself (compacted, one partition, as the proxy would), led by broker 3, whose
sidecar ``cluster.sidecars`` stops last: when its leader sits behind a sidecar already stopped, the tombstone each
later sidecar sends on the way out cannot be delivered, and although the proxy gives it up after a second (README,
"Cluster-wide budgets"), its aiokafka producer's stop still waits to flush it until the 5 s bound of
``stop_client`` (6 s more per sidecar, and the producer's tasks left on the loop: "Task was destroyed but it is
pending" at exit).
"""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest
from kafka.admin import NewTopic

from tests.harness import wait_until
from tests.integration.clients import flat_out_into, steady_after_debt
from tests.integration.kafka.quotas_common import configs, delete_topics, direct_admin, topics
from tests.kafka_cluster import unique_topic

pytestmark = pytest.mark.integration

RATE = 2_000_000  # producer_byte_rate, bytes/s
# the window: a token bucket may admit its one second of burst after any slow second (a loaded machine stalling
# the clients), so a window of W seconds can read (W + 1) / W x the quota with the proxy exactly right: 1.25 x
# over 4 s (a make test run read 1.24 x there, the seconds around it 0.58, 0.42, 0.61, 2.08: 0.92 x in all),
# 1.125 x over 8 s, within the bound
MEASURE_S = 8.0
# throttle seconds applied a second, summed over the sidecars' connections (each producer has one to each),
# below which a total short of the quota is not the sidecars' doing
HELD_IF_SHORT = 0.5
# measured from here if no steady second followed a stall (no sharing: no debt to pay). On a starved machine the
# usage reaches the peers seconds late, the start's burst is larger (2-5 x the quota a second for 6 s, measured
# beside ten busy loops at normal priority) and its debt took until the 15th second to pay: from the 10th, the
# window read 0.34 x, the proxy exactly right
LATEST_START_S = 20.0


@pytest.mark.measures_rate(group="kafka3")  # a rate through three sidecars sharing usage on time
def test_one_tenant_through_three_sidecars_gets_its_quota_once(kafka3):
    cluster = kafka3
    usage_topic = unique_topic("__kafka_quota_proxy_usage")
    sidecar_configs = configs(
        cluster,
        [{"entity": {"client-id": "shared"}, "producer_byte_rate": RATE}],
        **{
            "quota.scope": "cluster",
            "quota.smoothing": "on",
            "quota.cluster.topic": usage_topic,
            "quota.cluster.sync.ms": 250,  # quota.cluster.stale.ms as shipped, 10 s: at 2 s, CI's loaded machine
            # delayed the usage topic past it again and again, each sidecar falling back to its share and back
            "shutdown.grace.period.ms": 500,
        },
    )
    for index, config in enumerate(sidecar_configs, 1):
        config["settings"]["quota.cluster.id"] = f"sidecar-{index}"
        config["admin_principals"] = ["User:ANONYMOUS"]  # a sidecar's own clients write the usage topic through
        # the leader's sidecar, which takes them for any client (PLAINTEXT: ANONYMOUS)
    admin = direct_admin(cluster)
    try:
        admin.create_topics(
            [NewTopic(usage_topic, replica_assignments={0: [3, 1, 2]}, topic_configs={"cleanup.policy": "compact"})]
        )
    finally:
        admin.close()
    halt = threading.Event()
    clients: list[threading.Thread] = []
    try:
        with topics(cluster, "tenant", partitions=6) as (topic,), cluster.sidecars(configs=sidecar_configs) as proxies:
            t0 = time.monotonic()
            acked = [Counter() for _ in proxies]
            clients = [
                threading.Thread(target=flat_out_into, args=(proxy.bootstrap, topic, t0, into, halt), daemon=True)
                for proxy, into in zip(proxies, acked)
            ]
            for client in clients:
                client.start()
            # each sidecar starts with a full bucket and admits what its clients have queued before it sees the
            # others' usage (about 6-7 x the quota in the first 3-4 s, measured), which all of them then pay back
            # (clients.steady_after_debt): measured from the first steady second after that
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
            held_from, read_from = throttle_seconds(proxies), time.monotonic()
            time.sleep(
                max(0.0, t0 + started + MEASURE_S + 0.5 - time.monotonic())
            )  # deliberate: the measurement window
            held = (sum(throttle_seconds(proxies)) - sum(held_from)) / (time.monotonic() - read_from)
            received = [
                p.metric("kafka_quota_proxy_cluster_usage_records_total", direction="received") for p in proxies
            ]
            admitted = [
                p.metric("kafka_quota_proxy_quota_bytes_total", quota="producer_byte_rate", user="", client_id="shared")
                for p in proxies
            ]
            halt.set()
            for client in clients:
                client.join(15)
    finally:
        halt.set()
        delete_topics(cluster, [usage_topic])
    start, end = int(started * 10), int((started + MEASURE_S) * 10)
    shares = [sum(into[tenth] for tenth in range(start, end)) / MEASURE_S / RATE for into in acked]
    total = sum(shares)
    seconds = [
        round(sum(into[t] for into in acked for t in range(10 * k, 10 * k + 10)) / RATE, 2)
        for k in range(int(started + MEASURE_S))
    ]
    print(
        f"from {started:.1f} s: total {total:.2f} x ({[round(s, 2) for s in shares]}); each second: {seconds}; "
        f"throttle applied {held:.2f} s a second"
    )
    assert all(n > 0 for n in received), f"a sidecar recorded no peer's usage: {received}"
    assert all(n > 0 for n in admitted), f"a sidecar admitted nothing of the tenant's: {admitted}"
    assert all(sum(into.values()) for into in acked), "a producer got nothing through"
    said = f"{total:.2f} x producer_byte_rate in total through three sidecars ({shares}); each second: {seconds}"
    assert total <= 1.2, said
    # below the quota, the sidecars must not have been what held the tenant back: a sidecar that charged twice
    # or shared wrongly throttles its connections for much of each second; a machine too busy to carry the
    # tenant's bytes (a make test run in CI read 0.64 x, its first 4 s at 0.0-0.1 x with three full buckets)
    # leaves their buckets full and throttles nothing
    assert total >= 0.8 or held < HELD_IF_SHORT, f"{said}; throttle applied {held:.2f} s a second"


def throttle_seconds(proxies) -> list[float]:
    """The throttle time each sidecar has applied to the tenant so far (seconds)."""
    return [
        p.metric(
            "kafka_quota_proxy_quota_throttle_time_seconds_total",
            quota="producer_byte_rate",
            user="",
            client_id="shared",
        )
        for p in proxies
    ]
