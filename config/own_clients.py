"""What ``check-config`` and the proxy's start-up warn about the proxy's own clients, before it bites.

A sidecar's own clients write the proxy's topics (volume usage, the config topic, the usage topic), each of one
partition led by one broker. Without ``upstream.own_clients`` they bootstrap on the broker's client listener, which
advertises the sidecars, so the writers of every sidecar but the leader's reach the leader through *its* sidecar,
which lets only its own process's clients and ``admin_principals`` write those topics. Without a principal
(PLAINTEXT: everyone is ``User:ANONYMOUS``) they are refused: the volume data of those brokers goes missing, and
``missing_data_action: PAUSE`` (the default) stops produce on every sidecar. Pure: a configuration in, lines out.
"""

from __future__ import annotations

from config.model import ProxyConfig
from config.volume import PAUSE

ANONYMOUS = "User:ANONYMOUS"
FIX = (
    "give the brokers a listener no proxy is in front of, advertising the brokers' own addresses (PROXIES in the "
    "shipped files), and set upstream.own_clients.bootstrap_servers to it (documentation: Security, the proxy's "
    "own clients)"
)


def own_client_warnings(config: ProxyConfig, brokers: int | None = None) -> list[str]:
    """Warnings for ``config``; ``brokers``: how many the cluster has, when known (one: nothing to warn of)."""
    warnings = []
    if ANONYMOUS in config.admin_principals:
        warnings.append(
            f"admin_principals lists {ANONYMOUS}: every client without a login or certificate may "
            "alter quotas through the proxy and write its topics"
        )
    sidecar = any(lc.sidecar for lc in config.listeners)
    if not sidecar or config.upstream.own_clients is not None or brokers == 1:
        return warnings
    writes = _topics_written(config)
    if not writes:
        return warnings
    own = config.upstream.own_traffic
    cluster = f"this cluster's {brokers} brokers" if brokers else "several brokers"
    sidecars = (
        f"with {cluster}, the own clients of the sidecars whose broker does not lead {' or '.join(writes)} "
        "reach its leader through that broker's sidecar"
    )
    if own.sasl is not None:
        principal = f"User:{own.sasl.username}"
        if principal not in config.admin_principals:
            warnings.append(
                f"upstream.own_clients is not set and the proxy's own clients log in as {principal}, "
                f"which admin_principals does not list: {sidecars}, which refuses them unless it lists "
                f"{principal}; {FIX}"
            )
        return warnings
    if (own.tls is not None and own.tls.certfile is not None) or ANONYMOUS in config.admin_principals:
        return warnings  # a client certificate's principal (listed or not, the mapping is the other sidecar's)
    volume = config.volume_usage
    pause = (
        " (those brokers' volume usage goes missing and, with missing_data_action PAUSE, produce stops on every "
        "sidecar)"
        if volume is not None and volume.publisher is not None and volume.missing_data_action == PAUSE
        else ""
    )
    warnings.append(
        f"upstream.own_clients is not set and the proxy's own clients have no principal (PLAINTEXT, "
        f"no upstream.sasl or client certificate): {sidecars}, which refuses them as "
        f"TOPIC_AUTHORIZATION_FAILED{pause}; {FIX}"
    )
    return warnings


def _topics_written(config: ProxyConfig) -> list[str]:
    """The proxy's topics this configuration writes."""
    topics = []
    if config.volume_usage is not None and config.volume_usage.publisher is not None:
        topics.append(f"the volume-usage topic {config.volume_usage.topic}")
    if config.dynamic_config is not None:
        topics.append(f"the config topic {config.dynamic_config.topic} (AlterClientQuotas through this proxy)")
    if config.settings.quota_cluster_topic is not None:
        topics.append(f"the usage topic {config.settings.quota_cluster_topic}")
    return topics
