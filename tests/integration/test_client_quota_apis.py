"""DescribeClientQuotas and AlterClientQuotas served by the proxy (Tansu has no client-quota APIs: it closes the
connection), sent by kafka-python's admin client over its own connection manager with kafka-python's own protocol
classes (KafkaAdminClient has no client-quota method; confluent-kafka's Python AdminClient has none either, and the
Java kafka-configs.sh cannot be run here). The proxy advertises both APIs in ApiVersions, authorizes alters by
admin_principals, and applies what it writes to live traffic within a second."""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request

import pytest

from analytics import in_force
from tests.harness import wait_until
from tests.integration.quota_apis import alter, describe, described, entries_of, op, send, start

pytestmark = pytest.mark.integration

NONE, CLUSTER_AUTHORIZATION_FAILED, UNSUPPORTED_VERSION, INVALID_REQUEST = 0, 31, 35, 42


def entity(**parts) -> list:
    return [{"entity_type": kind.replace("_", "-"), "entity_name": name} for kind, name in parts.items()]


def test_alter_and_describe_through_the_proxy_take_effect():
    proxy, broker = start(["User:ANONYMOUS"])
    try:
        response = send(
            proxy.bootstrap,
            alter(
                [
                    {"entity": entity(client_id="etl"), "ops": [op("producer_byte_rate", 1048576)]},
                    {"entity": entity(ip="10.0.0.9"), "ops": [op("connection_creation_rate", 3)]},
                    {"entity": entity(user="bob"), "ops": [op("colour", 1)]},  # unknown key
                    {"entity": entity(ip="10.0.0.1", user="bob"), "ops": [op("producer_byte_rate", 1)]},
                    {"entity": entity(topic="orders"), "ops": [op("producer_byte_rate", 65536)]},
                ]
            ),
        )
        codes = [e.error_code for e in response.entries]
        assert codes == [NONE, NONE, INVALID_REQUEST, INVALID_REQUEST, NONE], response
        assert "colour" in response.entries[2].error_message
        # in force through the config topic (how soon: test_dynamic_config.py's rate-group test)
        wait_until(
            lambda: described(proxy.bootstrap, {"client-id": "etl"}) == {"producer_byte_rate": 1048576},
            15,
            "etl's producer_byte_rate in force",
        )
        # the connection quotas' own limit for the IP, as /metrics shows it
        assert proxy.scraped("kafka_quota_proxy_ip_connection_creation_rate_limit") == {(("ip", "10.0.0.9"),): 3}
        # a topic entity (entity type "topic"): in the topic quotas, as /explain shows them
        wait_until(
            lambda: described(proxy.bootstrap, {"topic": "orders"}) == {"producer_byte_rate": 65536},
            15,
            "the topic's producer_byte_rate in force",
        )
        query = urllib.parse.urlencode({"client_id": "any", "ip": "127.0.0.1", "topic": "orders"})
        with urllib.request.urlopen(f"http://127.0.0.1:{proxy.metrics_port}/explain?{query}", timeout=10) as got:
            found = [f for f in json.loads(got.read())["answers"][0]["findings"] if f["scope"] == "topic orders"]
        assert [(f["quota"], f["limit"], f["entity"]) for f in found if f["limit"]] == [
            ("producer_byte_rate", 65536, "/topics/orders")
        ]
        everything = entries_of(send(proxy.bootstrap, describe([])))
        assert everything[(("client-id", "etl"),)] == {"producer_byte_rate": 1048576.0}
        assert everything[(("user", None),)] == {"consumer_byte_rate": 5000000.0}  # the YAML's default user
        assert everything[(("ip", "10.0.0.9"),)] == {"connection_creation_rate": 3.0}
        # the quota planner's table in force (analyze --bootstrap, the configs command's requests): a key with the
        # file's value read as the file's, the others as the config topic's (removed with configs --delete-config)
        file = in_force.from_file("proxy.yaml", [{"entity": {"user": "<default>"}, "consumer_byte_rate": 5000000}])
        table = in_force.with_described(file, in_force.describe(proxy.bootstrap), proxy.bootstrap)
        assert {"entity": {"client-id": "etl"}, "producer_byte_rate": 1048576.0} in table.items
        assert {"entity": {"ip": "10.0.0.9"}, "connection_creation_rate": 3.0} in table.items
        assert table.origins[((("client-id", "etl"),), "producer_byte_rate")] == in_force.TOPIC
        assert table.origins[((("user", "<default>"),), "consumer_byte_rate")] == in_force.FILE
        defaults = entries_of(
            send(proxy.bootstrap, describe([{"entity_type": "user", "match_type": 1, "match": None}], strict=True))
        )
        assert list(defaults) == [(("user", None),)]
        mixed = send(
            proxy.bootstrap,
            describe(
                [
                    {"entity_type": "ip", "match_type": 2, "match": None},
                    {"entity_type": "user", "match_type": 2, "match": None},
                ]
            ),
        )
        assert mixed.error_code == INVALID_REQUEST
        # validate_only: checked, answered, not written
        check = send(
            proxy.bootstrap,
            alter([{"entity": entity(client_id="etl"), "ops": [op("producer_byte_rate", 1)]}], validate_only=True),
        )
        assert [e.error_code for e in check.entries] == [NONE]
        # a later write in force means everything written before it was read (one partition, in order)
        later = send(
            proxy.bootstrap, alter([{"entity": entity(client_id="later"), "ops": [op("producer_byte_rate", 2048)]}])
        )
        assert [e.error_code for e in later.entries] == [NONE]
        wait_until(
            lambda: described(proxy.bootstrap, {"client-id": "later"}) == {"producer_byte_rate": 2048},
            15,
            "the later write in force",
        )
        assert described(proxy.bootstrap, {"client-id": "etl"}) == {"producer_byte_rate": 1048576}
        removed = send(
            proxy.bootstrap, alter([{"entity": entity(client_id="etl"), "ops": [op("producer_byte_rate", None)]}])
        )
        assert [e.error_code for e in removed.entries] == [NONE]
        wait_until(
            lambda: described(proxy.bootstrap, {"client-id": "etl"}) == {}, 15, "etl's producer_byte_rate removed"
        )
    finally:
        proxy.stop()
        broker.stop()


