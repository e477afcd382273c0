"""The proxy's configuration as immutable values.

A configuration is parsed once (see :mod:`config.loader`) into these frozen objects and swapped whole; nothing
mutates it in place.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from config.typed_settings import Settings
from quota.managers.connection import NO_LIMITS, ConnectionLimits
from quota.primitives.group_quotas import EMPTY_GROUP_TABLE, GroupQuotaTable
from quota.primitives.quota_table import EMPTY_QUOTA_TABLE, QuotaTable
from quota.primitives.topic_quotas import EMPTY_TOPIC_TABLE, TopicQuotaTable

if TYPE_CHECKING:
    from config.dynamic_source import DynamicConfigSource
    from config.tls import ListenerTls, UpstreamTls
    from config.usage import UsageLogConfig
    from config.volume import VolumeUsageConfig


@dataclass(frozen=True, slots=True)
class Address:
    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class OwnClientsConfig:
    """Where and how the proxy's own clients (its topics' followers and writers, the topics' creation, its metadata
    looks, DescribeLogDirs) reach the cluster: ``upstream.own_clients`` (a broker listener no proxy is in front of),
    or the upstream itself. ``tls``/``sasl`` are resolved at load: the upstream's unless the section says otherwise."""

    bootstrap_servers: tuple[Address, ...]
    tls: UpstreamTls | None = None
    sasl: UpstreamSasl | None = None


@dataclass(frozen=True, slots=True)
class UpstreamConfig:
    bootstrap_servers: tuple[Address, ...]
    tls: UpstreamTls | None = None  # TLS to the brokers, when configured
    sasl: UpstreamSasl | None = None  # the proxy's own clients' SASL login to the brokers, when configured
    own_clients: OwnClientsConfig | None = None  # upstream.own_clients, when configured

    @property
    def own_traffic(self) -> OwnClientsConfig:
        """Where the proxy's own clients go: ``own_clients``, or (not set) the upstream bootstrap servers."""
        return self.own_clients or OwnClientsConfig(self.bootstrap_servers, self.tls, self.sasl)


SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")  # what the proxy's own clients can log in with


@dataclass(frozen=True, slots=True)
class UpstreamSasl:
    """How the proxy's own Kafka traffic (config, volume and usage topics, metadata, DescribeLogDirs) logs in to
    brokers whose listener requires SASL. Client connections are never logged in by the proxy: they pass through."""

    mechanism: str  # one of SASL_MECHANISMS
    username: str
    password: str = field(repr=False)  # never in a log line or an error message


@dataclass(frozen=True, slots=True)
class ListenerConfig:
    name: str  # as in Kafka's listener.name.<name>.* settings
    bind: Address
    advertised_host: str | None = None  # cluster mode: the host clients are given for every broker
    broker_port_base: int | None = None  # cluster mode: broker N is served on broker_port_base + N
    internal: bool = False  # the inter-broker listener: exempt from the proxy-wide connection limits (KIP-612)
    tls: ListenerTls | None = None  # TLS termination (and mTLS principals), when configured
    sasl: bool = False  # the broker behind authenticates with SASL: frames are limited until a client has
    admin: bool = False  # the admin listener: its connections are admins whatever their principal, and every broker
    # address it hands out is its own (proxy.apis.addresses); trusted by where it is reachable from (loopback)

    @property
    def cluster_mode(self) -> bool:
        return self.broker_port_base is not None

    @property
    def advertised(self) -> str:
        """The host this listener's clients are given: ``advertised_host`` (set at load in cluster mode and on the
        admin listener), else the host it binds."""
        return self.advertised_host if self.advertised_host is not None else self.bind.host

    @property
    def sidecar(self) -> bool:
        """A listener in front of one broker (not cluster mode's, not the admin listener)."""
        return not self.cluster_mode and not self.admin


@dataclass(frozen=True, slots=True)
class MetricsConfig:
    bind: Address


@dataclass(frozen=True, slots=True)
class ProxyConfig:
    upstream: UpstreamConfig
    listeners: tuple[ListenerConfig, ...]
    metrics: MetricsConfig
    settings: Settings
    quotas: QuotaTable = EMPTY_QUOTA_TABLE
    volume_usage: VolumeUsageConfig | None = None  # cluster-wide volume-usage throttling, when configured
    connections: ConnectionLimits = NO_LIMITS  # connection creation rates and counts (KIP-612, KIP-402)
    usage_log: UsageLogConfig | None = None  # where the usage log goes, when configured
    dynamic_config: DynamicConfigSource | None = None  # the config topic, when configured
    raw_quotas: tuple = ()  # the YAML quotas: items as written (the dynamic config is laid over them)
    admin_principals: frozenset = frozenset()  # who may alter quotas through the proxy (AlterClientQuotas)
    topic_quotas: TopicQuotaTable = EMPTY_TOPIC_TABLE  # the {topic: ...} entities (YAML and dynamic)
    group_quotas: GroupQuotaTable = EMPTY_GROUP_TABLE  # the quotas: entries of {group: ...} entities (YAML only)
