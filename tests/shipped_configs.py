"""The proxy configurations the repository ships, as each proxy process loads them.

- docker-compose.yml's proxies: deploy/compose/proxy-N.yaml, as written (no templating).
- Kubernetes: ``shipped_proxy_configs(mode)`` is the proxy.yaml the pods of deploy/k8s/<mode> read, as Kustomize
  renders the folder (tests/k8s_render.py: the ConfigMap the configMapGenerator makes of the folder's proxy.yaml);
  ``proxy_environment(mode, pod_index)`` is the environment the proxy container's spec gives it in the pod with that
  index (downward-API fields resolved, ``$(VAR)`` references expanded), from which the proxy itself substitutes
  ``${env:NAME}``; ``rendered(mode, pod_index)`` is the two together, the configuration the pod runs.
"""

from __future__ import annotations

import os

from config.loader import load_config_text
from config.model import ProxyConfig
from tests import k8s_render
from tests.k8s_render import ROOT

COMPOSE_PROXIES = tuple(ROOT / "deploy" / "compose" / f"proxy-{n}.yaml" for n in (1, 2, 3))


def shipped_proxy_configs(mode: str) -> str:
    """The proxy.yaml the proxies of deploy/k8s/<mode> run (the text, before the pod's environment applies)."""
    return k8s_render.pod_proxy_config(mode).template


def proxy_environment(mode: str, pod_index: int) -> dict[str, str]:
    """The proxy container's environment in the pod with ``pod_index`` (a Deployment's pods: any index), as the
    kubelet resolves its spec."""
    return k8s_render.pod_env(k8s_render.render(mode), pod_index)


def rendered(mode: str, pod_index: int = 0) -> ProxyConfig:
    """The configuration the proxy of pod ``pod_index`` loads."""
    return load_config_text(shipped_proxy_configs(mode), proxy_environment(mode, pod_index))


def disk_states(path, config: ProxyConfig, margin: float = 0.5) -> set[str]:
    """The volume states the limits of ``config`` (its publisher's, else its DescribeLogDirs source's; both
    MinFreePercentage in every shipped file) give the disk holding ``path``, its free share measured as the proxy
    and Kafka measure it (the blocks available to an unprivileged writer, of all): OPEN at or above the soft limit's
    share, PAUSE below the hard one's, THROTTLE between; within ``margin`` points of a limit the states on both
    sides (other tests write to the disk meanwhile). The shipped soft limit is 20 % free: on a machine whose disk is
    more than 80 % used the shipped files throttle produce, as they would an operator's broker."""
    volume = config.volume_usage
    limits = volume.publisher or volume.describe_log_dirs
    assert limits is not None and {limits.soft_limit.type, limits.hard_limit.type} == {"MinFreePercentage"}, limits
    soft, hard = limits.soft_limit.level, limits.hard_limit.level
    st = os.statvfs(path)
    free = 100.0 * st.f_bavail / st.f_blocks

    def state(share: float) -> str:
        return "OPEN" if share >= soft else "PAUSE" if share < hard else "THROTTLE"

    return {state(free - margin), state(free), state(free + margin)}
