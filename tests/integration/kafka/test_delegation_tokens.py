"""Delegation tokens against Apache Kafka 4.4.0 (kafka1's SASL listener, ``delegation.token.secret.key`` set): a SCRAM
login with ``tokenauth=true`` names the token id, and Kafka authenticates the token's OWNER (``ScramSaslServer``; the
owner, not whoever requested the token, KIP-373), so the proxy charges the owner, which it learns with a
DescribeDelegationToken of its own (``upstream.sasl``). A login whose owner the proxy cannot learn is refused by the
proxy with SASL_AUTHENTICATION_FAILED saying why, and nothing is charged to anyone.

Tokens are created by Kafka's own tool (kafka-delegation-tokens.sh) through the proxy, logged in as carol; the token
logins are Kafka's Java producer (kafka-producer-perf-test.sh; librdkafka and kafka-python do not send SCRAM
extensions) and raw SCRAM exchanges over a socket."""

from __future__ import annotations

import logging
import re
from contextlib import contextmanager

import pytest

from proxy.cluster.sasl_login import Scram
from proxy.codec.apis import SASL_AUTHENTICATE, SASL_HANDSHAKE
from proxy.codec.error_codes import SASL_AUTHENTICATION_FAILED
from tests.harness import connected_users, proxy_config, start_proxy, wait_until
from tests.integration import raw
from tests.integration.conftest import PLAIN_USERS, SCRAM_USERS
from tests.kafka_cluster import PRODUCER_PERF, unique_topic

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("kafka1")]

TOKENS = "org.apache.kafka.tools.DelegationTokenCommand"
QUOTA = 64 * 1024  # dave's producer_byte_rate; everyone else (a token id too) gets the <default> user's 100 MiB/s
SENT = 192 * 1024  # three times dave's quota
REFUSAL_BOUND_MS = 1500  # how long a login waits for an owner no broker tells (the refusal test)


@contextmanager
def token_proxy(cluster, quotas=None, own_login: bool = True, **settings):
    """A proxy where kafka1 advertises its SASL listener, in front of it; ``own_login``: its own traffic logs in as
    admin (PLAIN), so it may ask the broker for tokens' owners. 2 x 1 s quota windows: a fresh user's burst is about
    one second of its quota."""
    node = cluster.nodes[0]
    config = proxy_config(
        node.extra_advertised["SASL"], node.extra_ports["SASL"], quotas, **{"quota.window.num": 2, **settings}
    )
    config["listeners"][0].update(name="SASL", sasl=True)
    config["dynamic_config"] = {"enabled": False}
    if own_login:
        config["upstream"]["sasl"] = {"mechanism": "PLAIN", "username": "admin", "password": PLAIN_USERS["admin"]}
    proxy = start_proxy(config)
    try:
        yield proxy
    finally:
        proxy.stop()


def scram_properties(tmp_path, name: str, user: str, password: str, token: bool = False, **more) -> str:
    path = tmp_path / f"{name}.properties"
    extension = ' tokenauth="true"' if token else ""
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
        + "".join(f"{k}={v}\n" for k, v in more.items())
        + "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{user}" password="{password}"{extension};\n'
    )
    return str(path)


def create_token(cluster, bootstrap: str, tmp_path, owner: str | None = None) -> tuple[str, str]:
    """A token carol requests (for ``owner``, KIP-373, or for herself): (its id, its HMAC)."""
    carol = scram_properties(tmp_path, "carol", "carol", SCRAM_USERS["carol"])
    args = ["--bootstrap-server", bootstrap, "--create", "--max-life-time-period", "-1", "--command-config", carol]
    if owner is not None:
        args += ["--owner-principal", f"User:{owner}"]
    out = cluster.tool(TOKENS, *args).stdout
    found = re.search(r"^(\S+)\s+(\S+)\s+User:(\S+)\s+User:carol\s", out, re.MULTILINE)
    assert found is not None, out
    assert found[3] == (owner or "carol"), out
    return found[1], found[2]


def token_login(port: int, token_id: str, hmac: str):
    """A raw SCRAM-SHA-512 login with the token (tokenauth=true, as Kafka's ScramLoginModule sends it): the answer to
    its client-final message, and the socket (open). A token created a moment ago is not in the broker's metadata
    yet (Kafka answers its client-first "invalid credentials" until it is): logged in again until it is."""
    logins = []

    def first_accepted() -> bool:
        scram = Scram("SCRAM-SHA-512", token_id, hmac)
        scram.first_bare += ",tokenauth=true"  # an extension is part of the bare message the signatures cover
        sock = raw.connect(port)
        sock.settimeout(30)
        assert raw.exchange(sock, SASL_HANDSHAKE, 1, correlation_id=1, mechanism="SCRAM-SHA-512").error_code == 0
        first = raw.exchange(sock, SASL_AUTHENTICATE, 2, correlation_id=2, auth_bytes=scram.first())
        if first.error_code != 0:
            sock.close()
            return False
        logins.append((scram, first, sock))
        return True

    wait_until(first_accepted, 30, "the new token in the broker's metadata", interval=0.2)
    scram, first, sock = logins[0]
    final = raw.exchange(sock, SASL_AUTHENTICATE, 2, correlation_id=3, auth_bytes=scram.final(bytes(first.auth_bytes)))
    return final, sock


