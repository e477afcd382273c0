"""deploy/k8s/strimzi: the cluster-mode proxy in front of a Strimzi-managed cluster, as rendered by Kustomize.

Strimzi's Kafka and KafkaNodePool resources are custom resources, which kubernetes-validate has no schema for. Their
schemas (CustomResourceDefinitions) are generated when Strimzi is built and are not in any artifact on Maven Central
(`io.strimzi:api` carries the model classes only), so the tests check what the proxies depend on, field by field, with
the field names of Strimzi's `kafka.strimzi.io/v1` API; and, when ``KQP_STRIMZI_CRDS`` names a folder holding Strimzi's
040-Crd-kafka.yaml and 045-Crd-kafkanodepool.yaml (packaging/install/cluster-operator/ of a Strimzi release), validate
both resources against those schemas, unknown fields rejected as `kubectl apply` does.

What the proxies depend on: the listener they forward to (which their own clients use too) is a plain internal
listener that only the proxies' pods may reach (Strimzi turns networkPolicyPeers into its NetworkPolicy) and that
advertises the brokers' own addresses (the proxy learns where each broker is from it), proxy.yaml names it through
the cluster's bootstrap Service, and the proxy serves a port for each broker node id Strimzi assigns.
"""

import os
import re
from pathlib import Path

import pytest
import yaml

from tests import k8s_render as k8s

OVERLAY = "strimzi"
DOCS_PAGE = k8s.ROOT / "docs" / "deployment-strimzi.md"


def kafka() -> dict:
    return k8s.one(k8s.render(OVERLAY), "Kafka")


def node_pools() -> list[dict]:
    return [d for d in k8s.render(OVERLAY) if d["kind"] == "KafkaNodePool"]


def listener(name: str) -> dict:
    (found,) = [lc for lc in kafka()["spec"]["kafka"]["listeners"] if lc["name"] == name]
    return found


def kafka_listener_name(lc: dict) -> str:
    """The name the Kafka brokers know a Strimzi listener by (broker config, metrics, ACL hosts): NAME-PORT."""
    return f"{lc['name'].upper()}-{lc['port']}"


def broker_node_ids() -> list[int]:
    return sorted(
        n
        for pool in node_pools()
        if "broker" in pool["spec"]["roles"]
        for n in k8s.node_pool_ids(k8s.render(OVERLAY))[pool["metadata"]["name"]]
    )


def proxy_config() -> dict:
    return yaml.safe_load(k8s.pod_proxy_config(OVERLAY).text)


def test_resources_use_strimzi_v1_and_name_the_cluster():
    assert kafka()["apiVersion"] == "kafka.strimzi.io/v1"
    assert kafka()["metadata"]["namespace"] == k8s.NAMESPACE
    for pool in node_pools():
        assert pool["apiVersion"] == "kafka.strimzi.io/v1"
        assert pool["metadata"]["labels"]["strimzi.io/cluster"] == kafka()["metadata"]["name"]
        assert pool["metadata"]["namespace"] == k8s.NAMESPACE
        assert set(pool["spec"]["roles"]) <= {"broker", "controller"} and pool["spec"]["storage"]["type"]
    assert sorted(r for pool in node_pools() for r in pool["spec"]["roles"]) == ["broker", "controller"]


def test_node_id_annotations_parse_as_strimzi_documents_them():
    assert k8s.node_id_range("[0, 1, 2, 10-12, 30]") == [0, 1, 2, 10, 11, 12, 30]
    assert k8s.node_id_range("[1002-1000]") == [1002, 1001, 1000]
    assert k8s.node_pool_ids(
        [
            {
                "kind": "KafkaNodePool",
                "metadata": {"name": "a", "annotations": {"strimzi.io/next-node-ids": "[9-5]"}},
                "spec": {"replicas": 2},
            }
        ]
    ) == {"a": [5, 6]}
    pools = [
        {
            "kind": "KafkaNodePool",
            "metadata": {"name": name, "annotations": {"strimzi.io/next-node-ids": ids}},
            "spec": {"replicas": 3},
        }
        for name, ids in (("a", "[0-3]"), ("b", "[3-99]"))
    ]
    assert k8s.node_pool_ids(pools) == {"a": [0, 1, 2], "b": [3, 4, 5]}
    pools[0]["spec"]["replicas"] = 4
    assert k8s.node_pool_ids(pools) == {"a": [0, 1, 2, 3], "b": [4, 5, 6]}


def test_the_proxy_serves_a_port_for_each_broker_node_id_strimzi_assigns():
    """Brokers 3, 4, 5 (the controllers take 0-2): ports 9100 + id, in the container and the Service."""
    ids = broker_node_ids()
    assert ids == [3, 4, 5]
    docs = k8s.render(OVERLAY)
    (lc,) = [lc for lc in proxy_config()["listeners"] if not lc.get("admin")]  # the admin listener: loopback only
    service_ports = {p["name"]: p["port"] for p in k8s.one(docs, "Service")["spec"]["ports"]}
    container_ports = {p["name"]: p["containerPort"] for p in k8s.container(docs)["ports"]}
    for ports in (service_ports, container_ports):
        assert {name: port for name, port in ports.items() if name.startswith("broker-")} == {
            f"broker-{n}": lc["broker_port_base"] + n for n in ids
        }


