"""TLS listeners (certificates made in the test), mTLS principals, TLS to the upstream, and the two mismatches,
against Tansu with kafka-python and confluent-kafka."""

from __future__ import annotations

import logging
import socket
import ssl
import time

import pytest

from proxy.connection import client_context, listener
from proxy.ground.logs import LogLimiter
from tests.harness import Tansu, free_port, proxy_config, start_proxy, wait_until
from tests.integration import raw
from tests.tls_certs import Authority

pytestmark = pytest.mark.integration


@pytest.fixture
def pki(tmp_path):
    ca = Authority(tmp_path)
    return ca, ca.server()


def tls_proxy(broker_port: int, proxy_port: int, ca, server, quotas=None, **tls):
    config = proxy_config(proxy_port, broker_port, quotas=quotas)
    config["listeners"][0]["tls"] = {"certfile": server.cert, "keyfile": server.key, "cafile": ca.pem.cert, **tls}
    return start_proxy(config)


def test_kafka_python_and_confluent_kafka_through_a_tls_listener(pki):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from kafka import KafkaConsumer, KafkaProducer

    ca, server = pki
    proxy_port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    proxy = tls_proxy(broker_port, proxy_port, ca, server)
    try:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient(
            {"bootstrap.servers": proxy.bootstrap, "security.protocol": "ssl", "ssl.ca.location": ca.pem.cert}
        )
        admin.create_topics([NewTopic("tls", 1, 1)])["tls"].result(30)
        kp = KafkaProducer(bootstrap_servers=proxy.bootstrap, security_protocol="SSL", ssl_cafile=ca.pem.cert)
        for i in range(100):
            kp.send("tls", f"kp-{i}".encode())
        kp.flush(30)
        kp.close(5)
        ck = Producer(
            {"bootstrap.servers": proxy.bootstrap, "security.protocol": "ssl", "ssl.ca.location": ca.pem.cert}
        )
        for i in range(100):
            ck.produce("tls", f"ck-{i}".encode())
        assert ck.flush(30) == 0
        consumer = Consumer(
            {
                "bootstrap.servers": proxy.bootstrap,
                "security.protocol": "ssl",
                "ssl.ca.location": ca.pem.cert,
                "group.id": "tls-check",
            }
        )
        consumer.assign([TopicPartition("tls", 0, 0)])
        seen, deadline = set(), time.monotonic() + 30
        while len(seen) < 200 and time.monotonic() < deadline:
            seen.update(m.value() for m in consumer.consume(500, 0.5) if m.error() is None)
        consumer.close()
        assert seen == {f"{p}-{i}".encode() for p in ("kp", "ck") for i in range(100)}
        kc = KafkaConsumer(
            "tls",
            bootstrap_servers=proxy.bootstrap,
            security_protocol="SSL",
            ssl_cafile=ca.pem.cert,
            auto_offset_reset="earliest",
            consumer_timeout_ms=10000,
        )
        assert sum(1 for _ in kc) == 200
        kc.close()
    finally:
        proxy.stop()
        broker.stop()


def test_an_mtls_clients_mapped_subject_is_its_principal_in_quota_decisions(pki):
    from kafka import KafkaProducer

    ca, server = pki
    alice = ca.client("alice", C="US", O="Example", OU="ops", CN="Alice")
    proxy_port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    proxy = tls_proxy(
        broker_port,
        proxy_port,
        ca,
        server,
        client_auth="required",
        principal_mapping_rules="RULE:^CN=(.*?),OU=(.*?),.*$/$1/L,DEFAULT",
        quotas=[{"entity": {"user": "alice"}, "producer_byte_rate": 20000}],
    )
    try:
        producer = KafkaProducer(
            bootstrap_servers=proxy.bootstrap,
            security_protocol="SSL",
            ssl_cafile=ca.pem.cert,
            ssl_certfile=alice.cert,
            ssl_keyfile=alice.key,
            client_id="mtls",
        )
        for _ in range(300):
            producer.send("mtls", b"x" * 1000)
        producer.flush(60)
        producer.close(5)
        assert (
            proxy.metric("kafka_quota_proxy_quota_bytes_total", quota="producer_byte_rate", user="alice", client_id="")
            > 300_000
        )
        assert (
            proxy.metric(
                "kafka_quota_proxy_quota_throttled_responses_total",
                quota="producer_byte_rate",
                user="alice",
                client_id="",
            )
            > 0
        )
        # without a client certificate the handshake itself is refused (client_auth: required)
        context = ssl.create_default_context(cafile=ca.pem.cert)
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as plain:
            with pytest.raises((ssl.SSLError, ConnectionResetError, OSError)):
                with context.wrap_socket(plain, server_hostname="127.0.0.1") as tls:
                    tls.sendall(b"\x00\x00\x00\x0a" + b"\x00" * 10)
                    if not tls.recv(1):
                        raise ConnectionResetError("closed")
    finally:
        proxy.stop()
        broker.stop()


