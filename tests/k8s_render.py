"""deploy/k8s/ as an operator installs it: every folder with a kustomization.yaml rendered by ``kubectl kustomize``
(the Kustomize built into kubectl; Debian's `kubectl` package, installed by tests/apt_tools.py in CI), and what a
pod of a rendered workload sees: its containers' environment as Kubernetes resolves it, and the proxy's
configuration file as the proxy reads it there.

    render("sidecar")                 -> the manifests `kubectl apply -k deploy/k8s/sidecar` would apply
    pod_proxy_config("sidecar", 2)    -> proxy.yaml as the proxy of pod kafka-2 reads it, ${env:...} resolved
    node_pool_ids(render("strimzi"))  -> {"controller": [0, 1, 2], "broker": [3, 4, 5]}: Strimzi's node ids

The ``${env:NAME}`` references are replaced by the values the pod's environment gives them. That is the proxy's own
reading of them (``config/env_refs.py``) as long as each value is a plain word (digits, letters, ``.``, ``-``,
``_``), which every value of the downward API used here is: a reference that is a whole plain scalar then reads as
the same YAML value (``3``: an integer), one inside a string or a quoted one as the same text. A value that is not a
plain word fails :func:`pod_proxy_config` instead of being guessed at.
"""

from __future__ import annotations

import copy
import functools
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

from tests import apt_tools

ROOT = Path(__file__).resolve().parent.parent
K8S = ROOT / "deploy" / "k8s"
NAMESPACE = "kafka"  # every kustomization's `namespace:`; checked by the tests
PROXY_CONTAINER = "kafka-quota-proxy"

_ENV_REF = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}")
_KUBE_REF = re.compile(r"\$\((\w+)\)")  # $(VAR) in a container's env value: an earlier variable of the container
_PLAIN_WORD = re.compile(r"[A-Za-z0-9._-]*")


def kubectl() -> str:
    return apt_tools.tool("kubectl", "kubectl")


def overlays() -> list[str]:
    """Every folder under deploy/k8s/ that `kubectl apply -k` takes, relative to it: "sidecar", "strimzi", ..."""
    return sorted(str(path.parent.relative_to(K8S)) for path in K8S.rglob("kustomization.yaml"))


def proxy_overlays() -> list[str]:
    """The folders that run the proxy: those with a proxy.yaml of their own, and those built on one of them (a
    ``resources`` entry that is a folder). Read from the files, without rendering."""

    def runs_proxy(folder: Path) -> bool:
        if (folder / "proxy.yaml").exists():
            return True
        resources = yaml.safe_load((folder / "kustomization.yaml").read_text()).get("resources", [])
        return any(
            (folder / r / "kustomization.yaml").exists() and runs_proxy((folder / r).resolve()) for r in resources
        )

    return [overlay for overlay in overlays() if runs_proxy(K8S / overlay)]


