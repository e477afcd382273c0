"""What the proxy did differently, or could not be seen doing, while its only broker was Tansu.

- The proxy's own topics. It created them with replication factor 1 (aiokafka's admin client speaks CreateTopics
  v0-3, which cannot ask for the broker's default): on the compose layout's three nodes with
  ``min.insync.replicas`` 2 the config topic then lived on one broker, lost with it, and every ``acks=all`` write to
  it was refused. Tansu, with no replication, could not show it. Needs Apache Kafka (three nodes).
- ``acks=0``. Apache Kafka sends no response to an ``acks=0`` Produce; Tansu sends one. The proxy learns which
  kind of broker it fronts per connection (proxy/connection/inflight.py); here the silent kind, with a pipelined
  client that mixes ``acks=0`` and ``acks=1`` on one connection.
"""

from __future__ import annotations

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType

from tests.harness import wait_until
from tests.integration.quota_apis import described
from tests.kafka_cluster import CONFIGS, unique_topic

pytestmark = pytest.mark.integration

CONFIG_TOPIC = "__kafka_quota_proxy_configs"  # the default dynamic_config.topic


def describe_topic(bootstrap: str, topic: str) -> tuple[int, str]:
    """(replication factor of partition 0, cleanup.policy) as the broker says."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        described = admin.describe_topics([topic])[0]
        replicas = len(described["partitions"][0]["replica_nodes"])
        configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
        entries = next(iter(configs.values()))[topic]
        policy = entries["cleanup.policy"]
        return replicas, policy["value"] if isinstance(policy, dict) else policy
    finally:
        admin.close()


def test_the_proxys_config_topic_takes_the_clusters_replication_and_acks_all_writes_succeed(kafka3):
    """Three sidecars on three nodes (replication factor 3, min.insync.replicas 2, as docker-compose.yml): the config
    topic the proxies create is replicated as the cluster's default says and compacted; a quota altered with Kafka's
    own kafka-configs through one sidecar (the proxy writes it with acks=all) is in force on all three."""
    settings = {}
    configs = [dict(kafka3.sidecar_config(node), admin_principals=["User:ANONYMOUS"]) for node in kafka3.nodes]
    with kafka3.sidecars(configs=configs, **settings) as proxies:
        wait_until(
            lambda: all(p.metric("kafka_quota_proxy_dynamic_config_available") == 1 for p in proxies),
            30,
            "every sidecar follows the config topic",
        )
        replicas, policy = describe_topic(kafka3.direct_bootstrap, CONFIG_TOPIC)
        assert (replicas, policy) == (3, "compact")
        client = f"tansu-hid-{unique_topic('c')}"
        kafka3.tool(
            CONFIGS,
            "--bootstrap-server",
            proxies[0].bootstrap,
            "--alter",
            "--entity-type",
            "clients",
            "--entity-name",
            client,
            "--add-config",
            "producer_byte_rate=4096",
        )

        def limits():  # what each sidecar describes, from the configuration its managers hold
            return [described(p.bootstrap, {"client-id": client}) for p in proxies]

        wait_until(
            lambda: limits() == [{"producer_byte_rate": 4096}] * 3, 15, "the new quota in force on every sidecar"
        )
        kafka3.tool(
            CONFIGS,
            "--bootstrap-server",
            proxies[0].bootstrap,
            "--alter",
            "--entity-type",
            "clients",
            "--entity-name",
            client,
            "--delete-config",
            "producer_byte_rate",
        )


def test_acks0_and_acks1_pipelined_on_one_connection_to_a_broker_that_never_answers_acks0(kafka1):
    """kafka-python, 5 requests in flight, 3 partitions: 2,000 acks=0 records then 500 acks=1 records on new
    producers, then an acks=0 producer's last records flushed by closing. The broker is silent for acks=0; every
    record arrives, no request of the acks=1 producer times out, and the sidecar closed no connection for a
    correlation mismatch."""
    topic = unique_topic("acks0")
    admin = KafkaAdminClient(bootstrap_servers=kafka1.direct_bootstrap)
    from kafka.admin import NewTopic

    admin.create_topics([NewTopic(topic, 3, 1)])
    admin.close()
    with kafka1.sidecars() as (proxy,):
        silent = KafkaProducer(bootstrap_servers=proxy.bootstrap, acks=0, linger_ms=0, batch_size=512)
        for i in range(2000):
            silent.send(topic, b"a%05d" % i, partition=i % 3)
        silent.flush()
        acked = KafkaProducer(
            bootstrap_servers=proxy.bootstrap,
            acks=1,
            linger_ms=0,
            batch_size=512,
            max_in_flight_requests_per_connection=5,
        )
        futures = [acked.send(topic, b"b%05d" % i, partition=i % 3) for i in range(500)]
        acked.flush()
        assert all(f.get(timeout=30).offset >= 0 for f in futures)
        silent.close()
        acked.close()
        consumer = KafkaConsumer(
            bootstrap_servers=proxy.bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
        )
        partitions = [TopicPartition(topic, p) for p in range(3)]
        consumer.assign(partitions)
        seen = set()
        wait_until(
            lambda: seen.update(r.value for rs in consumer.poll(500).values() for r in rs) or len(seen) == 2500,
            60,
            "every record consumed",
        )
        consumer.close()
        assert seen == {b"a%05d" % i for i in range(2000)} | {b"b%05d" % i for i in range(500)}
        for reason in ("broker_protocol_error", "frame_error", "upstream_timeout"):
            assert proxy.metric("kafka_quota_proxy_connections_closed_total", listener="PLAINTEXT", reason=reason) == 0
