"""The Kafka brokers of docker-compose.yml and of deploy/k8s/sidecar/statefulset.yaml have the same settings: every
KAFKA_* variable and CLUSTER_ID of compose's kafka-N equals pod N-1's, once addresses, node ids and the data path are
normalized by the named rules of tests/kafka_settings.py (which check the wiring they hide: voters at each node's
CONTROLLER listener, log dirs on the data volume). The tests run Apache Kafka with the compose file's settings
(tests/kafka_cluster.py; checked against the running brokers by tests/integration/kafka/test_compose_layout.py),
so what the tests prove is what both deployments run. Both run the Kafka version the tests fetch."""

import copy
import importlib.util

import pytest

from tests import kafka_settings as ks


def kafka_version() -> str:
    """tools/fetch_kafka.py's pinned version (tools/ is not a package)."""
    spec = importlib.util.spec_from_file_location("fetch_kafka", ks.ROOT / "tools" / "fetch_kafka.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.KAFKA_VERSION


def differences(compose: dict[str, str], k8s: dict[str, str]) -> dict[str, tuple]:
    compose = {key: value for key, value in compose.items() if key not in ks.COMPOSE_ONLY}
    return {
        key: (compose.get(key), k8s.get(key))
        for key in sorted(compose.keys() | k8s.keys())
        if compose.get(key) != k8s.get(key)
    }


def test_both_layouts_have_three_nodes():
    assert sorted(ks.compose_brokers()) == [1, 2, 3]
    assert ks.statefulset()["spec"]["replicas"] == 3


@pytest.mark.parametrize("node_id", [1, 2, 3])
def test_k8s_pod_has_the_settings_of_the_compose_broker(node_id):
    """compose kafka-<node_id> and pod kafka-<node_id - 1>: equal but for the normalized addresses, ids and paths."""
    compose, k8s = ks.compose_normalized(node_id), ks.k8s_normalized(node_id - 1)
    assert not differences(compose, k8s), f"(compose, k8s) differ: {differences(compose, k8s)}"
    assert len(compose) - len(ks.COMPOSE_ONLY) >= 15


def test_compose_only_settings_are_in_compose_only():
    """Each exception is still needed: in every compose broker, in no pod."""
    for key in ks.COMPOSE_ONLY:
        assert all(key in ks.compose_env(n) for n in ks.compose_brokers()), key
        assert key not in ks.k8s_env(0), f"{key} is in the StatefulSet: drop it from COMPOSE_ONLY"


def test_the_client_listener_only_the_sidecar_reaches_is_loopback_in_both():
    """CLIENT: loopback, the sidecar's upstream; REPLICATION and PROXIES (the proxies' own clients): no proxy in front."""
    for env in [ks.compose_env(n) for n in ks.compose_brokers()] + [ks.k8s_env(i) for i in range(3)]:
        listeners = ks.listener_map(env["KAFKA_LISTENERS"])
        assert listeners["CLIENT"][0] == "127.0.0.1"
        assert env["KAFKA_INTER_BROKER_LISTENER_NAME"] == "REPLICATION"
        advertised = ks.listener_map(env["KAFKA_ADVERTISED_LISTENERS"])
        assert advertised["REPLICATION"][1] == listeners["REPLICATION"][1]
        assert advertised["PROXIES"][1] == listeners["PROXIES"][1], "PROXIES: the broker itself, no proxy"


def test_replication_factor_3_and_min_insync_replicas_2():
    """The 3-node layout: every topic (and Kafka's internal ones) on all three brokers, writes with acks=all
    need two of them."""
    for env in [ks.compose_env(n) for n in ks.compose_brokers()] + [ks.k8s_env(i) for i in range(3)]:
        assert env["KAFKA_DEFAULT_REPLICATION_FACTOR"] == "3"
        assert env["KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR"] == "3"
        assert env["KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR"] == "3"
        assert env["KAFKA_MIN_INSYNC_REPLICAS"] == "2"
        assert env["KAFKA_TRANSACTION_STATE_LOG_MIN_ISR"] == "2"


def test_brokers_run_the_kafka_the_tests_run():
    version = kafka_version()
    images = {service["image"] for service in ks.compose_brokers().values()} | {ks.k8s_kafka_container()["image"]}
    assert images == {f"apache/kafka:{version}"}


def test_the_comparison_finds_a_changed_setting(monkeypatch):
    """The comparison can fail: a setting changed in the StatefulSet, or a voter at another port, is found."""
    changed = copy.deepcopy(ks.statefulset())
    (kafka,) = [c for c in changed["spec"]["template"]["spec"]["containers"] if c["name"] == "kafka"]
    for item in kafka["env"]:
        if item["name"] == "KAFKA_MIN_INSYNC_REPLICAS":
            item["value"] = "1"
    monkeypatch.setattr(ks, "statefulset", lambda: changed)
    assert differences(ks.compose_normalized(1), ks.k8s_normalized(0)) == {"KAFKA_MIN_INSYNC_REPLICAS": ("2", "1")}
    for item in kafka["env"]:
        if item["name"] == "KAFKA_CONTROLLER_QUORUM_VOTERS":
            item["value"] = item["value"].replace(
                "kafka-2.kafka.$(POD_NAMESPACE).svc:9093", "kafka-2.kafka.$(POD_NAMESPACE).svc:9094"
            )
    with pytest.raises(AssertionError, match="voter 2"):
        ks.k8s_normalized(0)


def test_the_comparison_finds_a_setting_only_one_side_has(monkeypatch):
    changed = copy.deepcopy(ks.statefulset())
    (kafka,) = [c for c in changed["spec"]["template"]["spec"]["containers"] if c["name"] == "kafka"]
    kafka["env"].append({"name": "KAFKA_NUM_PARTITIONS", "value": "6"})
    monkeypatch.setattr(ks, "statefulset", lambda: changed)
    assert differences(ks.compose_normalized(2), ks.k8s_normalized(1)) == {"KAFKA_NUM_PARTITIONS": (None, "6")}
