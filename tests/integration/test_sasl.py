"""SASL pass-through against a scripted broker (tests/sasl_broker.py: Tansu's SASL cannot be used with memory
storage): the proxy forwards SaslHandshake/SaslAuthenticate (and the raw tokens after SaslHandshake v0) unchanged,
learns the principal from the authentication the broker accepted, and per-user quotas apply to it."""

from __future__ import annotations

import logging
import socket
import struct

import pytest

from proxy.codec.apis import API_VERSIONS, SASL_AUTHENTICATE, SASL_HANDSHAKE
from proxy.codec.header import encode_request_header, frame
from proxy.codec.messages import encode_request, new_request
from tests.harness import connected_users, free_port, proxy_config, start_proxy, wait_until
from tests.integration import raw
from tests.sasl_broker import SaslBroker

pytestmark = pytest.mark.integration

USERS = {"alice": "alice-secret-pw", "bob": "bob-secret-pw"}


@pytest.fixture
def cluster():
    broker = SaslBroker(USERS).start()
    proxy_port = free_port()
    broker.advertised_port = proxy_port
    config = proxy_config(
        proxy_port,
        broker.port,
        quotas=[
            {"entity": {"user": "alice"}, "producer_byte_rate": 20000},
            {"entity": {"user": "bob"}, "producer_byte_rate": 20000},
        ],
    )
    config["listeners"][0]["sasl"] = True
    # the scripted broker serves no config topic, and the follower's own connection would be among those counted
    config["dynamic_config"] = {"enabled": False}
    proxy = start_proxy(config)
    try:
        yield proxy, broker
    finally:
        proxy.stop()
        broker.stop()


@pytest.mark.parametrize("mechanism,user", [("PLAIN", "alice"), ("SCRAM-SHA-256", "bob")])
def test_kafka_python_authenticates_through_the_proxy_and_its_user_is_throttled(cluster, mechanism, user, caplog):
    from kafka import KafkaProducer

    proxy, broker = cluster
    caplog.set_level(logging.DEBUG)
    producer = KafkaProducer(
        bootstrap_servers=proxy.bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism=mechanism,
        sasl_plain_username=user,
        sasl_plain_password=USERS[user],
        enable_idempotence=False,
        acks=1,
        client_id="sasl-client",
    )
    try:
        # 300 KB: half as much again as the 20 KB/s quota admits over its 10 s window floor (200 KB), so it is
        # throttled however slowly a busy machine lets the client send it
        for _ in range(300):
            producer.send("sasl-topic", b"x" * 1000)
        producer.flush(60)
        assert user in broker.authenticated
        assert user in connected_users(proxy)
        assert (
            proxy.metric("kafka_quota_proxy_quota_bytes_total", quota="producer_byte_rate", user=user, client_id="")
            > 200_000
        )
        assert (
            proxy.metric(
                "kafka_quota_proxy_quota_throttled_responses_total", quota="producer_byte_rate", user=user, client_id=""
            )
            > 0
        )
    finally:
        producer.close(5)
    ours = [r.getMessage() for r in caplog.records if not r.name.startswith("kafka.")]  # kafka-python logs its own
    assert not any(USERS[user] in line for line in ours)  # passwords never reach the proxy's logs ...
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{proxy.metrics_port}/metrics", timeout=5) as r:
        metrics = r.read().decode()
    assert "alice" in metrics or "bob" in metrics  # ... nor its metrics (which do name the user)
    assert USERS[user] not in metrics


def read_frame(sock: socket.socket) -> bytes:
    size = struct.unpack(">i", raw.recv_exactly(sock, 4))[0]
    return raw.recv_exactly(sock, size) if size else b""


def test_saslhandshake_v0_raw_tokens_then_kafka_requests_stay_in_step(cluster):
    proxy, broker = cluster
    with raw.connect(proxy.port) as sock:
        handshake = encode_request(SASL_HANDSHAKE, 0, new_request(SASL_HANDSHAKE, 0, mechanism="PLAIN"))
        sock.sendall(frame(encode_request_header(SASL_HANDSHAKE, 0, 1, "raw-sasl") + handshake))
        assert struct.unpack(">i", read_frame(sock)[:4])[0] == 1  # the handshake answer (correlation id 1)
        token = b"\x00alice\x00" + USERS["alice"].encode()
        sock.sendall(struct.pack(">i", len(token)) + token)  # a raw token: no Kafka header
        assert read_frame(sock) == b""  # PLAIN's (empty) raw answer: authenticated
        assert connected_users(proxy) == {"alice"}
        versions = raw.exchange(sock, API_VERSIONS, 0, correlation_id=2)  # back to Kafka requests
        assert versions.error_code == 0
    assert "alice" in broker.authenticated


