"""What the proxy says about itself: its version (``--version``) and the one start-up line that summarises what is
configured, so the first lines of a log answer "which build, doing what" before anyone opens the YAML.

The summary names listeners, addresses, modes and counts, never a secret: no password, key file content or SASL
username (an operator's log goes to places the configuration does not).
"""

from __future__ import annotations

import platform

from config.model import ProxyConfig
from config.quotas import is_group_item, is_quota_group_item, is_topic_item
from config.topic_quotas import ON_EXCEED
from proxy.codec import accel
from quota.primitives.quota_groups import MEMBER_KEYS
from quota.primitives.rate import RATE_PATH
from quota.primitives.topic_quotas import PARTITION

PACKAGE = "kafka-quota-proxy"


def package_version() -> str:
    """The installed distribution's version, or ``unknown`` when run from a checkout that was never installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(PACKAGE)
    except PackageNotFoundError:
        return "unknown"


def version_text(connection_path: str) -> str:
    """The version, Python's, which path measures the quotas' sampled rates (:mod:`quota.primitives.rate`), which
    reads the frames (:mod:`proxy.codec.accel`) and which runs each connection's per-request path
    (``connection_path``: :data:`proxy.connection.compiled.PATH`, a layer above this one): the first words of
    ``--version`` and of the start-up line."""
    return (
        f"{PACKAGE} {package_version()} (Python {platform.python_version()}, rate: {RATE_PATH}, codec: {accel.PATH}, "
        f"connection: {connection_path})"
    )


def _listener(lc) -> str:
    if lc.cluster_mode:
        mode = f"cluster mode, brokers from port {lc.broker_port_base} as {lc.advertised_host}"
    elif lc.admin:
        mode = f"admin: its connections are admins, every broker as {lc.advertised_host}"
    else:
        mode = "sidecar"
    extras = [mode]
    if lc.tls is not None:
        extras.append("TLS" if lc.tls.client_auth == "none" else f"TLS client_auth {lc.tls.client_auth}")
    if lc.sasl:
        extras.append("SASL")
    if lc.internal:
        extras.append("internal")
    return f"{lc.name} {lc.bind} ({', '.join(extras)})"


def quota_counts(config: ProxyConfig) -> dict[str, int]:
    """Entries per quota key in the YAML's ``quotas:`` (the dynamic config adds its own later); a topic entity's
    keys as ``topic producer_byte_rate``, a partition entity's as ``partition producer_byte_rate``, a group's as ``group request_rate``, a quota group's as
    ``quota-group producer_byte_rate``."""
    counts: dict[str, int] = {}
    for item in config.raw_quotas:
        kind = "topic " if is_topic_item(item) else "group " if is_group_item(item) else ""
        kind = "quota-group " if is_quota_group_item(item) else kind
        kind = "partition " if is_topic_item(item) and PARTITION in item["entity"] else kind
        for key in item:
            if key not in ("entity", "mode", ON_EXCEED, *MEMBER_KEYS):  # how a quota acts or whom, not a quota
                name = kind + key
                counts[name] = counts.get(name, 0) + 1
    return dict(sorted(counts.items()))


def config_summary(config: ProxyConfig) -> str:
    """One line: listeners, upstream, quotas, dynamic config, volume usage, workers, usage log, mode and scope."""
    settings = config.settings
    upstream = ", ".join(str(a) for a in config.upstream.bootstrap_servers)
    if config.upstream.tls is not None:
        upstream += " over TLS"
    if config.upstream.sasl is not None:
        upstream += f" with SASL {config.upstream.sasl.mechanism}"
    counts = quota_counts(config)
    quotas = ", ".join(f"{key} x{n}" for key, n in counts.items()) or "none"
    dynamic = f"on (topic {config.dynamic_config.topic})" if config.dynamic_config is not None else "off"
    volume = config.volume_usage
    if volume is None:
        volume_text = "off"
    elif volume.describe_log_dirs is not None:
        volume_text = "on (DescribeLogDirs)"
    else:
        volume_text = f"on (topic {volume.topic}{', publishing' if volume.publisher is not None else ''})"
    usage = f"to {config.usage_log.dir}" if config.usage_log is not None else "off"
    parts = [
        f"listeners: {'; '.join(_listener(lc) for lc in config.listeners)}",
        f"upstream: {upstream}",
        f"quotas: {quotas}",
        f"quota.mode {settings.quota_mode}, quota.scope {settings.quota_scope}",
        f"dynamic config: {dynamic}",
        f"volume usage: {volume_text}",
        f"workers: {settings.workers}",
        f"usage log: {usage}",
        f"metrics: {config.metrics.bind}",
    ]
    return " | ".join(parts)
