"""``quota.scope`` against the listeners: the checks that need more than the ``settings:`` section (whether a
listener is in cluster mode, the usage topic the proxies share), named by key and reason."""

from __future__ import annotations

from config.errors import ConfigError, join
from config.model import ListenerConfig
from config.settings_table import CLUSTER_ID, CLUSTER_TOPIC, QUOTA_SCOPE
from config.typed_settings import Settings


def check_scope(settings: Settings, listeners: tuple[ListenerConfig, ...], path: str) -> None:
    """``quota.scope: cluster`` means one budget for every broker behind the proxy: a cluster-mode listener fronts
    them all; sidecars, each in front of one broker, add their usage up through ``quota.cluster.topic`` (issue 26),
    as do several cluster-mode proxies in front of one cluster (replicas), with any number of workers each."""
    cluster_mode = any(lc.cluster_mode for lc in listeners)
    topic = settings.quota_cluster_topic
    if settings.quota_scope == "cluster" and not cluster_mode and topic is None:
        raise ConfigError(
            join(path, QUOTA_SCOPE),
            "cluster needs a listener in cluster mode (broker_port_base), or, on sidecars, "
            f"{CLUSTER_TOPIC} (the usage topic the sidecars share): a sidecar proxy alone sees only "
            "its own broker's traffic, so it cannot keep one budget for the whole cluster; use broker "
            "(Kafka's per-broker quotas, what a sidecar gives) or set the topic",
        )
    if topic is None:
        if settings.quota_cluster_id is not None:
            raise ConfigError(join(path, CLUSTER_ID), f"only means something with {CLUSTER_TOPIC} set")
        return
    if settings.quota_scope != "cluster":
        raise ConfigError(
            join(path, CLUSTER_TOPIC),
            "proxies share usage only under quota.scope: cluster; set it, or "
            "drop the topic (quota.scope broker keeps Kafka's per-broker quotas, and a cluster-mode "
            "proxy's per-broker budgets are not shared between proxies)",
        )
    sync, stale = settings.quota_cluster_sync_ms, settings.quota_cluster_stale_ms
    if stale < 2 * sync:
        raise ConfigError(
            join(path, "quota.cluster.stale.ms"),
            f"must be at least twice quota.cluster.sync.ms "
            f"({sync}): a peer is stale when it missed a sync or more, got {stale}",
        )
    forget = settings.quota_cluster_forget_ms
    if forget < stale:
        raise ConfigError(
            join(path, "quota.cluster.forget.ms"),
            f"must be at least quota.cluster.stale.ms ({stale}): "
            f"a peer is forgotten only once it is stale, got {forget}",
        )
