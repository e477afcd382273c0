"""examples/sasl.yaml and examples/tls.yaml started against Apache Kafka's SASL_PLAINTEXT and SSL listeners of
kafka1 (Tansu has no SASL with memory storage, and no TLS listener): each made local (tests/example_files.py:
the addresses, the password file and the certificate files, nothing else), checked, started where kafka1
advertises that listener, and used by a client whose user the proxy learns (SASL) or maps from its certificate
(mTLS). The other examples: tests/integration/test_examples.py."""

from __future__ import annotations

import pytest

from tests.example_files import localized
from tests.harness import connected_users, proxy_in_front, wait_until
from tests.integration.conftest import PLAIN_USERS, SCRAM_USERS
from tests.kafka_cluster import unique_topic

pytestmark = pytest.mark.integration


class Running:
    """kafka1 stays up after the block: proxy_in_front stops what it is given."""

    def stop(self) -> None:
        pass


def users_producing(proxy, topic: str, **security) -> set[str]:
    """kafka-python produces 50 records through the proxy (each acknowledged); the users the proxy sees meanwhile."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=proxy.bootstrap, acks="all", client_id="example", **security)
    topic = unique_topic(topic)
    try:
        for f in [producer.send(topic, b"x" * 100) for _ in range(50)]:
            f.get(30)
        return connected_users(proxy)
    finally:
        producer.close(10)


def test_the_sasl_example_in_front_of_kafkas_sasl_listener(kafka1, tmp_path):
    """The proxy's own clients log in with SCRAM-SHA-512 (the example's mechanism) from its password file; alice
    logs in with PLAIN through it and is the user the proxy sees."""
    node = kafka1.nodes[0]
    secret = tmp_path / "sasl-password"
    secret.write_text(SCRAM_USERS["carol"] + "\n")
    raw, _ = localized(
        "sasl.yaml",
        tmp_path,
        {
            "listeners[0].bind": f"127.0.0.1:{node.extra_advertised['SASL']}",
            "upstream.bootstrap_servers": [f"127.0.0.1:{node.extra_ports['SASL']}"],
            "metrics.bind": "127.0.0.1:0",
            "upstream.sasl.username": "carol",
            "upstream.sasl.password_file": str(secret),
        },
    )
    with proxy_in_front(Running(), raw) as proxy:
        wait_until(
            lambda: proxy.metric("kafka_quota_proxy_dynamic_config_available") == 1,
            30,
            "the config topic read, logged in with SCRAM-SHA-512",
        )
        assert "alice" in users_producing(
            proxy,
            "example-sasl",
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="PLAIN",
            sasl_plain_username="alice",
            sasl_plain_password=PLAIN_USERS["alice"],
        )


def test_the_tls_example_with_a_client_certificate_in_front_of_kafkas_ssl_listener(kafka1, kafka_tls, tmp_path):
    """mTLS at the proxy (the client's CN mapped to its user by the example's rules), TLS from the proxy to Kafka's
    SSL listener verified with the CA."""
    authority, server = kafka_tls
    client = authority.client("example-alice", O="Example", OU="tenants", CN="alice")  # CN=alice,OU=tenants,O=Example
    node = kafka1.nodes[0]
    raw, _ = localized(
        "tls.yaml",
        tmp_path,
        {
            "listeners[0].bind": f"127.0.0.1:{node.extra_advertised['SSL']}",
            "upstream.bootstrap_servers": [f"127.0.0.1:{node.extra_ports['SSL']}"],
            "metrics.bind": "127.0.0.1:0",
            # PROXIES: kafka1's DIRECT listener, which no proxy is in front of and which advertises itself, as PROXIES
            # does, but speaks PLAINTEXT (kafka1 has one SSL listener, advertising the proxy)
            "upstream.own_clients": {"bootstrap_servers": [node.direct], "tls": False},
            "upstream.tls.cafile": authority.pem.cert,
            "listeners[0].tls.certfile": server.cert,
            "listeners[0].tls.keyfile": server.key,
            "listeners[0].tls.cafile": authority.pem.cert,
        },
    )
    with proxy_in_front(Running(), raw) as proxy:
        wait_until(
            lambda: proxy.metric("kafka_quota_proxy_dynamic_config_available") == 1,
            30,
            "the config topic read over TLS",
        )
        assert "alice" in users_producing(
            proxy,
            "example-tls",
            security_protocol="SSL",
            ssl_cafile=authority.pem.cert,
            ssl_certfile=client.cert,
            ssl_keyfile=client.key,
        )
