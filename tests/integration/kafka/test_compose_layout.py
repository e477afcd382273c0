"""The brokers the tests run are docker-compose.yml's: every setting of compose's kafka-N (KAFKA_* as the apache/kafka
image turns them into server.properties) is in the server.properties the ``kafka3`` fixture's node N ran with,
unchanged but for the addresses and the data path (normalized as tests/kafka_settings.py does for compose and
Kubernetes), and the tests add only what tests/kafka_cluster.py lists (fewer partitions for the internal topics, the
DIRECT listener). With tests/test_deploy_kafka_settings.py (compose = the Kubernetes StatefulSet) the three agree."""

from __future__ import annotations

import pytest

from tests.kafka_cluster import TEST_ONLY
from tests.kafka_settings import compose_data_mount, compose_env, listener_map, normalized, voters

pytestmark = pytest.mark.integration


def properties_env(path) -> dict[str, str]:
    """server.properties as the environment the apache/kafka image would have turned into it (foo.bar ->
    KAFKA_FOO_BAR)."""
    out = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            key, value = line.split("=", 1)
            out["KAFKA_" + key.upper().replace(".", "_")] = value
    return out


def test_the_brokers_run_with_the_compose_settings(kafka3):
    ids = [node.node_id for node in kafka3.nodes]
    assert ids == [1, 2, 3]
    ran = {node.node_id: properties_env(node.directory / "server.properties") for node in kafka3.nodes}
    controllers = {node_id: {listener_map(env["KAFKA_LISTENERS"])["CONTROLLER"]} for node_id, env in ran.items()}
    compose_controllers = {
        node_id: {listener_map(compose_env(node_id)["KAFKA_LISTENERS"])["CONTROLLER"]} for node_id in ids
    }
    added = {"KAFKA_" + key.upper().replace(".", "_"): value for key, value in TEST_ONLY.items()}
    for node in kafka3.nodes:
        env = ran[node.node_id]
        compose = compose_env(node.node_id)
        assert compose.pop("CLUSTER_ID") == kafka3.cluster_id
        # DIRECT: the tests' own plain listener (direct clients, cluster-mode proxies), on top of compose's
        listeners, advertised = listener_map(env["KAFKA_LISTENERS"]), listener_map(env["KAFKA_ADVERTISED_LISTENERS"])
        assert listeners.pop("DIRECT") == advertised.pop("DIRECT") == ("127.0.0.1", node.direct_port)
        protocols = env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(",")
        assert protocols.pop() == "DIRECT:PLAINTEXT"
        env["KAFKA_LISTENERS"] = ",".join(f"{n}://{h}:{p}" for n, (h, p) in listeners.items())
        env["KAFKA_ADVERTISED_LISTENERS"] = ",".join(f"{n}://{h}:{p}" for n, (h, p) in advertised.items())
        env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"] = ",".join(protocols)
        assert advertised["CLIENT"] == ("127.0.0.1", node.proxy_port), "CLIENT advertises the node's sidecar"
        assert advertised["PROXIES"] == listeners["PROXIES"] == ("127.0.0.1", node.proxies_port), "PROXIES: itself"
        assert list(voters(env["KAFKA_CONTROLLER_QUORUM_VOTERS"])) == ids
        for key, value in added.items():
            assert env.pop(key) == value, key
        expected = normalized(compose, node.node_id, ids, compose_controllers, compose_data_mount(node.node_id))
        got = normalized(env, node.node_id, ids, controllers, str(node.data_dir))
        assert got == expected, {
            k: (expected.get(k), got.get(k)) for k in expected.keys() | got.keys() if expected.get(k) != got.get(k)
        }
        assert env["KAFKA_MIN_INSYNC_REPLICAS"] == "2" and env["KAFKA_DEFAULT_REPLICATION_FACTOR"] == "3"
