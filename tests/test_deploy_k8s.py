"""deploy/k8s/: every manifest is valid against the Kubernetes schemas (kubernetes-validate, strict: unknown fields
rejected), and the two ways of running proxies are wired as documented: the sidecar StatefulSet (proxy beside Kafka,
the broker advertising the proxy, the volume publisher reading the broker's data volume) and the cluster-mode
Deployment + Service (a port per broker). Both: probes on /readyz and /healthz, resource requests, a
PodDisruptionBudget, a ServiceMonitor on the metrics port, and termination grace longer than the proxy's
shutdown.grace.period.ms."""

import pytest

kubernetes_validate = pytest.importorskip(
    "kubernetes_validate", reason="kubernetes-validate (the dev extra: pip install kafka-quota-proxy[dev]) is not installed")

from tests.shipped_configs import k8s_manifests, rendered

VERSIONS = ["1.30.0", kubernetes_validate.latest_version()]  # the pod-index label needs 1.28+


manifests = k8s_manifests


def one(docs: list[dict], kind: str) -> dict:
    (doc,) = [d for d in docs if d["kind"] == kind]
    return doc


def proxy_config(docs: list[dict], pod_index: int = 0):
    """The configuration the proxy of pod ``pod_index`` loads (``docs``: the mode's manifests)."""
    mode = "sidecar" if any(d["kind"] == "StatefulSet" for d in docs) else "cluster"
    return rendered(mode, pod_index)


@pytest.mark.parametrize("mode", ["sidecar", "cluster"])
@pytest.mark.parametrize("version", VERSIONS)
def test_manifests_are_valid_kubernetes(mode, version):
    docs = manifests(mode)
    assert {"ConfigMap", "Service", "PodDisruptionBudget", "ServiceMonitor"} <= {d["kind"] for d in docs}
    for doc in docs:
        if doc["apiVersion"].startswith("monitoring.coreos.com/"):
            continue  # a CRD: no schema in kubernetes-validate; checked by test_servicemonitor_scrapes_the_metrics_port
        kubernetes_validate.validate(doc, version, strict=True)


def test_strict_validation_rejects_an_unknown_field():
    pdb = one(manifests("sidecar"), "PodDisruptionBudget")
    broken = {**pdb, "spec": {**pdb["spec"], "maxUnavailabel": 1}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, VERSIONS[-1], strict=True)


def workload(docs: list[dict]) -> dict:
    (doc,) = [d for d in docs if d["kind"] in ("StatefulSet", "Deployment")]
    return doc


def proxy_container(docs: list[dict]) -> dict:
    (container,) = [c for c in workload(docs)["spec"]["template"]["spec"]["containers"] if c["name"] == "kafka-quota-proxy"]
    return container


def port_number(container: dict, name_or_number) -> int:
    if isinstance(name_or_number, int):
        return name_or_number
    (port,) = [p["containerPort"] for p in container["ports"] if p["name"] == name_or_number]
    return port


