"""The two ways of running proxies, as deploy/k8s/ renders them (tests/k8s_render.py). Sidecar: the broker
advertises its proxy, the volume publisher reads the broker's data volume with the pod's own broker id (from the
environment: no init container). Cluster mode: a port per broker node id in
the container and the Service, and the TLS example overlay differing from its base only by TLS."""

import ipaddress

import pytest
import yaml

from tests import k8s_render as k8s
from tests.kafka_settings import listener_map

# the overlays in cluster mode and the node ids of the brokers they are in front of
CLUSTER_NODE_IDS = {"cluster": [0, 1, 2], "examples/cluster-tls": [0, 1, 2], "strimzi": [3, 4, 5]}


def kafka_env(docs: list[dict], pod_index: int) -> dict[str, str]:
    return k8s.pod_env(docs, pod_index, "kafka")


def proxy_config(overlay: str, pod_index: int = 0) -> dict:
    return yaml.safe_load(k8s.pod_proxy_config(overlay, pod_index).text)


def test_each_sidecar_publishes_its_own_broker_id_read_from_the_environment():
    docs = k8s.render("sidecar")
    for pod_index in range(k8s.replicas(docs)):
        pod = k8s.pod_proxy_config("sidecar", pod_index)
        assert "${env:KAFKA_NODE_ID}" in pod.template, "one file for every broker"
        assert proxy_config("sidecar", pod_index)["volume_usage"]["publisher"]["broker_id"] == pod_index
        assert pod.env["KAFKA_NODE_ID"] == kafka_env(docs, pod_index)["KAFKA_NODE_ID"] == str(pod_index)


def test_sidecar_broker_advertises_its_proxy_and_the_publisher_reads_its_volume():
    docs = k8s.render("sidecar")
    e = kafka_env(docs, 0)
    listeners = listener_map(e["KAFKA_LISTENERS"])
    advertised = listener_map(e["KAFKA_ADVERTISED_LISTENERS"])
    cfg = proxy_config("sidecar")
    upstream = cfg["upstream"]["bootstrap_servers"][0]
    (client,) = [name for name, (host, port) in listeners.items() if f"{host}:{port}" == upstream]
    assert client != e["KAFKA_INTER_BROKER_LISTENER_NAME"]
    assert listeners[client][0] == "127.0.0.1", "only the proxy reaches the broker's client listener"
    proxy_port = int(cfg["listeners"][0]["bind"].rpartition(":")[2])
    assert advertised[client] == (f"kafka-0.kafka.{k8s.NAMESPACE}.svc", proxy_port)
    proxy = k8s.container(docs)
    assert [p["containerPort"] for p in proxy["ports"] if p["name"] == "client"] == [proxy_port]
    (log_dir,) = cfg["volume_usage"]["publisher"]["log_dirs"]
    assert e["KAFKA_LOG_DIRS"] == log_dir
    proxy_mounts = {m["mountPath"]: m for m in proxy["volumeMounts"]}
    kafka_mounts = {m["mountPath"]: m for m in k8s.container(docs, "kafka")["volumeMounts"]}
    assert proxy_mounts[log_dir]["name"] == kafka_mounts[log_dir]["name"] and proxy_mounts[log_dir]["readOnly"]
    sts = k8s.workload(docs)
    assert k8s.one(docs, "Service", sts["spec"]["serviceName"])["spec"]["clusterIP"] == "None"


def test_sidecar_own_clients_use_the_proxies_listener_that_only_the_brokers_reach():
    """upstream.own_clients is the pod's PROXIES listener, which advertises the broker itself (no sidecar in the
    way), is in the headless Service, and which the NetworkPolicy opens to the brokers' pods only, as it does
    replication and the controllers; the proxy's client port and metrics are open to all."""
    docs = k8s.render("sidecar")
    cfg = proxy_config("sidecar")
    (own,) = cfg["upstream"]["own_clients"]["bootstrap_servers"]
    own_host, own_port = own.rsplit(":", 1)
    for pod_index in range(k8s.replicas(docs)):
        e = kafka_env(docs, pod_index)
        listeners = listener_map(e["KAFKA_LISTENERS"])
        assert own_host == "127.0.0.1" and listeners["PROXIES"] == ("0.0.0.0", int(own_port))
        assert listener_map(e["KAFKA_ADVERTISED_LISTENERS"])["PROXIES"] == (
            f"kafka-{pod_index}.kafka.{k8s.NAMESPACE}.svc",
            int(own_port),
        ), "the broker itself, not a proxy"
    headless = k8s.one(docs, "Service", k8s.workload(docs)["spec"]["serviceName"])
    assert {"name": "proxies", "port": int(own_port), "targetPort": "proxies"} in headless["spec"]["ports"]
    assert all(p["targetPort"] != "proxies" for p in k8s.one(docs, "Service", "kafka-bootstrap")["spec"]["ports"])
    assert cfg["admin_principals"] == ["User:admin"], "on PLAINTEXT (User:ANONYMOUS) no tenant is an admin"
    policy = k8s.one(docs, "NetworkPolicy")
    assert policy["spec"]["podSelector"] == {"matchLabels": k8s.workload(docs)["spec"]["selector"]["matchLabels"]}
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    opened_to_all = {p["port"] for rule in policy["spec"]["ingress"] if "from" not in rule for p in rule["ports"]}
    ports_of = {
        name: int(address.rsplit(":", 1)[1])
        for name, address in [  # the admin listener: loopback only
            (lc["name"], lc["bind"]) for lc in cfg["listeners"] if not lc.get("admin")
        ]
        + [("metrics", cfg["metrics"]["bind"])]
    }
    assert opened_to_all == set(ports_of.values())
    (brokers_only,) = [rule for rule in policy["spec"]["ingress"] if "from" in rule]
    assert brokers_only["from"] == [{"podSelector": policy["spec"]["podSelector"]}]
    e = kafka_env(docs, 0)
    unproxied = {port for name, (_, port) in listener_map(e["KAFKA_LISTENERS"]).items() if name != "CLIENT"}
    assert {p["port"] for p in brokers_only["ports"]} == unproxied


