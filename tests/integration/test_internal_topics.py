"""The proxy's internal topics, written by a tenant through the proxy with real clients against Tansu.

A sidecar with a dynamic config, a volume-usage publisher (simulated disk) and ``admin_principals: [User:admin]``;
the tests' clients connect on PLAINTEXT (``User:ANONYMOUS``, not an admin). Every write of an internal topic is
refused with TOPIC_AUTHORIZATION_FAILED, per topic, while the rest of the same request is appended; the proxy's own
publisher, which reaches the broker through the same listener, keeps publishing. CreatePartitions and DeleteRecords
and AddPartitionsToTxn naming only internal topics are answered by the proxy before they reach the broker (Tansu has
no CreatePartitions; the refusal never needs it), sent raw since kafka-python will not send what Tansu does not list.
"""

from __future__ import annotations

import time

import pytest

from config.model import Address
from proxy.app import ProxyApp
from proxy.cluster.kafka_clients import OwnKafka
from proxy.codec.apis import ADD_PARTITIONS_TO_TXN, CREATE_PARTITIONS, DELETE_RECORDS, DELETE_TOPICS, METADATA
from proxy.codec.error_codes import TOPIC_AUTHORIZATION_FAILED
from proxy.codec.primitives import ZERO_UUID
from quota.managers.volume import Volume
from tests.harness import Tansu, free_port, proxy_config, proxy_in_front, wait_until
from tests.integration.raw import connect, exchange

pytestmark = pytest.mark.integration

GB = 1_000_000_000
CONFIG_TOPIC = "__kafka_quota_proxy_configs"
VOLUME_TOPIC = "__kafka_quota_proxy_volume_usage"


@pytest.fixture
def sidecar_with_internal_topics(monkeypatch):
    monkeypatch.setattr(ProxyApp, "volume_source", staticmethod(lambda: [Volume("/data", 100 * GB, 10 * GB)]))
    proxy_port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    raw = proxy_config(
        proxy_port, broker_port, quotas=[{"entity": {"client-id": "<default>"}, "producer_byte_rate": 1_000_000}]
    )
    raw["admin_principals"] = ["User:admin"]
    raw["dynamic_config"] = {"topic": CONFIG_TOPIC}
    raw["volume_usage"] = {
        "freshness_seconds": 5,
        "missing_data_action": "PAUSE",
        "publisher": {
            "broker_id": 111,
            "log_dirs": ["/tmp"],
            "interval_seconds": 0.5,
            "soft_limit": {"type": "MinFreePercentage", "level": 50},
            "hard_limit": {"type": "MinFreePercentage", "level": 10},
        },
    }
    with proxy_in_front(broker, raw) as proxy:
        # the config topic, created as the proxy creates it: one CreateTopics of its own to the upstream broker
        own = OwnKafka((Address("127.0.0.1", broker_port),))
        proxy.call(own.ensure_topic(CONFIG_TOPIC, "kafka-quota-proxy-config"))
        wait_until(lambda: proxy.metric("kafka_quota_proxy_volume_state", state="OPEN") == 1.0, 15, "volume OPEN")
        yield proxy


def refused(proxy, topic: str, api: str) -> float:
    return proxy.metric("kafka_quota_proxy_internal_topic_writes_refused_total", topic=topic, api=api)


def test_a_tenant_producing_to_the_config_topic_is_refused_and_nothing_changes(sidecar_with_internal_topics):
    from kafka import KafkaProducer
    from kafka.errors import TopicAuthorizationFailedError

    proxy = sidecar_with_internal_topics
    producer = KafkaProducer(bootstrap_servers=proxy.bootstrap, client_id="attacker", retries=0)
    try:
        for key, value in (
            (b'{"proxy":"settings"}', b'{"quota.mode":"shadow"}'),
            (b'{"client-id":"attacker"}', b'{"producer_byte_rate":1e12}'),
        ):
            with pytest.raises(TopicAuthorizationFailedError):
                producer.send(CONFIG_TOPIC, key=key, value=value).get(30)
        producer.send(VOLUME_TOPIC, key=b"111", value=b"{}")
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send(VOLUME_TOPIC, key=b"111", value=b"{}").get(30)
    finally:
        producer.close(5)
    assert refused(proxy, CONFIG_TOPIC, "Produce") == 2
    assert refused(proxy, VOLUME_TOPIC, "Produce") >= 1
    time.sleep(1.5)  # what a record would need to be read and applied
    assert proxy.metric("kafka_quota_proxy_quota_shadow_mode") == 0.0  # still enforcing (quota.mode in force)
    assert proxy.metric("kafka_quota_proxy_dynamic_config_entries") == 0  # neither record reached the config topic
    assert proxy.metric("kafka_quota_proxy_volume_state", state="OPEN") == 1.0  # the real snapshots still rule


