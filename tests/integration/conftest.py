"""The brokers of the integration tests.

- ``broker``: a Tansu broker advertising itself, one per module, for tests that start their own proxies in front.
- ``kafka1`` (one node) and ``kafka3`` (three nodes, replication factor 3, ``min.insync.replicas`` 2): Apache Kafka,
  laid out as docker-compose.yml lays it out (tests/kafka_cluster.py), shared by the tests of one pytest-xdist
  worker and started once, on first use, by the worker that runs the tests needing it: every test using one is put
  in that cluster's xdist group ("kafka1" / "kafka3"), so one worker starts each and runs its tests one after
  another, its measurements (``measures_rate``) included (a sidecar proxy binds the port its node advertises, so two
  tests cannot front one cluster at once).
  Tests leave the cluster as they found it for the next one: their own topics (``unique_topic``), their own client
  ids and users, their own quotas removed.
- ``upstream``: a test written once over both brokers runs once on Tansu (``[tansu]``) and once on ``kafka1``
  (``[kafka1]``); the Kafka item goes in kafka1's xdist group as if it named the cluster (tests/integration/upstreams.py
  says what a test gets and what Tansu does not do).

kafka1 also has the listeners the security tests need, each advertised as a proxy port of its own:
SASL (SASL_PLAINTEXT; PLAIN users admin, alice, bob; SCRAM-SHA-512 users carol, dave; delegation tokens enabled,
``delegation.token.secret.key``) and SSL (a test CA's server certificate for 127.0.0.1).
"""

from __future__ import annotations

import pytest

from tests.harness import Tansu, free_port
from tests.integration.upstreams import KafkaUpstream, TansuUpstream, Upstream
from tests.kafka_cluster import CLUSTERS, ExtraListener, KafkaCluster, cluster_of
from tests.tls_certs import Authority
from tests.watchdog import timeout_of

PLAIN_USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
SCRAM_USERS = {"carol": "carol-secret", "dave": "dave-secret"}
DELEGATION_TOKEN_SECRET = "kt-delegation-token-secret"  # kafka1 issues delegation tokens (they log in with SCRAM)


def pytest_itemcollected(item):
    """Marked as each test is collected: xdist turns the groups into node ids in its own
    ``pytest_collection_modifyitems``, before any conftest's (as tests/conftest.py explains)."""
    if item.get_closest_marker("measures_rate") is not None:
        return  # in its group (tests/conftest.py): its cluster's, unless the mark names another
    cluster = cluster_of(item)
    if cluster is not None:
        item.add_marker(pytest.mark.xdist_group(cluster))


def pytest_collection_modifyitems(config, items):
    """A test on a session cluster may be the first of its group and start the cluster (its setup is inside the
    test's timeout): its timeout grows by what a start may take (:data:`CLUSTER_START_S`), so a start slowed by a
    busy machine is not taken for the test's own hang. 87 s of a 120 s timeout went to such a start at load 2; at
    load 19 it passed the timeout. So does a test marked ``own_cluster``, whose module starts a cluster of its own
    (three nodes: the test of shipped Kubernetes configurations, 58-70 s in all in a run of the suite, ran past its
    120 s in each of two runs made beside a second suite, and took 130 s in a third)."""
    for item in items:
        if cluster_of(item) is None and item.get_closest_marker("own_cluster") is None:
            continue
        item.add_marker(pytest.mark.timeout(timeout_of(item) + CLUSTER_START_S), append=False)


# formatting, the brokers' start and registration (START_TIMEOUT_S, 90), the warm-up's writes and group read
CLUSTER_START_S = 180


@pytest.fixture(autouse=True)
def _session_cluster_running(request):
    """A test on a session cluster starts with every node of it running. A node found exited is started again for
    this test and the ones after, and this test errors, naming it, with the tail of the cluster's logs: one test
    reported, not every later test of the worker waiting out its timeout against a broker that is gone."""
    name = cluster_of(request.node)
    if name is None:
        return
    cluster = request.getfixturevalue(name)
    if cluster.all_running():
        return
    if name in _UNREVIVED:
        pytest.fail(f"{name} could not be restarted before an earlier test: {_UNREVIVED[name]}")
    tail = cluster.log_tail(20)  # before the restart's own lines
    try:
        restarted = cluster.revive()
    except Exception as error:  # noqa: BLE001  (told once; the tests after fail at once, not each after a wait)
        _UNREVIVED[name] = f"{error!r}"[:2000]
        raise
    pytest.fail(f"{name}: node(s) {restarted} had exited before this test; restarted for the tests after.\n{tail}")


_UNREVIVED: dict[str, str] = {}  # a session cluster whose restart failed, and why


@pytest.fixture(scope="module")
def broker():
    """A Tansu broker advertising itself (no proxy in front: the test starts its own); yields its port."""
    port = free_port()
    tansu = Tansu(port, advertised=f"127.0.0.1:{port}").start()
    try:
        yield port
    finally:
        tansu.stop()


@pytest.fixture(params=["tansu", "kafka1"])
def upstream(request) -> Upstream:
    """The broker behind the proxy, Tansu or kafka1 (a test may parametrize it itself, ``indirect=True``, to mark one
    of the two)."""
    if request.param == "tansu":
        return TansuUpstream()
    return KafkaUpstream(request.getfixturevalue(request.param))


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
        funcargs = getattr(item, "funcargs", {})
        upstream = funcargs.get("upstream")
        for name in CLUSTERS:
            cluster = funcargs.get(name)
            if cluster is None and isinstance(upstream, KafkaUpstream) and upstream.name == name:
                cluster = upstream.cluster
            if isinstance(cluster, KafkaCluster):
                report.sections.append((f"Apache Kafka ({name}, logs in {cluster.directory})", cluster.log_tail(20)))
