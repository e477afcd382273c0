"""Partition reassignments at PAUSE against Apache Kafka (the running ``kafka3``, three brokers): broker 3's volume
is at its hard limit (snapshots written to a volume-usage topic of this test's own, as the sidecars would publish
them; its one partition on node 1, read through the sidecar under test), and one AlterPartitionReassignments through the sidecar of node 1 moves one partition onto broker 3 and one
off it. The first is refused (POLICY_VIOLATION with the proxy's message) and stays where it is; the second is
carried out by Kafka."""

from __future__ import annotations

import time

import pytest
from kafka import KafkaProducer
from kafka.admin import NewTopic

from proxy.codec.apis import ALTER_PARTITION_REASSIGNMENTS
from proxy.codec.error_codes import NONE, POLICY_VIOLATION
from quota.managers.volume import Limit, Snapshot, Volume
from tests.harness import start_proxy, wait_until
from tests.integration.kafka.quotas_common import configs, delete_topics, direct_admin
from tests.integration.raw import asked
from tests.kafka_cluster import unique_topic

# on the worker that runs kafka3's measurements: the cluster is running there already (no second start)
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("kafka3")]
GB = 1 << 30


def publish(cluster, topic: str, full: int) -> None:
    """A fresh snapshot for each broker; ``full``'s volume past its hard limit."""
    producer = KafkaProducer(bootstrap_servers=cluster.direct_bootstrap)
    try:
        for node in cluster.nodes:
            used = 99 if node.node_id == full else 10
            snapshot = Snapshot(
                node.node_id,
                int(time.time() * 1000),
                Limit("ConsumedSpace", 80 * GB),
                Limit("ConsumedSpace", 95 * GB),
                (Volume("/var/lib/kafka/data", 100 * GB, used * GB),),
            )
            producer.send(topic, key=str(node.node_id).encode(), value=snapshot.to_json())
        producer.flush(30)
    finally:
        producer.close()


def replicas(admin, topic: str) -> dict[int, list[int]]:
    (described,) = admin.describe_topics([topic])
    return {p["partition_index"]: sorted(p["replica_nodes"]) for p in described["partitions"]}


def test_a_reassignment_onto_a_full_broker_is_refused_and_one_off_it_is_carried_out(kafka3):
    one, two, full = (node.node_id for node in kafka3.nodes)
    usage, topic = unique_topic("reassign-usage"), unique_topic("reassign")
    admin = direct_admin(kafka3)
    proxy = None
    try:
        # the usage topic led by node 1: the only sidecar running reads it through itself
        admin.create_topics(
            [
                NewTopic(usage, -1, -1, replica_assignments={0: [one]}),
                NewTopic(topic, -1, -1, replica_assignments={0: [one], 1: [full]}),
            ]
        )
        config = configs(kafka3)[0]
        config["volume_usage"] = {"topic": usage, "freshness_seconds": 600, "missing_data_action": "OPEN"}
        proxy = start_proxy(config)
        publish(kafka3, usage, full)
        wait_until(lambda: proxy.metric("kafka_quota_proxy_volume_state", state="PAUSE") == 1, 30, "PAUSE")
        targets = [{"partition_index": 0, "replicas": [full]}, {"partition_index": 1, "replicas": [two]}]
        answer = asked(
            proxy.port,
            ALTER_PARTITION_REASSIGNMENTS,
            0,
            timeout_ms=30_000,
            topics=[{"name": topic, "partitions": targets}],
        )
        assert answer.error_code == NONE
        results = {p.partition_index: p for t in answer.responses for p in t.partitions}
        assert results[0].error_code == POLICY_VIOLATION and f"broker {full}" in results[0].error_message
        assert results[1].error_code == NONE, results[1].error_message
        wait_until(lambda: replicas(admin, topic) == {0: [one], 1: [two]}, 60, "partition 1 moved off the full broker")
        assert proxy.metric("kafka_quota_proxy_volume_refused_writes_total", api="AlterPartitionReassignments") == 1
    finally:
        if proxy is not None:
            proxy.stop()
        delete_topics(kafka3, [topic, usage])
        admin.close()