def bootstrap_service(lc: dict) -> str:
    return f"{kafka()['metadata']['name']}-kafka-bootstrap.{k8s.NAMESPACE}.svc:{lc['port']}"


def only_the_proxies(lc: dict) -> bool:
    labels = k8s.workload(k8s.render(OVERLAY))["spec"]["template"]["metadata"]["labels"]
    peers = lc.get("networkPolicyPeers", [])
    return bool(peers) and all(
        set(p) == {"podSelector"} and p["podSelector"]["matchLabels"].items() <= labels.items() for p in peers
    )


def test_the_proxies_forward_to_a_plain_internal_listener_that_advertises_the_brokers():
    lc = listener("proxied")
    assert (lc["type"], lc["tls"], lc.get("authentication")) == ("internal", False, None)
    assert "brokers" not in lc.get("configuration", {}), (
        "advertisedHost/advertisedPort here would send the proxy to itself: it learns the brokers from this listener"
    )
    cfg = proxy_config()
    assert cfg["upstream"]["bootstrap_servers"] == [bootstrap_service(lc)]
    assert "tls" not in cfg["upstream"] and "sasl" not in cfg["upstream"]
    assert only_the_proxies(lc), "a client reaching this listener would bypass every quota"


def test_the_proxies_own_clients_reach_only_listeners_no_proxy_is_in_front_of():
    """Their bootstrap (upstream.own_clients, or the upstream's where it is not set) is a listener of this cluster
    that advertises the brokers themselves and only the proxies reach: in cluster mode `proxied` is one."""
    upstream = proxy_config()["upstream"]
    own = upstream.get("own_clients", upstream)
    listeners = {bootstrap_service(lc): lc for lc in kafka()["spec"]["kafka"]["listeners"]}
    for server in own["bootstrap_servers"]:
        lc = listeners[server]
        assert only_the_proxies(lc) and "brokers" not in lc.get("configuration", {}), lc["name"]


def test_the_deployment_page_names_each_listener_and_port():
    """docs/deployment-strimzi.md's tables: each listener by its Strimzi and its Kafka name, each broker's port."""
    text = DOCS_PAGE.read_text()
    for lc in kafka()["spec"]["kafka"]["listeners"]:
        assert f"`{lc['name']}`" in text and f"`{kafka_listener_name(lc)}`" in text, lc["name"]
    for node_id in broker_node_ids():
        assert f"| {node_id} | {proxy_config()['listeners'][0]['broker_port_base'] + node_id} |" in text


def strict(schema: dict) -> dict:
    """A CRD's structural schema as the API server applies it with strict field validation: an object with
    `properties` and no `additionalProperties` or x-kubernetes-preserve-unknown-fields rejects other fields."""
    if not isinstance(schema, dict):
        return schema
    out = {k: (strict(v) if k in ("items", "additionalProperties") else v) for k, v in schema.items()}
    if "properties" in schema:
        out["properties"] = {k: strict(v) for k, v in schema["properties"].items()}
        if "additionalProperties" not in schema and not schema.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
    for key in ("oneOf", "anyOf", "allOf"):
        if key in schema:
            out[key] = [strict(s) for s in schema[key]]
    return out


def crd_schema(kind: str, version: str) -> dict:
    folder = os.environ.get("KQP_STRIMZI_CRDS")
    if not folder:
        pytest.skip(
            "KQP_STRIMZI_CRDS is not set: the folder of Strimzi's CRDs (packaging/install/cluster-operator/ "
            "of a release), which no Maven Central artifact carries"
        )
    for path in sorted(Path(folder).glob("*-Crd-*.yaml")):
        crd = yaml.safe_load(path.read_text())
        if crd["spec"]["names"]["kind"] == kind:
            (served,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
            return strict(served["schema"]["openAPIV3Schema"])
    raise AssertionError(f"no CRD of {kind} in {folder}")


@pytest.mark.parametrize("kind", ["Kafka", "KafkaNodePool"])
def test_strimzi_resources_are_valid_against_strimzis_crds(kind):
    jsonschema = pytest.importorskip("jsonschema")
    schema = crd_schema(kind, "v1")
    docs = [d for d in k8s.render(OVERLAY) if d["kind"] == kind]
    assert docs
    for doc in docs:
        jsonschema.validate({k: v for k, v in doc.items() if k != "metadata"}, schema)
    broken = {k: v for k, v in docs[0].items() if k != "metadata"}
    broken["spec"] = {**broken["spec"], "replicaz": 3}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)


def test_listener_names_are_ones_strimzi_accepts():
    for lc in kafka()["spec"]["kafka"]["listeners"]:
        assert re.fullmatch(r"[a-z0-9]{1,11}", lc["name"]), lc["name"]
        assert lc["port"] not in (9090, 9091), "Strimzi's own: the controllers and replication"
        assert {"name", "port", "type", "tls"} <= lc.keys()