@functools.cache
def _rendered(overlay: str) -> list[dict]:
    done = subprocess.run([kubectl(), "kustomize", str(K8S / overlay)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"kubectl kustomize deploy/k8s/{overlay}: {done.stderr}"
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def render(overlay: str) -> list[dict]:
    """The manifests ``kubectl kustomize deploy/k8s/<overlay>`` renders (a fresh copy each call)."""
    return copy.deepcopy(_rendered(overlay))


def one(docs: list[dict], kind: str, name: str | None = None) -> dict:
    """The one manifest of ``kind`` (and ``name``) among ``docs``."""
    (doc,) = [d for d in docs if d["kind"] == kind and name in (None, d["metadata"]["name"])]
    return doc


def workload(docs: list[dict]) -> dict:
    """The StatefulSet or Deployment that runs the proxy."""
    (doc,) = [d for d in docs if d["kind"] in ("StatefulSet", "Deployment")]
    return doc


def container(docs: list[dict], name: str = PROXY_CONTAINER) -> dict:
    (found,) = [c for c in workload(docs)["spec"]["template"]["spec"]["containers"] if c["name"] == name]
    return found


def pod_name(docs: list[dict], pod_index: int) -> str:
    """A StatefulSet's pod ``<name>-<index>``; a Deployment's pods have a generated suffix, here ``<name>-pod<i>``."""
    sts = workload(docs)
    if sts["kind"] == "StatefulSet":
        return f"{sts['metadata']['name']}-{pod_index}"
    return f"{sts['metadata']['name']}-pod{pod_index}"


def pod_env(docs: list[dict], pod_index: int, name: str = PROXY_CONTAINER) -> dict[str, str]:
    """Container ``name``'s environment in the workload's pod ``pod_index``, as Kubernetes resolves it: the
    downward API's fieldRefs (the pod's name, namespace, and its pod-index label on a StatefulSet) and ``$(VAR)``
    references to earlier variables of the container."""
    sts = workload(docs)
    fields = {"metadata.name": pod_name(docs, pod_index), "metadata.namespace": sts["metadata"]["namespace"]}
    labels = {**sts["spec"]["template"]["metadata"].get("labels", {})}
    if sts["kind"] == "StatefulSet":
        labels["apps.kubernetes.io/pod-index"] = str(pod_index)
    fields.update({f"metadata.labels['{key}']": value for key, value in labels.items()})
    resolved: dict[str, str] = {}
    for item in container(docs, name).get("env", []):
        if "valueFrom" in item:
            path = item["valueFrom"]["fieldRef"]["fieldPath"]
            assert path in fields, f"{name}: env {item['name']} reads {path}, which this pod does not have"
            resolved[item["name"]] = fields[path]
        else:
            resolved[item["name"]] = _KUBE_REF.sub(lambda m: resolved.get(m.group(1), m.group(0)), str(item["value"]))
    return resolved


@dataclass(frozen=True)
class PodProxyConfig:
    path: str  # where the pod's proxy reads it (its --config argument)
    template: str  # the file as the ConfigMap holds it
    env: dict[str, str]  # the proxy container's environment in that pod
    text: str  # the file with its ${env:...} references resolved from env


def config_path(docs: list[dict]) -> str:
    args = container(docs)["args"]
    return args[args.index("--config") + 1]


def config_map_file(docs: list[dict], path: str) -> str:
    """The text of the file at ``path`` in the proxy container: the ConfigMap (by the name kustomize gave it, with
    its hash) mounted at that file's folder."""
    folder, _, filename = path.rpartition("/")
    (mount,) = [m for m in container(docs)["volumeMounts"] if m["mountPath"] == folder]
    (volume,) = [v for v in workload(docs)["spec"]["template"]["spec"]["volumes"] if v["name"] == mount["name"]]
    return one(docs, "ConfigMap", volume["configMap"]["name"])["data"][filename]


def resolve_env_refs(template: str, env: dict[str, str]) -> str:
    def value(match: re.Match) -> str:
        name = match.group(1)
        assert name in env, f"${{env:{name}}}: the proxy container does not set {name}"
        assert _PLAIN_WORD.fullmatch(env[name]), f"{name}={env[name]!r} is not a plain word: not substituted here"
        return env[name]

    return _ENV_REF.sub(value, template)


def pod_proxy_config(overlay: str, pod_index: int = 0) -> PodProxyConfig:
    """The rendered overlay's proxy configuration as the proxy of pod ``pod_index`` reads it (for a Deployment every
    pod reads the same)."""
    docs = render(overlay)
    path = config_path(docs)
    template = config_map_file(docs, path)
    env = pod_env(docs, pod_index)
    return PodProxyConfig(path=path, template=template, env=env, text=resolve_env_refs(template, env))


def replicas(docs: list[dict]) -> int:
    return workload(docs)["spec"]["replicas"]


def node_id_range(annotation: str) -> list[int]:
    """Strimzi's ``strimzi.io/next-node-ids``: "[0, 1, 10-12]" -> every id it names, in the order written."""
    ids: list[int] = []
    for item in annotation.strip().removeprefix("[").removesuffix("]").split(","):
        low, _, high = item.strip().partition("-")
        step = 1 if not high or int(high) >= int(low) else -1
        ids += list(range(int(low), int(high or low) + step, step))
    return ids


def node_pool_ids(docs: list[dict]) -> dict[str, list[int]]:
    """The node ids of each KafkaNodePool among ``docs`` when Strimzi creates them in that order: scaling up, each
    new node takes the lowest free id of its pool's ``strimzi.io/next-node-ids`` range (Strimzi's node pool docs).
    The proxy's broker ports follow these ids."""
    taken: set[int] = set()
    out = {}
    for pool in [d for d in docs if d["kind"] == "KafkaNodePool"]:
        free = [i for i in node_id_range(pool["metadata"]["annotations"]["strimzi.io/next-node-ids"]) if i not in taken]
        out[pool["metadata"]["name"]] = sorted(free)[: pool["spec"]["replicas"]]
        taken |= set(out[pool["metadata"]["name"]])
    return out
