"""SASL and TLS against Apache Kafka 4.4.0 itself (kafka1's SASL and SSL listeners), where the Tansu twins
(tests/integration/test_sasl.py, test_tls.py) use a scripted SASL broker and a proxy terminating TLS in front of
Tansu.

- SASL_PLAINTEXT (PLAIN users admin/alice/bob, SCRAM-SHA-512 users carol/dave): a proxy listener with ``sasl: true``
  in front of it forwards the exchange unchanged; the user Kafka accepted is the one the proxy charges, whichever
  mechanism and client library; a login Kafka refuses is answered with Kafka's error, the connection closed, and
  nothing is learnt or charged.
- TLS from the proxy to Kafka's SSL listener (``upstream.tls`` with the test CA): clients speak PLAINTEXT to the
  proxy, the proxy TLS to Kafka; with a CA that did not sign Kafka's certificate the proxy refuses the broker,
  saying why.

The SASL proxy here has no dynamic config (``dynamic_config.enabled: false``): what is tested is the clients' own
logins passing through. The proxy's own clients logging in (``upstream.sasl``) are tested in test_own_clients_sasl.py.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from contextlib import contextmanager

import pytest

from proxy.codec.apis import SASL_AUTHENTICATE, SASL_HANDSHAKE
from tests.harness import connected_users, proxy_config, start_proxy, wait_until
from tests.integration import raw
from tests.integration.conftest import PLAIN_USERS, SCRAM_USERS
from tests.kafka_cluster import unique_topic
from tests.tls_certs import Authority

# Every test here uses kafka1: one xdist worker runs them all, so one kafka1 is started (each worker that uses it
# starts its own). Marked per module, at collection: the marks tests/integration/conftest.py adds in
# pytest_collection_modifyitems come after xdist has made its groups (seen with -n 2: split over two workers).
pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("kafka1")]

SASL_AUTHENTICATION_FAILED = 58
QUOTA = 64 * 1024  # alice's and carol's producer_byte_rate; bob and dave get the <default> user's 100 MiB/s
SENT = 192 * 1024  # what each user produces: three times alice's quota


@contextmanager
def sasl_proxy(cluster, quotas=None, **settings):
    """A proxy bound where kafka1 advertises its SASL listener, in front of that listener."""
    node = cluster.nodes[0]
    config = proxy_config(node.extra_advertised["SASL"], node.extra_ports["SASL"], quotas, **settings)
    config["listeners"][0].update(name="SASL", sasl=True)
    config["dynamic_config"] = {"enabled": False}
    proxy = start_proxy(config)
    try:
        yield proxy
    finally:
        proxy.stop()


def created_topic(bootstrap: str, name: str, **security) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, **security)
    try:
        admin.create_topics([NewTopic(name, 1, 1)])
    finally:
        admin.close()


def deleted_topic(bootstrap: str, name: str) -> None:
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        if name in admin.list_topics():
            admin.delete_topics([name])
    finally:
        admin.close()


def kafka_python_producer(bootstrap: str, mechanism: str, user: str, password: str):
    from kafka import KafkaProducer

    return KafkaProducer(
        bootstrap_servers=bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism=mechanism,
        sasl_plain_username=user,
        sasl_plain_password=password,
        client_id="kt-sasl",
        acks=1,
    )


def confluent_producer(bootstrap: str, mechanism: str, user: str, password: str, **more):
    from confluent_kafka import Producer

    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism,
            "sasl.username": user,
            "sasl.password": password,
            "client.id": "kt-sasl",
            "acks": 1,
            **more,
        }
    )


def produce(make, topic: str) -> tuple:
    """Produce SENT bytes in 1 KiB records and wait for every acknowledgement: (seconds from the first send, the
    producer, still open)."""
    producer = make()
    started = time.monotonic()
    if hasattr(producer, "poll"):  # confluent-kafka
        for _ in range(SENT // 1024):
            while True:
                try:
                    producer.produce(topic, b"s" * 1024)
                    break
                except BufferError:
                    producer.poll(0.05)
        assert producer.flush(60) == 0
    else:
        for _ in range(SENT // 1024):
            producer.send(topic, b"s" * 1024)
        producer.flush(60)
    return time.monotonic() - started, producer


def test_the_user_kafka_accepted_is_the_one_charged_for_plain_and_scram_sha_512(kafka1, tmp_path):
    """Five users produce the same 192 KiB through the proxy's SASL listener at once, all with client id
    kt-sasl: alice (PLAIN, kafka-python) and carol (SCRAM-SHA-512, kafka-python) under a 64 KiB/s user quota,
    bob (PLAIN, confluent-kafka), dave (SCRAM-SHA-512, confluent-kafka) and admin (PLAIN, Kafka's Java
    kafka-producer-perf-test) under the <default> user's 100 MiB/s. Each connection's principal is the user Kafka
    authenticated; each user's bytes are charged to that user alone (so not by the client id they share); alice
    and carol are throttled and take about (192 - 64) / 64 = 2 s (accepted from 0.7 x that; 3.0 s measured), the
    others are never throttled."""
    from tests.kafka_cluster import PRODUCER_PERF

    topic = unique_topic("kt-sasl")
    quotas = [
        {"entity": {"user": "alice"}, "producer_byte_rate": QUOTA},
        {"entity": {"user": "carol"}, "producer_byte_rate": QUOTA},
        {"entity": {"user": "<default>"}, "producer_byte_rate": 100 * 1024 * 1024},
    ]
    makers = {
        "alice": lambda: kafka_python_producer(proxy.bootstrap, "PLAIN", "alice", PLAIN_USERS["alice"]),
        "bob": lambda: confluent_producer(proxy.bootstrap, "PLAIN", "bob", PLAIN_USERS["bob"]),
        "carol": lambda: kafka_python_producer(proxy.bootstrap, "SCRAM-SHA-512", "carol", SCRAM_USERS["carol"]),
        "dave": lambda: confluent_producer(proxy.bootstrap, "SCRAM-SHA-512", "dave", SCRAM_USERS["dave"]),
    }
    java_admin = tmp_path / "admin.properties"
    java_admin.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nclient.id=kt-sasl\nacks=1\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="admin" password="{PLAIN_USERS["admin"]}";\n'
    )
    # 2 x 1 s quota windows: a fresh user's burst is about one second of its quota
    with sasl_proxy(kafka1, quotas, **{"quota.window.num": 2}) as proxy:
        created_topic(
            proxy.bootstrap,
            topic,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="PLAIN",
            sasl_plain_username="admin",
            sasl_plain_password=PLAIN_USERS["admin"],
        )
        results, errors = {}, []

        def run(user):
            try:
                if user == "admin":
                    results[user] = kafka1.tool(
                        PRODUCER_PERF,
                        "--bootstrap-server",
                        proxy.bootstrap,
                        "--topic",
                        topic,
                        "--num-records",
                        str(SENT // 1024),
                        "--record-size",
                        "1024",
                        "--throughput",
                        "-1",
                        "--command-config",
                        str(java_admin),
                    )
                else:
                    results[user] = produce(makers[user], topic)
            except BaseException as exc:  # noqa: BLE001  (reported below, with the user)
                errors.append((user, exc))

        try:
            threads = [threading.Thread(target=run, args=(user,)) for user in [*makers, "admin"]]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(90)
            try:
                assert not errors, errors
                assert {"alice", "bob", "carol", "dave"} <= connected_users(proxy)  # every producer still connected
            finally:
                for user in makers:
                    if user in results and hasattr(results[user][1], "close"):
                        results[user][1].close(5)
            assert f"{SENT // 1024} records sent" in results["admin"].stdout, results["admin"].stdout
            for user in [*makers, "admin"]:
                labels = {"quota": "producer_byte_rate", "user": user, "client_id": ""}
                charged = proxy.metric("kafka_quota_proxy_quota_bytes_total", **labels)
                assert SENT <= charged <= SENT * 1.1, (user, charged)  # its own bytes, and nobody else's
                throttled = proxy.metric("kafka_quota_proxy_quota_throttled_responses_total", **labels)
                assert (throttled > 0) == (user in ("alice", "carol")), (user, throttled)
            assert (
                proxy.metric(
                    "kafka_quota_proxy_quota_bytes_total", quota="producer_byte_rate", user="", client_id="kt-sasl"
                )
                == 0
            )
            assert (
                proxy.metric(
                    "kafka_quota_proxy_quota_bytes_total", quota="producer_byte_rate", user="ANONYMOUS", client_id=""
                )
                == 0
            )
            expected = (SENT - QUOTA) / QUOTA
            for user in ("alice", "carol"):
                assert results[user][0] >= 0.7 * expected, (user, results[user][0])
        finally:
            deleted_topic(kafka1.direct_bootstrap, topic)


def sasl_handshake_then(sock, mechanism: str, token: bytes):
    assert raw.exchange(sock, SASL_HANDSHAKE, 1, correlation_id=1, mechanism=mechanism).error_code == 0
    return raw.exchange(sock, SASL_AUTHENTICATE, 2, correlation_id=2, auth_bytes=token)


def closed(sock) -> bool:
    sock.settimeout(10)
    try:
        return sock.recv(100) == b""
    except ConnectionResetError:
        return True


def test_a_login_kafka_refuses_is_answered_and_closed_and_nothing_is_charged(kafka1, caplog):
    """Three logins Kafka refuses, through the proxy: alice with a wrong password (PLAIN), alice's right password
    with authorization id bob (Kafka's PLAIN refuses an authzid other than the user), and carol with a wrong
    password (SCRAM-SHA-512, confluent-kafka). Each gets Kafka's SASL_AUTHENTICATION_FAILED (the raw ones read
    it, confluent-kafka reports an authentication failure) and its connection is closed; no connection ever took
    alice's, bob's or carol's name, nothing was charged to them, and no password reaches the proxy's log."""
    from confluent_kafka import KafkaError

    caplog.set_level(logging.INFO)
    quotas = [{"entity": {"user": "<default>"}, "producer_byte_rate": 1024 * 1024}]
    with sasl_proxy(kafka1, quotas) as proxy:
        learnt: set[str] = set()
        for token in (b"\x00alice\x00wrong-password", b"bob\x00alice\x00" + PLAIN_USERS["alice"].encode()):
            with raw.connect(proxy.port) as sock:
                answer = sasl_handshake_then(sock, "PLAIN", token)
                learnt |= connected_users(proxy)
                assert answer.error_code == SASL_AUTHENTICATION_FAILED, answer
                assert "Authentication failed" in answer.error_message, answer
                assert closed(sock)
        reported = []
        producer = confluent_producer(
            proxy.bootstrap, "SCRAM-SHA-512", "carol", "wrong-password", error_cb=reported.append
        )
        try:
            producer.produce("kt-never-written", b"x")

            def refused() -> bool:
                producer.poll(0.1)
                return any(e.code() == KafkaError._AUTHENTICATION for e in reported)

            wait_until(refused, 20, "confluent-kafka's login refused")
        finally:
            learnt |= connected_users(proxy)
            producer.purge()
            producer = None  # its last reference: librdkafka's handle destroyed now
        assert "Authentication failed" in str(reported), reported
        assert learnt <= {"ANONYMOUS"}
        wait_until(
            lambda: proxy.metric("kafka_quota_proxy_active_connections", listener="SASL") == 0,
            10,
            "every refused connection closed",
        )
        closes = sum(
            proxy.metric("kafka_quota_proxy_connections_closed_total", listener="SASL", reason=reason)
            for reason in ("upstream_closed", "client_closed")
        )
        assert closes >= 3
        for user in ("alice", "bob", "carol", "ANONYMOUS"):
            assert (
                proxy.metric("kafka_quota_proxy_quota_bytes_total", quota="producer_byte_rate", user=user, client_id="")
                == 0
            )
        assert proxy.metric("kafka_quota_proxy_requests_total", listener="SASL", api="Produce") == 0
    assert "wrong-password" not in caplog.text and PLAIN_USERS["alice"] not in caplog.text


@contextmanager
def tls_proxy(cluster, cafile: str, dynamic: bool):
    """A PLAINTEXT proxy bound where kafka1 advertises its SSL listener, speaking TLS to that listener."""
    node = cluster.nodes[0]
    config = proxy_config(node.extra_advertised["SSL"], node.extra_ports["SSL"])
    config["upstream"]["tls"] = {"cafile": cafile}
    config["listeners"][0]["name"] = "TO_SSL"
    if not dynamic:
        config["dynamic_config"] = {"enabled": False}
    proxy = start_proxy(config)
    try:
        yield proxy
    finally:
        proxy.stop()


def test_tls_to_kafkas_ssl_listener_carries_produce_and_consume(kafka1, kafka_tls):
    """upstream.tls with the test CA in front of Kafka's SSL listener: confluent-kafka produces 100 records and
    aiokafka reads them back, both over PLAINTEXT to the proxy; the proxy's own clients (its dynamic config) reach
    Kafka over the same TLS and read the config topic."""
    from aiokafka import AIOKafkaConsumer, TopicPartition
    from confluent_kafka import Producer

    authority, _ = kafka_tls
    topic = unique_topic("kt-tls")
    try:
        with tls_proxy(kafka1, authority.pem.cert, dynamic=True) as proxy:
            created_topic(proxy.bootstrap, topic)
            producer = Producer({"bootstrap.servers": proxy.bootstrap, "linger.ms": 5})
            for i in range(100):
                producer.produce(topic, f"tls-{i}".encode())
            assert producer.flush(30) == 0
            del producer

            async def consume():
                consumer = AIOKafkaConsumer(bootstrap_servers=proxy.bootstrap)
                await consumer.start()
                try:
                    partition = TopicPartition(topic, 0)
                    consumer.assign([partition])
                    await consumer.seek_to_beginning(partition)
                    values = []
                    while len(values) < 100:
                        batch = await asyncio.wait_for(consumer.getmany(partition, timeout_ms=1000), 30)
                        values.extend(r.value for r in batch.get(partition, []))
                    return values
                finally:
                    await consumer.stop()

            assert asyncio.run(consume()) == [f"tls-{i}".encode() for i in range(100)]
            assert proxy.metric("kafka_quota_proxy_upstream_ready") == 1
            wait_until(
                lambda: proxy.metric("kafka_quota_proxy_dynamic_config_available") == 1,
                15,
                "the config topic read over TLS",
            )
            assert proxy.metric("kafka_quota_proxy_upstream_errors_total", listener="TO_SSL", kind="connect") == 0
    finally:
        deleted_topic(kafka1.direct_bootstrap, topic)


def test_tls_to_kafka_with_a_ca_that_did_not_sign_its_certificate_fails_saying_why(kafka1, tmp_path, caplog):
    """The same proxy trusting another CA: Kafka's certificate is refused, the client's connection is closed
    without an answer, the proxy is not ready, and its log names the certificate verification failure."""
    caplog.set_level(logging.INFO)
    stranger = Authority(tmp_path)
    with tls_proxy(kafka1, stranger.pem.cert, dynamic=False) as proxy:
        with raw.connect(proxy.port) as sock:
            sock.sendall(b"\x00\x00\x00\x11\x00\x12\x00\x00\x00\x00\x00\x01\x00\x03raw\x00\x00\x00")  # ApiVersions
            assert closed(sock)
        wait_until(
            lambda: proxy.metric("kafka_quota_proxy_upstream_errors_total", listener="TO_SSL", kind="connect") >= 1,
            10,
            "the broker connection refused",
        )
        assert (
            proxy.metric("kafka_quota_proxy_connections_closed_total", listener="TO_SSL", reason="upstream_unreachable")
            == 1
        )
        assert proxy.metric("kafka_quota_proxy_upstream_ready") == 0
        assert proxy.metric("kafka_quota_proxy_ready") == 0
    assert "CERTIFICATE_VERIFY_FAILED" in caplog.text, caplog.text[-3000:]
    assert f"cannot reach broker 127.0.0.1:{kafka1.nodes[0].extra_ports['SSL']}" in caplog.text
