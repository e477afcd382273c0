"""KIP-599 charges what the broker did (issue 23 item 2), against Tansu, with real admin clients.

The issue's scenario: ``controller_mutation_rate`` 2/s for every user (one bucket per user, shared by its client
ids), 10 x 1 s windows (burst 20). One 4-partition create, then twelve "create if absent" calls of the same topic,
each answered TOPIC_ALREADY_EXISTS by Tansu: the proxy gives their tokens back, so the bucket stays at 16 and
another client's real 4-partition create passes. Before, the sixth call already got THROTTLING_QUOTA_EXCEEDED.
kafka-python 3 speaks the strict versions (CreateTopics v7); confluent-kafka (librdkafka) the permissive ones.
"""

from __future__ import annotations

import pytest
from kafka.admin import KafkaAdminClient

from tests.harness import Tansu, free_port, proxy_config, proxy_in_front

pytestmark = pytest.mark.integration

TOPIC_ALREADY_EXISTS = 36


@pytest.fixture
def cluster():
    proxy_port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    quotas = [{"entity": {"user": "<default>"}, "controller_mutation_rate": 2}]
    with proxy_in_front(
        broker, proxy_config(proxy_port, broker_port, quotas=quotas, **{"controller.quota.window.num": 10})
    ) as proxy:
        yield proxy


def tokens(proxy) -> float:
    return proxy.metric("kafka_quota_proxy_controller_mutation_tokens", user="ANONYMOUS", client_id="")


def codes(response: dict) -> dict[str, int]:
    return {t["name"]: t["error_code"] for t in response["topics"]}


def test_create_if_absent_repeated_with_kafka_python_costs_nothing_then_another_clients_create_passes(cluster):
    proxy = cluster
    first = KafkaAdminClient(bootstrap_servers=proxy.bootstrap, client_id="kp-first", request_timeout_ms=30000)
    other = KafkaAdminClient(bootstrap_servers=proxy.bootstrap, client_id="kp-other", request_timeout_ms=30000)
    try:
        created = first.create_topics({"t": {"num_partitions": 4, "replication_factor": 1}}, raise_errors=False)
        assert codes(created) == {"t": 0}, created
        for _ in range(12):
            again = first.create_topics({"t": {"num_partitions": 4, "replication_factor": 1}}, raise_errors=False)
            assert codes(again) == {"t": TOPIC_ALREADY_EXISTS}, again  # Tansu's answer, passed on
        assert tokens(proxy) >= 16
        real = other.create_topics({"u": {"num_partitions": 4, "replication_factor": 1}}, raise_errors=False)
        assert codes(real) == {"u": 0}, real
        assert 12 <= tokens(proxy) <= 20
    finally:
        first.close()
        other.close()


def test_create_if_absent_repeated_with_confluent_kafka_is_not_throttled(cluster):
    """librdkafka's permissive CreateTopics: before, the refused creates took the bucket below 0 and the client was
    throttled and muted (about 14 s in all for the twelve); now it stays at 16 and nothing is throttled."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    proxy = cluster
    admin = AdminClient({"bootstrap.servers": proxy.bootstrap, "client.id": "ck-admin"})
    admin.create_topics([NewTopic("ck", 4, 1)], request_timeout=30)["ck"].result(30)
    for _ in range(12):
        with pytest.raises(KafkaException) as refused:
            admin.create_topics([NewTopic("ck", 4, 1)], request_timeout=30)["ck"].result(30)
        assert refused.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
    assert tokens(proxy) >= 16
    assert (
        proxy.metric("kafka_quota_proxy_controller_mutation_throttled_requests_total", user="ANONYMOUS", client_id="")
        == 0
    )
    other = AdminClient({"bootstrap.servers": proxy.bootstrap, "client.id": "ck-other"})
    other.create_topics([NewTopic("ck-real", 4, 1)], request_timeout=30)["ck-real"].result(30)
