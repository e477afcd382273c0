"""deploy/k8s/ as `kubectl apply -k` installs it: every Kustomize folder (tests/k8s_render.py) renders, and each
rendered manifest is valid against the Kubernetes schemas (kubernetes-validate, strict: unknown fields rejected).
Every workload that runs the proxy has probes on /readyz and /healthz at the configuration's metrics port, resource
requests, a PodDisruptionBudget, a ServiceMonitor on the metrics port, termination grace longer than the proxy's
shutdown.grace.period.ms, and a proxy configuration that loads in each of its pods. The knobs the kustomizations
offer (images, the proxy configuration file) do what docs/deployment.md says."""

import os
import re
import shutil
import subprocess

import pytest
import yaml

from config.loader import load_config_text
from tests import k8s_render as k8s
from tests.tls_certs import Authority

kubernetes_validate = pytest.importorskip(
    "kubernetes_validate",
    reason="kubernetes-validate (the dev extra: pip install kafka-quota-proxy[dev]) is not installed",
)

VERSIONS = ["1.30.0", kubernetes_validate.latest_version()]  # the pod-index label needs 1.28+
CRD_GROUPS = ("monitoring.coreos.com/", "kafka.strimzi.io/")  # no schema in kubernetes-validate: checked below and
# in tests/test_deploy_strimzi.py
OVERLAYS = k8s.overlays()
PROXY_OVERLAYS = k8s.proxy_overlays()  # k8s.workload() finds the proxy's StatefulSet or Deployment in each


def test_the_overlays_are_the_documented_ones():
    assert PROXY_OVERLAYS == ["cluster", "examples/cluster-tls", "sidecar", "strimzi"]
    page = (k8s.ROOT / "docs" / "deployment.md").read_text()
    for overlay in OVERLAYS:
        assert f"| `{overlay}/` |" in page, f"docs/deployment.md's table of deploy/k8s/ lacks {overlay}"


@pytest.mark.parametrize("overlay", OVERLAYS)
@pytest.mark.parametrize("version", VERSIONS)
def test_rendered_manifests_are_valid_kubernetes(overlay, version):
    docs = k8s.render(overlay)
    for doc in docs:
        if doc["apiVersion"].startswith(CRD_GROUPS):
            continue
        kubernetes_validate.validate(doc, version, strict=True)
        if overlay in PROXY_OVERLAYS:
            assert doc["metadata"]["namespace"] == k8s.NAMESPACE, f"{doc['kind']} {doc['metadata']['name']}"


def test_strict_validation_rejects_an_unknown_field():
    pdb = k8s.one(k8s.render("sidecar"), "PodDisruptionBudget")
    broken = {**pdb, "spec": {**pdb["spec"], "maxUnavailabel": 1}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, VERSIONS[-1], strict=True)


def secret_mounts(docs: list[dict]) -> dict[str, str]:
    """mountPath -> Secret name of the proxy container's Secret volumes."""
    volumes = {
        v["name"]: v["secret"]["secretName"]
        for v in k8s.workload(docs)["spec"]["template"]["spec"]["volumes"]
        if "secret" in v
    }
    return {m["mountPath"]: volumes[m["name"]] for m in k8s.container(docs)["volumeMounts"] if m["name"] in volumes}


def load_in_pod(overlay: str, pod_index: int, tmp_path):
    """The overlay's proxy configuration loaded as pod ``pod_index`` reads it; a mounted TLS Secret (kubernetes.io/tls:
    tls.crt, tls.key) stands in as a certificate made for the test, in a folder of ``tmp_path``."""
    text = k8s.pod_proxy_config(overlay, pod_index).text
    for mount in secret_mounts(k8s.render(overlay)):
        folder = tmp_path / "secret"
        folder.mkdir(parents=True)
        server = Authority(tmp_path).server()
        shutil.copy(server.cert, folder / "tls.crt")
        shutil.copy(server.key, folder / "tls.key")
        text = text.replace(mount + "/", f"{folder}/")
    return load_config_text(text)


def pod_indexes(overlay: str) -> list[int]:
    docs = k8s.render(overlay)
    return list(range(k8s.replicas(docs))) if k8s.workload(docs)["kind"] == "StatefulSet" else [0]


@pytest.mark.parametrize("overlay", PROXY_OVERLAYS)
def test_the_proxy_configuration_loads_in_every_pod(overlay, tmp_path):
    for pod_index in pod_indexes(overlay):
        load_in_pod(overlay, pod_index, tmp_path / str(pod_index))


def port_number(container: dict, name_or_number) -> int:
    if isinstance(name_or_number, int):
        return name_or_number
    (port,) = [p["containerPort"] for p in container["ports"] if p["name"] == name_or_number]
    return port


