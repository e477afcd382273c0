"""Replication through a cluster-mode proxy (Apache Kafka, 3 nodes, replication factor 3, min.insync.replicas 2):
follower fetches are exempt from ``consumer_byte_rate``, as in Kafka (``isFromFollower``).

The layout: every node advertises its REPLICATION listener (the inter-broker one) as the proxy's port for it,
``broker_port_base + node id``, so each follower fetches from its leaders through the proxy. The proxy's upstream
bootstrap is the nodes' DIRECT listeners: cluster mode learns the brokers' real addresses from the Metadata its
bootstrap servers answer, and on REPLICATION they answer with the advertised addresses, the proxy's own ports (the
proxy would forward every connection to itself). Kafka serves a follower's Fetch on any listener (the replica id
and broker epoch say who it is; CLUSTER_ACTION is the only check, and there is no authorizer here), so the
followers reach their leaders through the proxy and the leaders' DIRECT listeners.

Under a consumer_byte_rate of 1 KiB/s for every user (the brokers replicate as ANONYMOUS, like the consumer), 2 MB
are written with acks=all directly: each write waits for every in-sync replica, so it completes (within the
producer's 20 s message timeout) only if both followers fetched it through the proxy, far faster than the quota.
Then every partition's ISR is still all three replicas and each replica of a partition holds the same bytes
(DescribeLogDirs), the proxy carried the followers' fetches (about twice the data written) and counted none of it
against the quota; a consumer through the same proxy listener is throttled, and the ISR stays full meanwhile.
"""

from __future__ import annotations

from collections import defaultdict

import pytest

from tests.harness import cluster_ports, start_proxy, wait_until
from tests.integration import clients as c
from tests.kafka_cluster import KafkaCluster, unique_topic

# Its own three nodes (replication advertised through the proxy): in the kafka1 group, so one worker runs it after
# the other single-node tests rather than beside kafka3's three JVMs (the kafka1 chain is the shorter one).
# Its first test starts the three nodes (``own_cluster``: inside that test's timeout).
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("kafka1"), pytest.mark.own_cluster]

QUOTA = 1024
PARTITIONS = 6
COUNT, SIZE = 1000, 2000


@pytest.fixture(scope="module")
def replicated():
    bootstrap_port, base = cluster_ports()
    cluster = KafkaCluster(3, "kafka3-follower", replication_advertised={n: base + n for n in (1, 2, 3)})
    cluster.start()
    try:
        proxy = start_proxy(
            {
                "upstream": {"bootstrap_servers": [node.direct for node in cluster.nodes]},
                "listeners": [
                    {
                        "name": "PLAINTEXT",
                        "bind": f"127.0.0.1:{bootstrap_port}",
                        "advertised_host": "127.0.0.1",
                        "broker_port_base": base,
                    }
                ],
                "metrics": {"bind": "127.0.0.1:0"},
                "settings": {"quota.window.num": 2, "quota.window.size.seconds": 1},
                "quotas": [{"entity": {"user": "<default>"}, "consumer_byte_rate": QUOTA}],
            }
        )
        try:
            yield cluster, proxy
        finally:
            proxy.stop()
    finally:
        cluster.stop()


def _partitions(admin, topic):
    """The topic's partitions as the cluster describes them (none while a new topic is not in its metadata yet)."""
    described = admin.describe_topics([topic])[0]
    return [] if described["error_code"] else described["partitions"]


def _isr_full(admin, topic) -> bool:
    parts = _partitions(admin, topic)
    return len(parts) == PARTITIONS and all(
        sorted(p["isr_nodes"]) == [1, 2, 3] == sorted(p["replica_nodes"]) for p in parts
    )


def _replica_sizes(admin, topic) -> dict[int, dict[int, int]]:
    sizes: dict[int, dict[int, int]] = defaultdict(dict)  # partition -> broker -> bytes
    for broker in admin.describe_log_dirs([topic]):
        for log_dir in broker["log_dirs"]:
            for described in log_dir["topics"]:
                for part in described["partitions"]:
                    sizes[part["partition_index"]][broker["broker"]] = part["partition_size"]
    return sizes


def test_follower_fetches_through_the_proxy_are_exempt_from_consumer_quotas(replicated):
    from kafka.admin import KafkaAdminClient

    cluster, proxy = replicated
    topic = unique_topic("follower")
    admin = KafkaAdminClient(bootstrap_servers=cluster.direct_bootstrap, client_id="follower-admin")
    try:
        admin.create_topics({topic: {"num_partitions": PARTITIONS, "replication_factor": 3}})
        wait_until(lambda: _isr_full(admin, topic), 60, "every replica of the new topic in sync (through the proxy)")
        records = [(f"k{i % 12}".encode(), i.to_bytes(4, "big") * (SIZE // 4)) for i in range(COUNT)]
        c.ck_produce(cluster.direct_bootstrap, topic, 0, records=records, acks="all", **{"message.timeout.ms": 20000})
        assert _isr_full(admin, topic), _partitions(admin, topic)

        def caught_up():
            sizes = _replica_sizes(admin, topic)
            return (
                len(sizes) == PARTITIONS
                and all(len(s) == 3 and len(set(s.values())) == 1 for s in sizes.values())
                and sizes
            )

        sizes = wait_until(caught_up, 30, "each partition the same size on all three replicas")
        written = sum(next(iter(s.values())) for s in sizes.values())
        assert written >= COUNT * SIZE

        follower_bytes = proxy.scraped_sum("kafka_quota_proxy_response_bytes_total", api="Fetch")
        assert follower_bytes >= 2 * written, "the followers did not replicate through the proxy"
        assert proxy.scraped_sum("kafka_quota_proxy_quota_bytes_total", quota="consumer_byte_rate") == 0
        assert proxy.scraped_sum("kafka_quota_proxy_quota_throttled_responses_total", quota="consumer_byte_rate") == 0

        # the same listener throttles a consumer under the same quota
        got = c.ck_consume(proxy.bootstrap, topic, 50)
        assert sum(len(v) for v in got.values()) >= 50
        wait_until(
            lambda: (
                proxy.scraped_sum("kafka_quota_proxy_quota_throttled_responses_total", quota="consumer_byte_rate") > 0
            ),
            10,
            "the consumer throttled",
        )
        assert proxy.scraped_sum("kafka_quota_proxy_quota_bytes_total", quota="consumer_byte_rate") > 0
        assert _isr_full(admin, topic), _partitions(admin, topic)
        admin.delete_topics([topic])
    finally:
        admin.close()
