"""The Kafka brokers' settings as the deployment files give them, normalized so docker-compose.yml's three brokers,
the three pods of deploy/k8s/sidecar's StatefulSet (as `kubectl kustomize` renders it) and the brokers the tests run
can be compared setting by setting.

What legitimately differs between them is the addresses (one shared network namespace with a port block per broker
in the compose file, a pod per broker behind a headless Service in Kubernetes, loopback test ports in the tests),
the node ids (1-3 in the compose file, the pod index 0-2 in Kubernetes) and the data directory's path. Those, and
only those, are normalized here, each by a named rule that also checks the wiring it hides:

- ``KAFKA_NODE_ID`` -> ``<node>`` (after checking it is the node's id);
- ``KAFKA_LISTENERS`` / ``KAFKA_ADVERTISED_LISTENERS`` -> ``NAME://<address>`` in the order of the names (names
  kept; Kafka gives the order no meaning), and ``KAFKA_LISTENER_SECURITY_PROTOCOL_MAP`` in the order of the names;
- ``KAFKA_CONTROLLER_QUORUM_VOTERS`` -> ``<node k>@<address>`` (k: the voter's position among the layout's node ids,
  after checking the ids are the layout's and each address is that node's CONTROLLER listener);
- ``KAFKA_LOG_DIRS`` -> ``<data volume>`` (after checking it is where the data volume is mounted).

Everything else (replication factors, ``min.insync.replicas``, roles, protocol map, ...) is compared verbatim.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from tests import k8s_render

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = ROOT / "docker-compose.yml"

# Settings only the compose file has, each with the reason; anything else that differs fails the comparison.
COMPOSE_ONLY = {
    # try-it: a new consumer group starts at once; on Kubernetes (production) Kafka's 3 s default lets a group's
    # members join before its first rebalance
    "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS",
}

DATA_VOLUME = "<data volume>"


def compose_services() -> dict:
    return yaml.safe_load(COMPOSE.read_text())["services"]


def compose_brokers() -> dict[int, dict]:
    """node id -> docker-compose.yml's kafka-<id> service."""
    return {
        int(name.split("-")[1]): service
        for name, service in compose_services().items()
        if re.fullmatch(r"kafka-\d+", name)
    }


def compose_env(node_id: int) -> dict[str, str]:
    """kafka-<node_id>'s broker settings (CLUSTER_ID and KAFKA_*) as strings, as the container sees them."""
    env = compose_brokers()[node_id]["environment"]
    return {key: str(value) for key, value in env.items() if key == "CLUSTER_ID" or key.startswith("KAFKA_")}


def compose_data_mount(node_id: int) -> str:
    """Where kafka-<node_id>'s data volume is mounted."""
    (mount,) = [v.split(":")[1] for v in compose_brokers()[node_id]["volumes"] if v.split(":")[0].endswith("-data")]
    return mount


def statefulset() -> dict:
    """The sidecar StatefulSet as deploy/k8s/sidecar renders."""
    return k8s_render.workload(k8s_render.render("sidecar"))


def k8s_kafka_container() -> dict:
    (container,) = [c for c in statefulset()["spec"]["template"]["spec"]["containers"] if c["name"] == "kafka"]
    return container


def k8s_env(pod_index: int) -> dict[str, str]:
    """The kafka container's broker settings (CLUSTER_ID and KAFKA_*) in pod kafka-<pod_index>, as Kubernetes
    resolves them (tests/k8s_render.py)."""
    resolved = k8s_render.pod_env([statefulset()], pod_index, "kafka")
    return {key: value for key, value in resolved.items() if key == "CLUSTER_ID" or key.startswith("KAFKA_")}


def k8s_data_mount() -> str:
    (mount,) = [m["mountPath"] for m in k8s_kafka_container()["volumeMounts"] if m["name"] == "data"]
    return mount


def k8s_pod_host(pod_index: int) -> str:
    """The pod's stable DNS name (the headless Service of the StatefulSet)."""
    sts = statefulset()
    return f"{sts['metadata']['name']}-{pod_index}.{sts['spec']['serviceName']}.{sts['metadata']['namespace']}.svc"


def listener_map(value: str) -> dict[str, tuple[str, int]]:
    """'CLIENT://h:1,REPLICATION://h:2' -> {"CLIENT": ("h", 1), ...} in order."""
    out = {}
    for item in value.split(","):
        name, address = item.split("://")
        host, port = address.rsplit(":", 1)
        out[name] = (host, int(port))
    return out


def voters(value: str) -> dict[int, tuple[str, int]]:
    """'1@h:1,2@h:2' -> {1: ("h", 1), 2: ("h", 2)}"""
    out = {}
    for item in value.split(","):
        node, address = item.split("@")
        host, port = address.rsplit(":", 1)
        out[int(node)] = (host, int(port))
    return out


def normalized(
    env: dict[str, str], node_id: int, node_ids: list[int], controller_addresses: dict[int, set], data_mount: str
) -> dict[str, str]:
    """``env`` (one broker's CLUSTER_ID and KAFKA_*) with its addresses, node ids and data path replaced by
    placeholders, by the rules of the module's docstring. ``node_ids``: the layout's node ids in order;
    ``controller_addresses``: node id -> the (host, port) pairs its CONTROLLER listener is reached at; raises
    AssertionError where the wiring a rule hides is wrong."""
    out = dict(env)
    assert out["KAFKA_NODE_ID"] == str(node_id), f"node {node_id}: KAFKA_NODE_ID is {out['KAFKA_NODE_ID']}"
    out["KAFKA_NODE_ID"] = "<node>"
    for key in ("KAFKA_LISTENERS", "KAFKA_ADVERTISED_LISTENERS"):
        out[key] = ",".join(f"{name}://<address>" for name in sorted(listener_map(out[key])))
    protocols = "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"
    out[protocols] = ",".join(sorted(out[protocols].split(",")))
    quorum = voters(out["KAFKA_CONTROLLER_QUORUM_VOTERS"])
    assert list(quorum) == node_ids, f"node {node_id}: the voters {list(quorum)} are not the nodes {node_ids}"
    for voter, address in quorum.items():
        assert address in controller_addresses[voter], (
            f"node {node_id}: voter {voter} at {address}, not at its CONTROLLER listener {controller_addresses[voter]}"
        )
    out["KAFKA_CONTROLLER_QUORUM_VOTERS"] = ",".join(f"<node {k}>@<address>" for k in range(1, len(quorum) + 1))
    assert out["KAFKA_LOG_DIRS"] == data_mount, f"node {node_id}: log dirs {out['KAFKA_LOG_DIRS']} not {data_mount}"
    out["KAFKA_LOG_DIRS"] = DATA_VOLUME
    return out


def compose_normalized(node_id: int) -> dict[str, str]:
    ids = sorted(compose_brokers())
    controllers = {}
    for other in ids:
        host, port = listener_map(compose_env(other)["KAFKA_LISTENERS"])["CONTROLLER"]
        controllers[other] = {(host, port)}  # one network namespace: reached at the address it is bound to
    return normalized(compose_env(node_id), node_id, ids, controllers, compose_data_mount(node_id))


def k8s_normalized(pod_index: int) -> dict[str, str]:
    ids = list(range(statefulset()["spec"]["replicas"]))
    controllers = {}
    for other in ids:
        _, port = listener_map(k8s_env(other)["KAFKA_LISTENERS"])["CONTROLLER"]
        controllers[other] = {(k8s_pod_host(other), port)}  # a pod per broker: its DNS name, its listener's port
    return normalized(k8s_env(pod_index), pod_index, ids, controllers, k8s_data_mount())