def named_ports(ports: list[dict], field: str) -> dict[str, int]:
    return {p["name"]: p[field] for p in ports}


@pytest.mark.parametrize("overlay", sorted(CLUSTER_NODE_IDS))
def test_cluster_mode_has_a_port_per_broker_node_id(overlay):
    docs = k8s.render(overlay)
    (listener,) = [lc for lc in proxy_config(overlay)["listeners"] if not lc.get("admin")]  # admin: loopback only
    base, bootstrap = listener["broker_port_base"], int(listener["bind"].rpartition(":")[2])
    container = named_ports(k8s.container(docs)["ports"], "containerPort")
    service = k8s.one(docs, "Service")
    assert service["spec"]["selector"].items() <= k8s.workload(docs)["spec"]["template"]["metadata"]["labels"].items()
    ports = {p["name"]: (p["port"], container[p["targetPort"]]) for p in service["spec"]["ports"]}
    assert ports["bootstrap"] == (bootstrap, bootstrap)
    brokers = {name: port for name, port in ports.items() if name.startswith("broker-")}
    expected = {f"broker-{n}": (base + n, base + n) for n in CLUSTER_NODE_IDS[overlay]}
    assert brokers == expected, f"clients are sent to {listener['advertised_host']}:<{base} + node id>"
    assert sorted(container) == sorted(ports), "the container serves exactly the Service's ports"
    assert listener["advertised_host"] == f"{service['metadata']['name']}.{k8s.NAMESPACE}.svc"


def without(config: dict, *listener_keys: str) -> dict:
    listeners = [{k: v for k, v in lc.items() if k not in listener_keys} for lc in config["listeners"]]
    return {**config, "listeners": listeners}


def test_the_tls_example_differs_from_its_base_only_by_tls():
    tls, base = proxy_config("examples/cluster-tls"), proxy_config("cluster")
    assert without(tls, "tls", "name") == without(base, "tls", "name")
    assert "tls" not in base["listeners"][0]
    docs = k8s.render("examples/cluster-tls")
    (mount,) = [m for m in k8s.container(docs)["volumeMounts"] if m["name"] == "tls"]
    (volume,) = [v for v in k8s.workload(docs)["spec"]["template"]["spec"]["volumes"] if v["name"] == "tls"]
    assert mount["readOnly"] and volume["secret"]["secretName"] == "kafka-quota-proxy-tls"
    listener, admin = tls["listeners"]  # the admin listener: the pod's loopback, no TLS (as in the base)
    assert admin["admin"] and "tls" not in admin
    assert listener["tls"] == {"certfile": f"{mount['mountPath']}/tls.crt", "keyfile": f"{mount['mountPath']}/tls.key"}
    assert not any(mount["mountPath"].startswith(m["mountPath"] + "/") for m in k8s.container(docs)["volumeMounts"]), (
        "not inside another mount (the ConfigMap's folder is read-only)"
    )
    pod = k8s.workload(docs)["spec"]["template"]["spec"]
    assert (
        volume["secret"]["defaultMode"] & 0o040
        and pod["securityContext"]["fsGroup"] == pod["securityContext"]["runAsGroup"]
    ), "the proxy's group reads the key"


def test_the_cluster_mode_bootstrap_servers_are_names_not_addresses():
    """A Service name survives the cluster being recreated; an IP address would not."""
    for overlay in CLUSTER_NODE_IDS:
        for server in proxy_config(overlay)["upstream"]["bootstrap_servers"]:
            host = server.rpartition(":")[0]
            with pytest.raises(ValueError):
                ipaddress.ip_address(host)