def test_alter_is_refused_to_principals_not_in_admin_principals():
    proxy, broker = start([])
    try:
        response = send(
            proxy.bootstrap, alter([{"entity": entity(client_id="etl"), "ops": [op("producer_byte_rate", 1)]}])
        )
        assert [e.error_code for e in response.entries] == [CLUSTER_AUTHORIZATION_FAILED]
        assert "admin_principals" in response.entries[0].error_message
        time.sleep(0.5)  # deliberate: time a write would take to be in force; nothing was written, nothing must be
        assert described(proxy.bootstrap, {"client-id": "etl"}) == {}  # describe is open to everyone
        assert entries_of(send(proxy.bootstrap, describe([])))
    finally:
        proxy.stop()
        broker.stop()


def test_both_apis_are_advertised_although_the_broker_has_neither():
    from tests.integration import raw

    proxy, broker = start([])
    try:
        with raw.connect(proxy.port) as sock:
            response = raw.exchange(sock, 18, 3, client_software_name="t", client_software_version="1")
        advertised = {api.api_key: (api.min_version, api.max_version) for api in response.api_keys}
        assert advertised[48] == (0, 1) and advertised[49] == (0, 1)
        with raw.connect(broker.port) as sock:  # Tansu itself lists neither
            direct = raw.exchange(sock, 18, 3, client_software_name="t", client_software_version="1")
        assert not {48, 49} & {api.api_key for api in direct.api_keys}
    finally:
        proxy.stop()
        broker.stop()


def test_request_percentage_is_refused_with_a_reason_when_the_broker_has_no_client_quota_apis():
    """request_percentage is the brokers' to enforce (KIP-124); Tansu has no AlterClientQuotas, so the proxy sends it
    nothing (Tansu would close the connection) and answers that entry UNSUPPORTED_VERSION naming the key, while the
    proxy's own entry of the same request is applied; the connection stays open: a raw client that never sent
    ApiVersions gets the same answer (the proxy asks the broker's versions itself), then a describe on it."""
    from tests.integration import raw

    proxy, broker = start(["User:ANONYMOUS"])
    try:
        response = send(
            proxy.bootstrap,
            alter(
                [
                    {"entity": entity(client_id="etl"), "ops": [op("request_percentage", 50)]},
                    {"entity": entity(client_id="batch"), "ops": [op("producer_byte_rate", 4096)]},
                ]
            ),
        )
        assert [e.error_code for e in response.entries] == [UNSUPPORTED_VERSION, NONE], response
        assert "request_percentage: enforced by the brokers" in response.entries[0].error_message
        wait_until(
            lambda: described(proxy.bootstrap, {"client-id": "batch"}) == {"producer_byte_rate": 4096},
            15,
            "the proxy's own entry applied",
        )
        with raw.connect(proxy.port) as sock:
            answered = raw.exchange(
                sock,
                49,
                0,
                validate_only=False,
                entries=[
                    {
                        "entity": [{"entity_type": "client-id", "entity_name": "etl"}],
                        "ops": [{"key": "request_percentage", "value": 50.0, "remove": False}],
                    }
                ],
            )
            assert [e.error_code for e in answered.entries] == [UNSUPPORTED_VERSION], answered
            listed = raw.exchange(sock, 48, 0, components=[], strict=False, correlation_id=2)
        assert {tuple((e.entity_type, e.entity_name) for e in x.entity) for x in listed.entries} >= {
            (("client-id", "batch"),)
        }
        assert "request_percentage" not in str(entries_of(send(proxy.bootstrap, describe([]))))
    finally:
        proxy.stop()
        broker.stop()


def test_kafkas_java_admin_client_sets_a_topic_quota_as_entity_type_topic():
    """Kafka's own Java admin client (4.x, from the jars the Kafka tests use), on Tansu: ``alterClientQuotas`` of a
    ``ClientQuotaEntity`` of type ``topic`` goes through the proxy unchanged, is written to the config topic and
    described back by ``describeClientQuotas``; the proxy's topic quota takes it (kafka-configs.sh itself cannot name
    the type: docs/quotas/topic-byte-rate.md). So does a partition entity, the types ``topic`` and ``partition``
    together, in the same call."""
    import subprocess
    from pathlib import Path

    from tests.kafka_cluster import JVM_OPTIONS, kafka_libs

    source = Path(__file__).parent / "java" / "TopicQuotaAdmin.java"
    proxy, broker = start(["User:ANONYMOUS"])
    try:
        done = subprocess.run(
            ["java", *JVM_OPTIONS, "-cp", f"{kafka_libs()}/*", str(source), proxy.bootstrap, "orders", "4096", "3"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0 and "described {producer_byte_rate=4096.0}" in done.stdout, (
            done.stdout[-2000:] + done.stderr[-2000:]
        )
        assert "described {producer_byte_rate=2048.0}" in done.stdout  # the partition's: types topic and partition
        assert described(proxy.bootstrap, {"topic": "orders"}) == {"producer_byte_rate": 4096}
        assert described(proxy.bootstrap, {"topic": "orders", "partition": "3"}) == {"producer_byte_rate": 2048}
    finally:
        proxy.stop()
        broker.stop()