@pytest.mark.parametrize("overlay", PROXY_OVERLAYS)
def test_probes_resources_grace_and_disruption_budget(overlay, tmp_path):
    docs = k8s.render(overlay)
    cfg = load_in_pod(overlay, 0, tmp_path)
    pod = k8s.workload(docs)["spec"]["template"]["spec"]
    proxy = k8s.container(docs)
    assert proxy["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert proxy["livenessProbe"]["httpGet"]["path"] == "/healthz"
    for probe in ("readinessProbe", "livenessProbe"):
        assert port_number(proxy, proxy[probe]["httpGet"]["port"]) == cfg.metrics.bind.port
    assert proxy["args"] == ["run", "--config", "/etc/kafka-quota-proxy/proxy.yaml"]
    assert "initContainers" not in pod, "nothing to prepare: proxy.yaml reads the broker id from the environment"
    for container in pod["containers"]:
        requests = container["resources"]["requests"]
        assert requests["cpu"] and requests["memory"], container["name"]
    assert pod["terminationGracePeriodSeconds"] * 1000 > cfg.settings.shutdown_grace_period_ms
    assert pod["securityContext"]["runAsNonRoot"]
    for container in pod["containers"]:
        if container["image"].startswith("kafka-quota-proxy:"):
            continue  # the image's USER is numeric (10001)
        run_as = container.get("securityContext", {}).get("runAsUser", pod["securityContext"].get("runAsUser"))
        assert run_as, f"{container['name']}: runAsNonRoot needs a numeric user where the image names one"
    pdb = k8s.one(docs, "PodDisruptionBudget")
    pod_labels = k8s.workload(docs)["spec"]["template"]["metadata"]["labels"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()


@pytest.mark.parametrize("overlay", PROXY_OVERLAYS)
def test_servicemonitor_scrapes_the_metrics_port(overlay, tmp_path):
    docs = k8s.render(overlay)
    monitor = k8s.one(docs, "ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    wanted = monitor["spec"]["selector"]["matchLabels"].items()
    services = [d for d in docs if d["kind"] == "Service" and wanted <= d["metadata"]["labels"].items()]
    assert len(services) == 1, "the ServiceMonitor selects one Service"
    (endpoint,) = monitor["spec"]["endpoints"]
    (port,) = [p for p in services[0]["spec"]["ports"] if p["name"] == endpoint["port"]]
    assert port_number(k8s.container(docs), port["targetPort"]) == load_in_pod(overlay, 0, tmp_path).metrics.bind.port
    assert endpoint["path"] == "/metrics"
    assert {"targetLabel": "job", "replacement": "kafka-quota-proxy"} in endpoint["relabelings"]


# the folder whose proxy.yaml each overlay's pods read: its own, or its base's
CONFIG_SOURCE = {
    "cluster": "cluster",
    "examples/cluster-tls": "examples/cluster-tls",
    "sidecar": "sidecar",
    "strimzi": "cluster",
}


@pytest.mark.parametrize("overlay", PROXY_OVERLAYS)
def test_the_pods_mount_the_configmap_generated_from_proxy_yaml(overlay):
    """The configMapGenerator makes the ConfigMap from the plain file (the one the tests load), and the name it gives
    it, with the hash of the content, is the one the pods mount: a changed proxy.yaml rolls them."""
    assert k8s.pod_proxy_config(overlay).template == (k8s.K8S / CONFIG_SOURCE[overlay] / "proxy.yaml").read_text()
    (config_map,) = [d for d in k8s.render(overlay) if d["kind"] == "ConfigMap"]
    assert re.fullmatch(r"kafka-quota-proxy(-sidecar)?-[a-z0-9]{10}", config_map["metadata"]["name"])


def render_overlay_of(tmp_path, base: str, kustomization: dict) -> list[dict]:
    """An operator's own overlay of deploy/k8s/<base>, in ``tmp_path``, rendered."""
    base_path = os.path.relpath(k8s.K8S / base, tmp_path)
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump({"resources": [base_path], **kustomization}))
    done = subprocess.run([k8s.kubectl(), "kustomize", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


@pytest.mark.parametrize("overlay", ["sidecar", "cluster"])
def test_an_overlay_sets_the_image_with_the_images_transformer(overlay, tmp_path):
    docs = render_overlay_of(
        tmp_path,
        overlay,
        {
            "images": [
                {"name": "kafka-quota-proxy", "newName": "registry.example.com/kafka-quota-proxy", "newTag": "9.9.9"}
            ]
        },
    )
    assert k8s.container(docs)["image"] == "registry.example.com/kafka-quota-proxy:9.9.9"
    assert k8s.container(k8s.render(overlay))["image"] == "kafka-quota-proxy:0.1.0"


@pytest.mark.parametrize("overlay", PROXY_OVERLAYS)
def test_the_admin_listener_is_reachable_from_inside_the_pod_only(overlay, tmp_path):
    """Its connections are admins whatever their principal (PLAINTEXT), so it is bound to the pod's loopback: no
    container port, Service or NetworkPolicy of the rendered overlay names its port, and check-config has nothing to
    warn of."""
    from config.admin_listener import admin_listener_warnings

    cfg = load_in_pod(overlay, 0, tmp_path)
    (admin,) = [lc for lc in cfg.listeners if lc.admin]
    assert admin.bind.host == "127.0.0.1" and admin_listener_warnings(cfg) == []
    assert str(admin.bind.port) not in yaml.safe_dump([d for d in k8s.render(overlay) if d["kind"] != "ConfigMap"])
