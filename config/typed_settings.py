"""The ``settings:`` section as one frozen, typed object, read by attribute: each Kafka-style dotted key is an
attribute of the same name in snake case (``quota.window.num`` is ``settings.quota_window_num``), so a misspelt
setting is a type error, not a ``KeyError`` at run time.

The keys, defaults, bounds and text are :mod:`config.settings_table`'s; the values are checked, and the object
built, by :func:`config.settings.parse_settings`. Importing this module checks that the attributes are exactly the
table's keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Any, Literal, get_args

from config.settings_table import (
    CLUSTER_ID,
    CLUSTER_TOPIC,
    IP_OVERRIDES,
    LISTENER_SETTINGS,
    PRODUCER_ID_ENFORCEMENT,
    QUOTA_MODE,
    QUOTA_SCOPE,
    QUOTA_SMOOTHING,
    REQUEST_RATE_APIS,
    SCOPES,
    SETTINGS,
    SMOOTHING_VALUES,
    SPLICE,
    SPLICE_MODES,
)
from quota.managers.producer_ids import ENFORCEMENTS

# every key of the section besides the per-listener ones: the numbers of SETTINGS, then the ones taking words
SETTING_KEYS = (
    *SETTINGS,
    IP_OVERRIDES,
    QUOTA_MODE,
    PRODUCER_ID_ENFORCEMENT,
    QUOTA_SCOPE,
    QUOTA_SMOOTHING,
    SPLICE,
    CLUSTER_TOPIC,
    CLUSTER_ID,
    REQUEST_RATE_APIS,
)
LISTENER_PREFIX = "listener.name."  # Kafka's prefix of a per-listener setting: listener.name.<name>.<setting>

QuotaMode = Literal["enforce", "shadow"]
QUOTA_MODES: tuple[QuotaMode, ...] = get_args(QuotaMode)
ProducerIdEnforcement = Literal["hold", "throttle"]
QuotaScope = Literal["broker", "cluster"]
QuotaSmoothing = Literal["off", "on"]
SpliceMode = Literal["auto", "off"]


def attribute(key: str) -> str:
    """The attribute of a key: ``quota.window.num`` -> ``quota_window_num``."""
    return key.replace(".", "_")


def listener_attribute(setting: str) -> str:
    """The attribute holding a per-listener setting by listener name: ``max.connections`` ->
    ``listener_max_connections``."""
    return "listener_" + attribute(setting)


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """Broker-style settings, by Kafka property name where Kafka has one; the meaning of each is its text in
    :data:`config.settings_table.SETTINGS` (and in docs/configuration.md)."""

    socket_request_max_bytes: int
    upstream_response_max_bytes: int
    connections_max_inflight_requests: int
    connections_max_buffered_response_bytes: int
    connections_max_held_request_bytes: int
    max_held_request_bytes: int
    socket_send_buffer_bytes: int
    socket_receive_buffer_bytes: int
    shutdown_grace_period_ms: int
    upstream_connect_timeout_ms: int
    request_header_max_bytes: int
    listener_tls_handshake_timeout_ms: int
    connections_max_idle_ms: int
    upstream_response_timeout_ms: int
    quota_window_num: int
    quota_window_size_seconds: int
    quota_mute_max_ms: int
    controller_quota_window_num: int
    controller_quota_window_size_seconds: int
    controller_quota_metadata_max_age_ms: int
    producer_id_quota_window_num: int
    producer_id_quota_window_size_seconds: int
    producer_id_quota_cache_cleanup_scheduler_interval_ms: int
    producer_id_quota_bloom_expected_pids: int
    producer_id_quota_bloom_false_positive_rate: float
    producer_id_quota_max_hold_ms: int
    offset_metadata_max_bytes: int
    metadata_max_tracked_topics: int
    cluster_metadata_refresh_ms: int
    cluster_broker_removal_ms: int
    sasl_server_max_receive_size: int
    max_connection_creation_rate: int
    max_connections: int
    connections_reserved_file_descriptors: int
    max_connections_per_ip: int
    workers: int
    workers_heartbeat_timeout_ms: int
    quota_workers_sync_ms: int
    quota_cluster_sync_ms: int
    quota_cluster_stale_ms: int
    quota_cluster_forget_ms: int
    quota_cluster_record_max_bytes: int
    quota_max_tracked_entities: int
    quota_request_rate_max_throttle_ms: int
    quota_metrics_max_entities: int
    quota_metrics_refresh_ms: int
    # the settings taking words, not numbers
    max_connections_per_ip_overrides: Mapping[str, int]  # normalized IP address -> connections
    quota_mode: QuotaMode
    producer_id_quota_enforcement: ProducerIdEnforcement
    quota_scope: QuotaScope
    quota_smoothing: QuotaSmoothing
    connections_splice: SpliceMode
    quota_cluster_topic: str | None  # None: not set
    quota_cluster_id: str | None  # None: not set (the proxy's id is the host name and first port)
    quota_request_rate_apis: tuple[str, ...]  # Kafka API names (config.request_rate.COUNTABLE_APIS)
    # the per-listener settings (listener.name.<name>.<setting>), by listener name: only the listeners that set one
    listener_max_connection_creation_rate: Mapping[str, int]
    listener_max_connections: Mapping[str, int]

    @classmethod
    def from_keys(cls, values: Mapping[str, Any]) -> Settings:
        """The settings of ``values`` keyed as the YAML keys them, already checked (every key of
        :data:`SETTING_KEYS`, and the per-listener keys set)."""
        per_listener: dict[str, dict[str, int]] = {name: {} for name in LISTENER_SETTINGS}
        for key, value in values.items():
            if key.startswith(LISTENER_PREFIX):
                listener, _, name = key[len(LISTENER_PREFIX) :].partition(".")
                per_listener[name][listener] = value
        typed: dict[str, Any] = {attribute(key): values[key] for key in SETTING_KEYS}
        typed.update({listener_attribute(name): MappingProxyType(by) for name, by in per_listener.items()})
        return cls(**typed)

    @property
    def values(self) -> Mapping[str, Any]:
        """Every setting by its YAML key (``listener.name.<name>.<setting>`` for the per-listener ones): what
        DescribeConfigs shows and a dynamic update is laid over."""
        out = {key: getattr(self, attribute(key)) for key in SETTING_KEYS}
        for name in LISTENER_SETTINGS:
            by_listener: Mapping[str, int] = getattr(self, listener_attribute(name))
            out.update({f"{LISTENER_PREFIX}{listener}.{name}": value for listener, value in by_listener.items()})
        return MappingProxyType(out)


def _check_attributes() -> None:
    """The attributes are the table's keys and the words each takes are the table's: one list of settings."""
    expected = {attribute(key) for key in SETTING_KEYS} | {listener_attribute(name) for name in LISTENER_SETTINGS}
    have = {f.name for f in fields(Settings)}
    if have != expected:
        raise RuntimeError(f"Settings and the settings table differ: {sorted(have ^ expected)}")
    for key, typed, table in (
        (PRODUCER_ID_ENFORCEMENT, get_args(ProducerIdEnforcement), ENFORCEMENTS),
        (QUOTA_SCOPE, get_args(QuotaScope), SCOPES),
        (QUOTA_SMOOTHING, get_args(QuotaSmoothing), SMOOTHING_VALUES),
        (SPLICE, get_args(SpliceMode), SPLICE_MODES),
    ):
        if typed != table:
            raise RuntimeError(f"{key}: the type's words {typed} differ from the table's {table}")


_check_attributes()
