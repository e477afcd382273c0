"""Apache Kafka behind the proxy: clusters shared by the tests of one pytest-xdist worker.

``kafka1`` (one node) and ``kafka3`` (three nodes, replication factor 3, ``min.insync.replicas`` 2) are laid out as
docker-compose.yml lays them out (tests/kafka_cluster.py) and started once, on first use, by the worker that runs
the tests needing them: every test using one is put in that cluster's xdist group ("kafka1" / "kafka3"), so one
worker starts each and runs its tests one after another (but for tests marked ``measures_rate``, which join their
rate group, whose worker then starts a cluster of its own) (a sidecar proxy binds the port its node advertises, so two
tests cannot front one cluster at once). Tests leave the cluster as they found it for the next one: their own
topics (``unique_topic``), their own client ids and users, their own quotas removed.

kafka1 also has the listeners the security tests need, each advertised as a proxy port of its own:
SASL (SASL_PLAINTEXT; PLAIN users admin, alice, bob; SCRAM-SHA-512 users carol, dave; delegation tokens enabled,
``delegation.token.secret.key``) and SSL (a test CA's server certificate for 127.0.0.1).
"""

from __future__ import annotations

import pytest

from tests.kafka_cluster import ExtraListener, KafkaCluster
from tests.tls_certs import Authority

PLAIN_USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
SCRAM_USERS = {"carol": "carol-secret", "dave": "dave-secret"}
DELEGATION_TOKEN_SECRET = "kt-delegation-token-secret"  # kafka1 issues delegation tokens (they log in with SCRAM)


def pytest_itemcollected(item):
    """Marked as each test is collected: xdist turns the groups into node ids in its own
    ``pytest_collection_modifyitems``, before any conftest's (as tests/conftest.py explains)."""
    if item.get_closest_marker("measures_rate") is not None:
        return  # in its rate group (tests/conftest.py): that worker starts the cluster too, and no more than the
        # rate groups' measurements share the cores
    names = getattr(item, "fixturenames", ())
    for cluster in ("kafka3", "kafka1"):
        if cluster in names:
            item.add_marker(pytest.mark.xdist_group(cluster))
            break


@pytest.fixture(scope="session")
def kafka_tls(tmp_path_factory):
    """The test CA and the certificate the kafka1 SSL listener serves (127.0.0.1 and localhost)."""
    authority = Authority(tmp_path_factory.mktemp("kafka-tls"))
    server = authority.server()
    return authority, server


@pytest.fixture(scope="session")
def kafka1(kafka_tls):
    authority, server = kafka_tls
    keystore = authority.directory / "kafka-keystore.pem"
    keystore.write_text(open(server.key).read() + open(server.cert).read())
    plain = " ".join(f'user_{name}="{secret}"' for name, secret in PLAIN_USERS.items())
    listeners = {
        "SASL": ExtraListener(
            "SASL_PLAINTEXT",
            properties={
                "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
                "plain.sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required "
                f'username="admin" password="admin-secret" {plain};',
                "scram-sha-512.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            },
        ),
        "SSL": ExtraListener(
            "SSL",
            properties={
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": str(keystore),
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": authority.pem.cert,
            },
        ),
    }
    scram = [
        arg
        for name, secret in SCRAM_USERS.items()
        for arg in ("--add-scram", f"SCRAM-SHA-512=[name={name},password={secret}]")
    ]
    cluster = KafkaCluster(
        1,
        "kafka1",
        extra_listeners=listeners,
        format_args=scram,
        properties={"delegation.token.secret.key": DELEGATION_TOKEN_SECRET},
    ).start()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def kafka3():
    cluster = KafkaCluster(3, "kafka3").start()
    yield cluster
    cluster.stop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failing test against Apache Kafka carries the tail of its cluster's logs in its report (the whole logs stay
    in the cluster's folder under build/kafka-tests/, named in the section)."""
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        for name in ("kafka1", "kafka3"):
            cluster = getattr(item, "funcargs", {}).get(name)
            if isinstance(cluster, KafkaCluster):
                report.sections.append((f"Apache Kafka ({name}, logs in {cluster.directory})", cluster.log_tail(20)))