@pytest.mark.parametrize("mode", ["sidecar", "cluster"])
def test_probes_resources_grace_and_disruption_budget(mode):
    docs = manifests(mode)
    cfg = proxy_config(docs)
    pod = workload(docs)["spec"]["template"]["spec"]
    proxy = proxy_container(docs)
    assert proxy["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert proxy["livenessProbe"]["httpGet"]["path"] == "/healthz"
    for probe in ("readinessProbe", "livenessProbe"):
        assert port_number(proxy, proxy[probe]["httpGet"]["port"]) == cfg.metrics.bind.port
    assert proxy["args"] == ["run", "--config", "/etc/kafka-quota-proxy/proxy.yaml"]
    for container in pod["containers"] + pod.get("initContainers", []):
        assert container["resources"]["requests"]["cpu"] and container["resources"]["requests"]["memory"], container["name"]
    assert pod["terminationGracePeriodSeconds"] * 1000 > cfg.settings["shutdown.grace.period.ms"]
    assert pod["securityContext"]["runAsNonRoot"]
    for container in pod["containers"] + pod.get("initContainers", []):
        if container["image"].startswith("kafka-quota-proxy:"):
            continue  # the image's USER is numeric (10001)
        run_as = container.get("securityContext", {}).get("runAsUser", pod["securityContext"].get("runAsUser"))
        assert run_as, f"{container['name']}: runAsNonRoot needs a numeric user where the image names one"
    pdb = one(docs, "PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= workload(docs)["spec"]["template"]["metadata"]["labels"].items()


@pytest.mark.parametrize("mode", ["sidecar", "cluster"])
def test_servicemonitor_scrapes_the_metrics_port(mode):
    docs = manifests(mode)
    monitor = one(docs, "ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    wanted = monitor["spec"]["selector"]["matchLabels"].items()
    services = [d for d in docs if d["kind"] == "Service" and wanted <= d["metadata"]["labels"].items()]
    assert len(services) == 1, "the ServiceMonitor selects one Service"
    (endpoint,) = monitor["spec"]["endpoints"]
    (port,) = [p for p in services[0]["spec"]["ports"] if p["name"] == endpoint["port"]]
    assert port_number(proxy_container(docs), port["targetPort"]) == proxy_config(docs).metrics.bind.port
    assert endpoint["path"] == "/metrics"
    assert {"targetLabel": "job", "replacement": "kafka-quota-proxy"} in endpoint["relabelings"]


def env(container: dict) -> dict:
    return {e["name"]: e.get("value") for e in container["env"]}


def test_sidecar_broker_advertises_its_proxy_and_the_publisher_reads_its_volume():
    docs = manifests("sidecar")
    pod = workload(docs)["spec"]["template"]["spec"]
    (kafka,) = [c for c in pod["containers"] if c["name"] == "kafka"]
    e = env(kafka)
    listeners = dict(item.split("://") for item in e["KAFKA_LISTENERS"].split(","))
    advertised = dict(item.split("://") for item in e["KAFKA_ADVERTISED_LISTENERS"].split(","))
    proxy = proxy_container(docs)
    for broker_id in range(workload(docs)["spec"]["replicas"]):
        cfg = proxy_config(docs, broker_id)
        assert cfg.volume_usage.publisher.broker_id == broker_id
    client = [name for name, address in listeners.items() if address == str(cfg.upstream.bootstrap_servers[0])]
    assert client and client[0] != e["KAFKA_INTER_BROKER_LISTENER_NAME"]
    assert listeners[client[0]].startswith("127.0.0.1:"), "only the proxy reaches the broker's client listener"
    assert advertised[client[0]].endswith(f":{cfg.listeners[0].bind.port}")
    assert port_number(proxy, "client") == cfg.listeners[0].bind.port
    (log_dir,) = cfg.volume_usage.publisher.log_dirs
    assert e["KAFKA_LOG_DIRS"] == log_dir
    proxy_mounts = {m["mountPath"]: m for m in proxy["volumeMounts"]}
    kafka_mounts = {m["mountPath"]: m for m in kafka["volumeMounts"]}
    assert proxy_mounts[log_dir]["name"] == kafka_mounts[log_dir]["name"] and proxy_mounts[log_dir]["readOnly"]
    services = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Service"}
    assert advertised[client[0]].split(".")[1] == workload(docs)["spec"]["serviceName"]
    assert services[workload(docs)["spec"]["serviceName"]]["spec"]["clusterIP"] == "None"


def test_cluster_mode_service_has_a_port_per_broker():
    docs = manifests("cluster")
    cfg = proxy_config(docs)
    listener = cfg.listeners[0]
    service = one(docs, "Service")
    proxy = proxy_container(docs)
    ports = {port_number(proxy, p["targetPort"]): p["port"] for p in service["spec"]["ports"]}
    assert ports[listener.bind.port] == listener.bind.port
    for broker_id in range(3):
        port = listener.broker_port_base + broker_id
        assert ports[port] == port, f"broker {broker_id}: clients are sent to {listener.advertised_host}:{port}"
    assert listener.advertised_host.split(".")[0] == service["metadata"]["name"]


def test_sidecar_own_clients_use_the_proxies_listener_that_only_the_brokers_reach():
    """upstream.own_clients is the pod's PROXIES listener, which advertises the broker itself (no sidecar in the
    way) and which the NetworkPolicy opens to the brokers' pods only; every pod runs the one ConfigMap, its broker id
    from the same downward-API field as the kafka container's node id (no init container renders it)."""
    docs = manifests("sidecar")
    pod = workload(docs)["spec"]["template"]["spec"]
    assert not pod.get("initContainers")
    (kafka,) = [c for c in pod["containers"] if c["name"] == "kafka"]
    node_id = {e["name"]: e for e in kafka["env"]}["KAFKA_NODE_ID"]
    assert {e["name"]: e for e in proxy_container(docs)["env"]}["KAFKA_NODE_ID"] == node_id
    e = env(kafka)
    listeners = dict(item.split("://") for item in e["KAFKA_LISTENERS"].split(","))
    advertised = dict(item.split("://") for item in e["KAFKA_ADVERTISED_LISTENERS"].split(","))
    cfg = proxy_config(docs)
    (own,) = cfg.upstream.own_clients.bootstrap_servers
    assert own.host == "127.0.0.1" and listeners["PROXIES"] == f"0.0.0.0:{own.port}"
    assert advertised["PROXIES"] == f"$(POD_NAME).kafka.$(POD_NAMESPACE).svc:{own.port}"  # the broker, not a proxy
    assert own.port != cfg.listeners[0].bind.port
    assert cfg.admin_principals == {"User:admin"}  # on PLAINTEXT (User:ANONYMOUS) no tenant is an admin
    policy = one(docs, "NetworkPolicy")
    assert policy["spec"]["podSelector"] == {"matchLabels": workload(docs)["spec"]["selector"]["matchLabels"]}
    opened_to_all = {p["port"] for rule in policy["spec"]["ingress"] if "from" not in rule for p in rule["ports"]}
    assert opened_to_all == {cfg.listeners[0].bind.port, cfg.metrics.bind.port}
    (brokers_only,) = [rule for rule in policy["spec"]["ingress"] if "from" in rule]
    assert brokers_only["from"] == [{"podSelector": policy["spec"]["podSelector"]}]
    broker_ports = {int(address.rsplit(":", 1)[1]) for name, address in listeners.items() if name != "CLIENT"}
    assert {p["port"] for p in brokers_only["ports"]} == broker_ports