def test_a_plaintext_client_on_a_tls_listener_and_a_tls_client_on_a_plaintext_one_are_closed_clearly(
    pki, caplog, monkeypatch
):
    ca, server = pki
    monkeypatch.setattr(listener, "HANDSHAKE_LOG", LogLimiter())  # one line per IP per 10 s: other tests' are not ours
    monkeypatch.setattr(client_context, "FRAME_ERROR_LOG", LogLimiter())  # the same for the frame-error line
    proxy_port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    tls = tls_proxy(broker_port, proxy_port, ca, server)
    plain_config = proxy_config(free_port(), broker_port)
    # a second proxy in front of a broker that advertises the first: its own config clients would reach the TLS
    # listener in plaintext, as a misconfigured second sidecar's do, and be counted among the closes checked here
    plain_config["dynamic_config"] = {"enabled": False}
    plain = start_proxy(plain_config)
    caplog.set_level(logging.INFO)
    try:
        with raw.connect(tls.port) as sock:  # plaintext ApiVersions to the TLS listener
            sock.sendall(b"\x00\x00\x00\x11\x00\x12\x00\x00\x00\x00\x00\x01\x00\x03raw\x00\x00\x00")
            sock.settimeout(5)
            received = b""
            for _ in range(10):  # perhaps a TLS alert first; then the proxy closes
                chunk = sock.recv(1024)
                if not chunk:
                    break
                received += chunk
            else:
                pytest.fail(f"not closed; received {received!r}")
            assert not received.startswith(b"\x00\x00")  # never a Kafka answer
        context = ssl.create_default_context(cafile=ca.pem.cert)
        with socket.create_connection(("127.0.0.1", plain.port), timeout=5) as sock:  # TLS to the plaintext one
            with pytest.raises((ssl.SSLError, ConnectionResetError, OSError)):
                context.wrap_socket(sock, server_hostname="127.0.0.1")
        wait_until(
            lambda: (
                "TLS handshake with" in caplog.text and "a TLS handshake arrived on a plaintext listener" in caplog.text
            ),
            10,
            "both handshakes logged",
        )
        assert "TLS handshake with" in caplog.text and "plaintext client on a TLS listener?" in caplog.text
        assert "a TLS handshake arrived on a plaintext listener" in caplog.text
        assert (
            tls.metric(
                "kafka_quota_proxy_connections_closed_total", listener="PLAINTEXT", reason="tls_handshake_failed"
            )
            == 1
        )
    finally:
        tls.stop()
        plain.stop()
        broker.stop()


def test_a_tls_only_sidecar_follows_its_dynamic_configuration(pki, caplog):
    """The proxy's own config clients reach the broker behind a sidecar directly, not through the proxy's TLS
    listener the broker advertises (they have neither its trust nor a client certificate): the config topic is read
    and no handshake fails. Writing through the TLS listener is tests/integration/test_configs_cli.py's."""
    ca, server = pki
    proxy_port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    caplog.set_level(logging.INFO)
    proxy = tls_proxy(broker_port, proxy_port, ca, server, client_auth="required")
    try:
        wait_until(lambda: proxy.metric("kafka_quota_proxy_dynamic_config_available") == 1, 15, "the config topic read")
        time.sleep(1)  # deliberate: a few more of the follower's fetches, none of which may fail a handshake
        assert "TLS handshake with" not in caplog.text
        assert not proxy.metric(
            "kafka_quota_proxy_connections_closed_total", listener="PLAINTEXT", reason="tls_handshake_failed"
        )
    finally:
        proxy.stop()
        broker.stop()