def test_a_mixed_produce_appends_the_normal_topic_and_refuses_the_internal_one(sidecar_with_internal_topics):
    """confluent-kafka at its defaults batches both topics into the same Produce requests: answered per topic."""
    from confluent_kafka import KafkaError, Producer

    from tests.integration.clients import ck_consume, ck_create_topic

    proxy = sidecar_with_internal_topics
    ck_create_topic(proxy.bootstrap, "orders", 3)
    results: dict[str, list] = {"orders": [], CONFIG_TOPIC: []}
    producer = Producer({"bootstrap.servers": proxy.bootstrap, "linger.ms": 50})
    for i in range(60):
        for topic in ("orders", CONFIG_TOPIC):
            producer.produce(
                topic,
                key=b'{"user":"x"}' if topic == CONFIG_TOPIC else str(i).encode(),
                value=b'{"producer_byte_rate": 1}' if topic == CONFIG_TOPIC else b"v" * 100,
                on_delivery=lambda err, msg: results[msg.topic()].append(err),
            )
    assert producer.flush(60) == 0
    assert results["orders"] == [None] * 60
    assert len(results[CONFIG_TOPIC]) == 60
    assert {err.code() for err in results[CONFIG_TOPIC]} == {KafkaError.TOPIC_AUTHORIZATION_FAILED}
    assert sum(len(v) for v in ck_consume(proxy.bootstrap, "orders", 60).values()) == 60
    assert refused(proxy, CONFIG_TOPIC, "Produce") >= 1


def test_deleting_truncating_or_extending_an_internal_topic_is_refused_per_topic(sidecar_with_internal_topics):
    from kafka.admin import KafkaAdminClient
    from kafka.errors import TopicAuthorizationFailedError

    from tests.integration.clients import kp_create_topic

    proxy = sidecar_with_internal_topics
    kp_create_topic(proxy.bootstrap, "scratch", 1)
    admin = KafkaAdminClient(bootstrap_servers=proxy.bootstrap, client_id="attacker-admin")
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            admin.delete_topics([VOLUME_TOPIC, "scratch"], raise_errors=True)
        topics = admin.list_topics()
        assert VOLUME_TOPIC in topics and "scratch" not in topics  # the normal topic of the same request went
        with pytest.raises(TopicAuthorizationFailedError):
            admin.delete_topics([CONFIG_TOPIC], raise_errors=True)
        assert CONFIG_TOPIC in admin.list_topics()
    finally:
        admin.close()
    # Tansu does not list CreatePartitions (kafka-python would not send it): sent raw, answered by the proxy
    sock = connect(proxy.port)
    try:
        created = exchange(
            sock,
            CREATE_PARTITIONS,
            3,
            topics=[{"name": CONFIG_TOPIC, "count": 4, "assignments": None}],
            timeout_ms=1000,
            validate_only=False,
        )
        assert [(r.name, r.error_code) for r in created.results] == [(CONFIG_TOPIC, TOPIC_AUTHORIZATION_FAILED)]
        deleted = exchange(
            sock,
            DELETE_RECORDS,
            2,
            correlation_id=2,
            timeout_ms=1000,
            topics=[{"name": VOLUME_TOPIC, "partitions": [{"partition_index": 0, "offset": -1}]}],
        )
        assert [(t.name, p.error_code) for t in deleted.topics for p in t.partitions] == [
            (VOLUME_TOPIC, TOPIC_AUTHORIZATION_FAILED)
        ]
        txn = exchange(
            sock,
            ADD_PARTITIONS_TO_TXN,
            3,
            correlation_id=3,
            v3_and_below_transactional_id="t",
            v3_and_below_producer_id=1,
            v3_and_below_producer_epoch=0,
            v3_and_below_topics=[{"name": CONFIG_TOPIC, "partitions": [0]}],
        )
        assert [p.partition_error_code for t in txn.results_by_topic_v3_and_below for p in t.results_by_partition] == [
            TOPIC_AUTHORIZATION_FAILED
        ]
    finally:
        sock.close()
    assert refused(proxy, VOLUME_TOPIC, "DeleteTopics") == 1 and refused(proxy, CONFIG_TOPIC, "DeleteTopics") == 1
    assert refused(proxy, CONFIG_TOPIC, "CreatePartitions") == 1 and refused(proxy, VOLUME_TOPIC, "DeleteRecords") == 1
    assert refused(proxy, CONFIG_TOPIC, "AddPartitionsToTxn") == 1
    age = proxy.metric("kafka_quota_proxy_volume_snapshot_age_seconds", node_id="111")
    assert age < 3  # the proxy's own publisher, through the same listener, still writes its snapshots


def test_delete_topics_v6_by_the_config_topics_id_under_an_innocent_name_is_refused(sidecar_with_internal_topics):
    """Issue 35: Tansu deletes by the id whatever the name; the guard judges the id, and the topic stays."""
    proxy = sidecar_with_internal_topics
    sock = connect(proxy.port)
    try:
        looked = exchange(
            sock,
            METADATA,
            12,
            topics=[{"name": CONFIG_TOPIC}],
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        config_id = looked.topics[0].topic_id
        assert config_id != ZERO_UUID
        deleted = exchange(
            sock,
            DELETE_TOPICS,
            6,
            correlation_id=2,
            timeout_ms=5000,
            topics=[{"name": "made-up", "topic_id": config_id}],
        )
        assert [(r.topic_id, r.error_code) for r in deleted.responses] == [(config_id, TOPIC_AUTHORIZATION_FAILED)]
        again = exchange(
            sock,
            METADATA,
            12,
            correlation_id=3,
            topics=[{"name": CONFIG_TOPIC}],
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        assert [(t.error_code, t.topic_id) for t in again.topics] == [(0, config_id)]  # not deleted, not recreated
    finally:
        sock.close()
    assert refused(proxy, CONFIG_TOPIC, "DeleteTopics") == 1
