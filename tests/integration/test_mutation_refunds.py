"""KIP-599 charges what the broker did (issue 23 item 2), with real admin clients, against Tansu and Apache Kafka
(``upstream``).

The issue's scenario: ``controller_mutation_rate`` 2/s for every user (one bucket per user, shared by its client
ids), 10 x 1 s windows (burst 20). One 4-partition create, then twelve "create if absent" calls of the same topic,
each answered TOPIC_ALREADY_EXISTS by the broker: the proxy gives their tokens back, so the bucket stays at 16 and
another client's real 4-partition create passes. Before, the sixth call already got THROTTLING_QUOTA_EXCEEDED.
kafka-python 3 speaks the strict versions (CreateTopics v7); confluent-kafka (librdkafka) the permissive ones.

Against Kafka also a create the broker refuses (INVALID_REPLICATION_FACTOR: replication factor 3 on kafka1's one
node; Tansu has no replication, so refuses nothing of the kind) is given back once the broker has answered.
"""

from __future__ import annotations

import pytest
from kafka.admin import KafkaAdminClient

from tests.kafka_cluster import unique_topic

pytestmark = pytest.mark.integration

TOPIC_ALREADY_EXISTS = 36
INVALID_REPLICATION_FACTOR = 38
THROTTLING_QUOTA_EXCEEDED = 89
QUOTAS = [{"entity": {"user": "<default>"}, "controller_mutation_rate": 2}]
SETTINGS = {"controller.quota.window.num": 10}


def kp_admin(bootstrap: str, client_id: str) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=bootstrap, client_id=client_id, request_timeout_ms=30000)


def new(name: str, partitions: int, replication: int = 1) -> dict:
    return {name: {"num_partitions": partitions, "replication_factor": replication}}


def tokens(proxy) -> float:
    return proxy.metric("kafka_quota_proxy_controller_mutation_tokens", user="ANONYMOUS", client_id="")


def throttled(proxy) -> float:
    return proxy.metric(
        "kafka_quota_proxy_controller_mutation_throttled_requests_total", user="ANONYMOUS", client_id=""
    )


def throttle_seconds(proxy) -> float:
    return proxy.metric(
        "kafka_quota_proxy_controller_mutation_throttle_time_seconds_total", user="ANONYMOUS", client_id=""
    )


def codes(response: dict) -> dict[str, int]:
    return {t["name"]: t["error_code"] for t in response["topics"]}


def listed(bootstrap: str) -> set[str]:
    admin = kp_admin(bootstrap, "kp-lister")
    try:
        return set(admin.list_topics())
    finally:
        admin.close()


def test_create_if_absent_repeated_with_kafka_python_costs_nothing_then_another_clients_create_passes(upstream):
    """On Kafka, between the twelve and the other client's create: a 30-partition create with replication factor 3
    is admitted (16 >= 0), leaves the bucket at -14 until Kafka's answer, then is refunded: so a good topic after it
    in the same request is refused with 89 (the proxy decides before the broker answers; see README, "What the broker
    did"), but the answer carries no throttle and the next request is admitted at once."""
    t, bad, good, other_t = (unique_topic(p) for p in ("ref-t", "ref-bad", "ref-good", "ref-o"))
    try:
        with upstream.sidecar(QUOTAS, **SETTINGS) as proxy:
            first = kp_admin(proxy.bootstrap, "kp-first")
            other = kp_admin(proxy.bootstrap, "kp-other")
            try:
                assert codes(first.create_topics(new(t, 4), raise_errors=False)) == {t: 0}
                for _ in range(12):
                    again = first.create_topics(new(t, 4), raise_errors=False)
                    assert codes(again) == {t: TOPIC_ALREADY_EXISTS}, again  # the broker's answer, passed on
                assert tokens(proxy) >= 16
                if upstream.kafka:
                    mixed = first.create_topics({**new(bad, 30, replication=3), **new(good, 1)}, raise_errors=False)
                    assert codes(mixed) == {bad: INVALID_REPLICATION_FACTOR, good: THROTTLING_QUOTA_EXCEEDED}, mixed
                    assert tokens(proxy) >= 16  # the 30 given back
                    # settled to no throttle time; the request counts as throttled all the same: `good` was refused
                    assert (throttled(proxy), throttle_seconds(proxy)) == (1, 0)
                    assert codes(first.create_topics(new(good, 1), raise_errors=False)) == {good: 0}
                    # not throttled, so not muted (for -14 tokens at 2/s: 7 s)
                    assert (throttled(proxy), throttle_seconds(proxy)) == (1, 0)
                assert codes(other.create_topics(new(other_t, 4), raise_errors=False)) == {other_t: 0}
                # 16 less the other client's 4 (on Kafka also the good topic's 1, and 1 to spare), refilling since
                assert (10 if upstream.kafka else 12) <= tokens(proxy) <= 20
            finally:
                first.close()
                other.close()
            on_broker = listed(upstream.direct(proxy.bootstrap))
            assert {t, other_t} <= on_broker and bad not in on_broker
            assert not upstream.kafka or good in on_broker
    finally:
        upstream.delete_topics([t, bad, good, other_t])


def test_create_if_absent_repeated_with_confluent_kafka_is_not_throttled(upstream):
    """librdkafka's permissive CreateTopics: before, the refused creates took the bucket below 0 and the client was
    throttled and muted (about 14 s in all for the twelve); now it stays at 16 and nothing is throttled."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    ck_t, real = unique_topic("ref-ck"), unique_topic("ref-ck-real")
    try:
        with upstream.sidecar(QUOTAS, **SETTINGS) as proxy:
            admin = AdminClient({"bootstrap.servers": proxy.bootstrap, "client.id": "ck-admin"})
            admin.create_topics([NewTopic(ck_t, 4, 1)], request_timeout=30)[ck_t].result(30)
            for _ in range(12):
                with pytest.raises(KafkaException) as refused:
                    admin.create_topics([NewTopic(ck_t, 4, 1)], request_timeout=30)[ck_t].result(30)
                assert refused.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
            assert tokens(proxy) >= 16
            assert throttled(proxy) == 0
            other = AdminClient({"bootstrap.servers": proxy.bootstrap, "client.id": "ck-other"})
            other.create_topics([NewTopic(real, 4, 1)], request_timeout=30)[real].result(30)
            assert {ck_t, real} <= listed(upstream.direct(proxy.bootstrap))
    finally:
        upstream.delete_topics([ck_t, real])