def charged(proxy, user: str) -> float:
    return proxy.metric("kafka_quota_proxy_quota_bytes_total", quota="producer_byte_rate", user=user, client_id="")


def test_a_token_login_is_charged_to_the_tokens_owner_not_its_id_nor_its_requester(kafka1, tmp_path):
    """carol requests a token owned by dave (KIP-373). Kafka's Java producer logs in with it (tokenauth=true) and
    writes 192 KiB: every byte is charged to dave, under dave's 64 KiB/s quota (throttled), none to the token id
    (which would have the <default> user's 100 MiB/s, one fresh quota per token) nor to carol. A raw login with the
    same token is the connection of user dave while it is open. One DescribeDelegationToken taught the owner."""
    topic = unique_topic("kt-token")
    quotas = [
        {"entity": {"user": "dave"}, "producer_byte_rate": QUOTA},
        {"entity": {"user": "<default>"}, "producer_byte_rate": 100 * 1024 * 1024},
    ]
    with token_proxy(kafka1, quotas) as proxy:
        token_id, hmac = create_token(kafka1, proxy.bootstrap, tmp_path, owner="dave")
        final, sock = token_login(proxy.port, token_id, hmac)
        with sock:
            assert final.error_code == 0, final
            users = connected_users(proxy)
            assert "dave" in users and token_id not in users, users
        producer = scram_properties(tmp_path, "token", token_id, hmac, token=True, acks=1, **{"client.id": "kt-token"})
        result = kafka1.tool(
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
            producer,
        )
        assert f"{SENT // 1024} records sent" in result.stdout, result.stdout
        assert SENT <= charged(proxy, "dave") <= SENT * 1.1
        assert (
            proxy.metric(
                "kafka_quota_proxy_quota_throttled_responses_total",
                quota="producer_byte_rate",
                user="dave",
                client_id="",
            )
            > 0
        )
        for nobody in (token_id, "carol", "ANONYMOUS"):
            assert charged(proxy, nobody) == 0, nobody
        # the raw login looked the owner up; the producer's logins knew it
        assert proxy.metric("kafka_quota_proxy_delegation_token_lookups_total", result="answered") == 1
        assert proxy.metric("kafka_quota_proxy_delegation_token_logins_refused_total") == 0


def test_a_token_whose_owner_the_proxy_cannot_learn_is_refused_never_charged_to_its_id(kafka1, tmp_path, caplog):
    """The proxy's own traffic does not log in (no upstream.sasl), so Kafka answers none of its lookups: a raw login
    with carol's token, which Kafka itself would accept, gets the proxy's SASL_AUTHENTICATION_FAILED naming the token
    and why; Kafka's Java producer with that token fails its login the same way and writes nothing; no connection is
    ever anybody's, nothing is charged, each refusal is counted and the HMAC is never logged."""
    caplog.set_level(logging.INFO)
    quotas = [{"entity": {"user": "<default>"}, "producer_byte_rate": 100 * 1024 * 1024}]
    with token_proxy(kafka1, quotas) as good:
        token_id, hmac = create_token(kafka1, good.bootstrap, tmp_path)
    # A login waits for the owner up to upstream.connect.timeout.ms (5 s by default) before it is refused; what is
    # tested is the refusal, not that default: 1.5 s, twice (the raw login, the producer's), instead of 5 s twice.
    with token_proxy(kafka1, quotas, own_login=False, **{"upstream.connect.timeout.ms": REFUSAL_BOUND_MS}) as proxy:
        final, sock = token_login(proxy.port, token_id, hmac)
        with sock:
            assert final.error_code == SASL_AUTHENTICATION_FAILED, final
            assert token_id in final.error_message and "no broker answered" in final.error_message, final
            assert connected_users(proxy) <= {"ANONYMOUS"}
        producer = scram_properties(
            tmp_path, "token", token_id, hmac, token=True, acks=1, **{"client.id": "kt-token", "max.block.ms": 10000}
        )
        result = kafka1.tool(
            PRODUCER_PERF,
            "--bootstrap-server",
            proxy.bootstrap,
            "--topic",
            unique_topic("kt-token"),
            "--num-records",
            "1",
            "--record-size",
            "1024",
            "--throughput",
            "-1",
            "--command-config",
            producer,
            check=False,
        )
        assert "SaslAuthenticationException" in result.stdout + result.stderr, result
        assert token_id in result.stdout + result.stderr
        assert "1 records sent" not in result.stdout, result.stdout
        wait_until(
            lambda: proxy.metric("kafka_quota_proxy_delegation_token_logins_refused_total") >= 2,
            10,
            "both refusals counted",
        )
        assert proxy.metric("kafka_quota_proxy_requests_total", listener="SASL", api="Produce") == 0
        assert proxy.metric("kafka_quota_proxy_delegation_token_lookups_total", result="answered") == 0
        for nobody in (token_id, "carol", "ANONYMOUS"):
            assert charged(proxy, nobody) == 0, nobody
    assert f"delegation token {token_id} refused" in caplog.text
    assert hmac not in caplog.text
