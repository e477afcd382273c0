"""The proxy configurations the repository ships, as each proxy process loads them.

- docker-compose.yml's proxies: deploy/compose/proxy-N.yaml, as written (no templating).
- Kubernetes: ``shipped_proxy_configs(mode)`` is the proxy.yaml of deploy/k8s/<mode> (its ConfigMap), the ONE place
  that reads it; ``proxy_environment(mode, pod_index)`` is the environment the proxy container's spec gives it in
  the pod with that index (downward-API fields resolved, ``$(VAR)`` references expanded), from which the proxy
  itself substitutes ``${env:NAME}``; ``rendered(mode, pod_index)`` is the two together, the file the pod runs.
"""

from __future__ import annotations

import glob
import re
from pathlib import Path

import yaml

from config.loader import load_config_text
from config.model import ProxyConfig

ROOT = Path(__file__).resolve().parent.parent
K8S = ROOT / "deploy" / "k8s"
COMPOSE_PROXIES = tuple(ROOT / "deploy" / "compose" / f"proxy-{n}.yaml" for n in (1, 2, 3))
K8S_NAMESPACE = "kafka"
PROXY_CONTAINER = "kafka-quota-proxy"


def k8s_manifests(mode: str) -> list[dict]:
    """Every object of deploy/k8s/<mode> (``sidecar`` or ``cluster``)."""
    docs = []
    for path in sorted(glob.glob(str(K8S / mode / "*.yaml"))):
        with open(path) as f:
            docs += [doc for doc in yaml.safe_load_all(f) if doc]
    return docs


def shipped_proxy_configs(mode: str) -> str:
    """The proxy.yaml the proxies of deploy/k8s/<mode> run (the text, before the pod's environment applies)."""
    (config_map,) = [d for d in k8s_manifests(mode) if d["kind"] == "ConfigMap"]
    return config_map["data"]["proxy.yaml"]


def k8s_workload(mode: str) -> dict:
    (doc,) = [d for d in k8s_manifests(mode) if d["kind"] in ("StatefulSet", "Deployment")]
    return doc


def proxy_environment(mode: str, pod_index: int) -> dict[str, str]:
    """The proxy container's environment in the pod with ``pod_index`` (a Deployment's pods: any index), as the
    kubelet resolves its spec."""
    workload = k8s_workload(mode)
    fields = {"metadata.name": f"{workload['metadata']['name']}-{pod_index}", "metadata.namespace": K8S_NAMESPACE,
              "metadata.labels['apps.kubernetes.io/pod-index']": str(pod_index)}
    (container,) = [c for c in workload["spec"]["template"]["spec"]["containers"] if c["name"] == PROXY_CONTAINER]
    resolved: dict[str, str] = {}
    for item in container.get("env", []):
        if "valueFrom" in item:
            value = fields[item["valueFrom"]["fieldRef"]["fieldPath"]]
        else:
            value = re.sub(r"\$\((\w+)\)", lambda m: resolved.get(m.group(1), m.group(0)), str(item["value"]))
        resolved[item["name"]] = value
    return resolved


def rendered(mode: str, pod_index: int = 0) -> ProxyConfig:
    """The configuration the proxy of pod ``pod_index`` loads."""
    return load_config_text(shipped_proxy_configs(mode), proxy_environment(mode, pod_index))
