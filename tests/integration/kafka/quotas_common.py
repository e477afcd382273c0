"""What the quota tests against Apache Kafka (tests/integration/kafka/test_quotas_*.py) share.

Their sidecar proxies run with the dynamic config off (``dynamic_config: {enabled: false}``): the clusters are
shared by every Kafka test of a worker, and a quota another test left in the config topic (or the topic's creation
itself) must not change what these measure. Topics are made directly at the brokers (no proxy, no quota) with a
unique name and deleted at the end, so the next test finds the cluster as it was.
"""

from __future__ import annotations

import re
import subprocess
from contextlib import contextmanager

from kafka.admin import KafkaAdminClient, NewTopic

from tests.harness import wait_until
from tests.kafka_cluster import KafkaCluster, unique_topic


def configs(cluster: KafkaCluster, quotas: list | None = None, **settings) -> list[dict]:
    """One sidecar config per node, as ``cluster.sidecars`` makes them, with the dynamic config off."""
    out = []
    for node in cluster.nodes:
        config = cluster.sidecar_config(node, quotas, **settings)
        config["dynamic_config"] = {"enabled": False}
        out.append(config)
    return out


def direct_admin(cluster: KafkaCluster) -> KafkaAdminClient:
    return KafkaAdminClient(
        bootstrap_servers=cluster.direct_bootstrap, client_id="kafka-quota-tests-admin", request_timeout_ms=30000
    )


def delete_topics(cluster: KafkaCluster, names) -> None:
    """Delete ``names`` at the brokers (those that exist) and wait until the metadata no longer lists them."""
    admin = direct_admin(cluster)
    try:
        present = set(admin.list_topics())
        doomed = [name for name in names if name in present]
        if doomed:
            admin.delete_topics(doomed, raise_errors=False)
        wait_until(lambda: not set(doomed) & set(admin.list_topics()), 30, f"topics {doomed} deleted")
    finally:
        admin.close()


@contextmanager
def topics(cluster: KafkaCluster, prefix: str, count: int = 1, partitions: int = 1):
    """``count`` new topics (unique names, ``partitions`` each, the cluster's default replication), made directly at
    the brokers; deleted when the block ends. Yields their names."""
    names = [unique_topic(f"{prefix}{i}" if count > 1 else prefix) for i in range(count)]
    create_directly(cluster, names, partitions)
    try:
        yield names
    finally:
        delete_topics(cluster, names)


def create_directly(cluster: KafkaCluster, names: list[str], partitions: int) -> None:
    """``names`` created at the brokers (``partitions`` each, the cluster's default replication), once every broker
    knows them: before a client through a proxy asks."""
    admin = direct_admin(cluster)
    try:
        admin.create_topics([NewTopic(name, partitions, -1) for name in names])
        wait_until(lambda: set(names) <= set(admin.list_topics()), 30, f"topics {names} created")
    finally:
        admin.close()


def end_offsets(cluster: KafkaCluster, topic: str) -> int:
    """The records in ``topic`` (the sum of its partitions' end offsets), asked directly."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=cluster.direct_bootstrap, client_id="kafka-quota-tests-offsets")
    try:
        partitions = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or ()]
        return sum(consumer.end_offsets(partitions).values())
    finally:
        consumer.close()


def java_producer(
    cluster: KafkaCluster,
    bootstrap: str,
    topic: str,
    records: int,
    client_id: str,
    *properties: str,
    record_size: int = 1000,
) -> subprocess.Popen:
    """Kafka's ProducerPerformance (kafka-producer-perf-test.sh), flat out (``--throughput -1``), with the Java
    producer's default settings plus ``properties`` (``key=value``); its output is read by :func:`perf_summary`."""
    from tests.kafka_cluster import PRODUCER_PERF

    command = cluster.java(
        PRODUCER_PERF,
        "--topic",
        topic,
        "--num-records",
        str(records),
        "--record-size",
        str(record_size),
        "--throughput",
        "-1",
        "--command-property",
        f"bootstrap.servers={bootstrap}",
        f"client.id={client_id}",
        *properties,
    )
    return subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )


_SUMMARY = re.compile(
    r"^(\d+) records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, "
    r"[\d.]+ ms max latency, \d+ ms 50th",
    re.M,
)


def perf_summary(proc: subprocess.Popen, timeout: float) -> tuple[int, str]:
    """Wait for a ProducerPerformance run to end; (records its final summary says were sent, its whole output).
    The tool counts a record as sent when the broker acknowledged it (its callback without an exception)."""
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate(10)
        raise AssertionError(f"ProducerPerformance still running after {timeout} s:\n{out[-3000:]}") from None
    assert proc.returncode == 0, f"ProducerPerformance exited {proc.returncode}:\n{out[-3000:]}"
    found = _SUMMARY.findall(out)
    assert found, f"no summary line in ProducerPerformance's output:\n{out[-3000:]}"
    return int(found[-1]), out