def test_tls_to_the_upstream_is_verified(pki):
    """A proxy whose upstream is a TLS listener (here another proxy terminating TLS in front of Tansu): with the
    CA it works; with verification against the system CAs only it refuses the broker's certificate."""
    from kafka import KafkaProducer

    ca, server = pki
    edge_port, tls_port, broker_port = free_port(), free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{edge_port}").start()
    terminator = tls_proxy(broker_port, tls_port, ca, server)
    edge_config = proxy_config(edge_port, tls_port)
    edge_config["upstream"]["tls"] = {"cafile": ca.pem.cert}
    edge = start_proxy(edge_config)
    try:
        producer = KafkaProducer(bootstrap_servers=edge.bootstrap)
        producer.send("up-tls", b"v").get(30)
        producer.close(5)
        assert edge.metric("kafka_quota_proxy_upstream_ready") == 1
    finally:
        edge.stop()
    unverified_config = proxy_config(free_port(), tls_port)
    unverified_config["upstream"]["tls"] = {}
    unverified = start_proxy(unverified_config)
    try:
        with raw.connect(unverified.port) as sock:
            sock.settimeout(10)
            sock.sendall(b"\x00\x00\x00\x11\x00\x12\x00\x00\x00\x00\x00\x01\x00\x03raw\x00\x00\x00")
            try:
                assert sock.recv(1024) == b""  # the broker's certificate is not trusted: no upstream, closed
            except ConnectionResetError:
                pass  # closed too
        assert unverified.metric("kafka_quota_proxy_upstream_errors_total", listener="PLAINTEXT", kind="connect") >= 1
    finally:
        unverified.stop()
        terminator.stop()
        broker.stop()


def test_a_tls_listener_opens_no_broker_connection_before_the_handshake_and_times_it_out(pki):
    """Half-open TLS handshakes cost no broker connection (the relay in front of Tansu counts every connection the
    proxy opens), and each is closed after listener.tls.handshake.timeout.ms; a client that completes its
    handshake afterwards is served."""
    from kafka import KafkaProducer

    from tests.relay import RecordingRelay

    ca, server = pki
    proxy_port, broker_port = free_port(), free_port()
    relay = RecordingRelay("127.0.0.1", ("127.0.0.1", broker_port)).start()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    config = proxy_config(proxy_port, relay.port, **{"listener.tls.handshake.timeout.ms": 500})
    config["listeners"][0]["tls"] = {"certfile": server.cert, "keyfile": server.key}
    config["dynamic_config"] = {"enabled": False}  # the proxy's own clients would connect through the relay too
    proxy = start_proxy(config)
    try:
        time.sleep(0.2)  # deliberate: the readiness probe's connection through the relay is made
        before = len(relay.peers)  # the readiness probe's
        idle = [socket.create_connection(("127.0.0.1", proxy_port)) for _ in range(50)]  # never say hello
        time.sleep(0.3)  # deliberate: time in which a broker connection would be dialled; none may be
        assert len(relay.peers) == before
        wait_until(
            lambda: (
                proxy.metric(
                    "kafka_quota_proxy_connections_closed_total", listener="PLAINTEXT", reason="tls_handshake_failed"
                )
                >= 50
            ),
            10,
            "50 handshakes timed out",
        )
        assert (
            proxy.metric(
                "kafka_quota_proxy_connections_closed_total", listener="PLAINTEXT", reason="tls_handshake_failed"
            )
            == 50
        )
        for sock in idle:
            sock.settimeout(2)
            assert sock.recv(1) == b""  # closed by the proxy
            sock.close()
        assert len(relay.peers) == before
        producer = KafkaProducer(bootstrap_servers=proxy.bootstrap, security_protocol="SSL", ssl_cafile=ca.pem.cert)
        producer.send("after-handshakes", b"x").get(30)
        producer.close(5)
        assert len(relay.peers) > before
    finally:
        proxy.stop()
        broker.stop()
        relay.stop()