def test_frames_over_the_pre_authentication_limit_close_the_connection(cluster):
    proxy, _ = cluster
    with raw.connect(proxy.port) as sock:
        sock.sendall(struct.pack(">i", 600_000) + encode_request_header(0, 9, 1, "big") + b"\x00" * 1000)
        sock.settimeout(5)
        try:
            assert sock.recv(100) == b""
        except ConnectionResetError:
            pass
    wait_until(
        lambda: proxy.metric("kafka_quota_proxy_frame_errors_total", listener="PLAINTEXT", direction="request") >= 1,
        10,
        "the frame error counted",
    )


def test_a_refused_authentication_teaches_nothing(cluster):
    proxy, broker = cluster
    with raw.connect(proxy.port) as sock:
        assert raw.exchange(sock, SASL_HANDSHAKE, 1, correlation_id=1, mechanism="PLAIN").error_code == 0
        refused = raw.exchange(sock, SASL_AUTHENTICATE, 1, correlation_id=2, auth_bytes=b"\x00alice\x00wrong")
        assert refused.error_code == 58  # SASL_AUTHENTICATION_FAILED, then the broker closes
        assert connected_users(proxy) <= {"ANONYMOUS"}
    assert "alice" not in broker.authenticated


def sasl_request(api_key: int, version: int, correlation_id: int, **fields) -> bytes:
    body = encode_request(api_key, version, new_request(api_key, version, **fields))
    return frame(encode_request_header(api_key, version, correlation_id, "mallory") + body)


def test_a_token_pipelined_after_a_success_never_changes_the_principal(cluster):
    """One write: SaslHandshake(PLAIN), SaslAuthenticate(alice, right password), SaslAuthenticate(bob, wrong
    password). The broker accepts alice and answers the third ILLEGAL_SASL_STATE, leaving the connection open; the
    connection's principal is alice (before the fix the proxy took bob's token over, before either answer)."""
    proxy, broker = cluster
    with raw.connect(proxy.port) as sock:
        sock.sendall(
            sasl_request(SASL_HANDSHAKE, 1, 1, mechanism="PLAIN")
            + sasl_request(SASL_AUTHENTICATE, 2, 2, auth_bytes=b"\x00alice\x00" + USERS["alice"].encode())
            + sasl_request(SASL_AUTHENTICATE, 2, 3, auth_bytes=b"\x00bob\x00wrong")
        )
        answers = [read_frame(sock) for _ in range(3)]
        assert [struct.unpack_from(">i", a)[0] for a in answers] == [1, 2, 3]
        codes = [struct.unpack_from(">h", a, 5)[0] for a in answers[1:]]  # header v1: id, empty tagged fields
        assert codes == [0, 34]
        assert connected_users(proxy) == {"alice"}
        assert raw.exchange(sock, API_VERSIONS, 0, correlation_id=4).error_code == 0  # still open
    assert broker.authenticated == ["alice"]


@pytest.mark.parametrize("api", ["DescribeClientQuotas", "Metadata"])
def test_requests_before_authentication_close_the_connection(cluster, api):
    """Before the broker accepts an authentication only ApiVersions, SaslHandshake and SaslAuthenticate are
    served, as Kafka serves them: anything else closes the connection without reaching the broker or being answered
    by the proxy (before the fix the proxy answered DescribeClientQuotas with every user's quota)."""
    from proxy.codec.apis import DESCRIBE_CLIENT_QUOTAS, METADATA

    proxy, broker = cluster
    request = {
        "DescribeClientQuotas": sasl_request(DESCRIBE_CLIENT_QUOTAS, 1, 2, components=[], strict=False),
        "Metadata": sasl_request(METADATA, 12, 2, topics=None),
    }[api]
    with raw.connect(proxy.port) as sock:
        assert raw.exchange(sock, API_VERSIONS, 0, correlation_id=1).error_code == 0
        assert raw.exchange(sock, SASL_HANDSHAKE, 1, correlation_id=1, mechanism="PLAIN").error_code == 0
        sock.sendall(request)
        sock.settimeout(5)
        try:
            assert sock.recv(100) == b""
        except ConnectionResetError:
            pass
    assert set(broker.seen) == {API_VERSIONS, SASL_HANDSHAKE}
    # counted as the client's protocol error (logged once per address per 10 s)
    wait_until(
        lambda: proxy.metric("kafka_quota_proxy_frame_errors_total", listener="PLAINTEXT", direction="request") >= 1,
        10,
        "the frame error counted",
    )


def test_requests_after_authentication_are_served(cluster):
    from proxy.codec.apis import METADATA

    proxy, broker = cluster
    with raw.connect(proxy.port) as sock:
        assert raw.exchange(sock, SASL_HANDSHAKE, 1, correlation_id=1, mechanism="PLAIN").error_code == 0
        token = b"\x00alice\x00" + USERS["alice"].encode()
        assert raw.exchange(sock, SASL_AUTHENTICATE, 2, correlation_id=2, auth_bytes=token).error_code == 0
        assert raw.exchange(sock, METADATA, 12, correlation_id=3, topics=None).brokers
    assert METADATA in broker.seen
