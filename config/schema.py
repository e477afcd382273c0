"""A JSON Schema (draft 2020-12) of the configuration file, for editors: completion, hover text and a red line under
a misspelt key while the YAML is written (``kafka-quota-proxy schema``; the same document ships as
``config/kafka-quota-proxy.schema.json``).

Built from the tables the loader itself checks against: each section's keys are the loader's constants
(:mod:`config.loader`, :mod:`config.tls`, :mod:`config.volume`, ...), the ``settings:`` section is
:data:`config.settings_table.SETTINGS` with its defaults, bounds and text, and every mapping is closed
(``additionalProperties: false``). :func:`section` refuses a key set and a description that differ, so a key added to
the loader without its description here fails the build (and the test), rather than the schema drifting. The loader
stays the judge: it checks what a schema cannot say (files that exist, one setting against another).
"""

from __future__ import annotations

from typing import Any

from config import dynamic_source, loader, tls, usage, volume
from config import settings as settings_module
from config.model import SASL_MECHANISMS
from config.quotas import ENFORCED_KEYS, MIN_RATE
from config.request_rate import COUNTABLE_APIS, DEFAULT_APIS
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
from quota.managers.connection import CONNECTION_CREATION_RATE
from quota.managers.producer_ids import ENFORCEMENTS
from quota.managers.volume import LIMIT_TYPES, OPEN, PAUSE
from quota.primitives.quota_groups import CLIENT_ID_PREFIX, CLIENT_IDS, QUOTA_GROUP, USERS

# ${env:NAME} (config.env_refs): a value the loader takes from the environment, accepted where a number, a boolean
# or an address is (strings take it as they are)
ENV_REF = {
    "type": "string",
    "pattern": r"^\$\{env:[A-Za-z_][A-Za-z0-9_]*\}$",
    "description": "${env:NAME}: the environment variable's value, read when the file is loaded",
}
ADDRESS = {"anyOf": [{"type": "string", "pattern": r"^\S+:[0-9]{1,5}$"}, ENV_REF], "description": "host:port"}
FILE = {"type": "string", "minLength": 1}
BOOLEAN = {"anyOf": [{"type": "boolean"}, ENV_REF]}
TOPIC = {"type": "string", "pattern": r"^[A-Za-z0-9._-]{1,249}$"}


def section(keys, described: dict[str, dict], required=(), text: str = "") -> dict:
    """A closed mapping of exactly the loader's ``keys``."""
    if set(keys) != set(described):
        raise AssertionError(f"schema out of step with the loader: {sorted(set(keys) ^ set(described))}")
    out: dict[str, Any] = {"type": "object", "additionalProperties": False, "properties": described}
    if required:
        out["required"] = list(required)
    if text:
        out["description"] = text
    return out


def number(low: float, high: float | None = None, integer: bool = False, text: str = "", default=None) -> dict:
    value: dict[str, Any] = {"type": "integer" if integer else "number", "minimum": low}
    if high is not None:
        value["maximum"] = high
    out: dict[str, Any] = {"anyOf": [value, ENV_REF]}
    if text:
        out["description"] = text
    if default is not None:
        out["default"] = default
    return out


def _settings() -> dict:
    described: dict[str, dict] = {}
    for name, spec in SETTINGS.items():
        described[name] = number(spec.minimum, spec.maximum, spec.kind is int, spec.doc, spec.default)
    words: dict[str, dict[str, Any]] = {
        IP_OVERRIDES: {
            "description": 'Kafka\'s "<ip>:<count>,...", or a mapping of IP address to count',
            "anyOf": [
                {"type": "string"},
                {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}},
            ],
        },
        QUOTA_MODE: {"enum": ["enforce", "shadow"], "default": "enforce"},
        PRODUCER_ID_ENFORCEMENT: {"enum": list(ENFORCEMENTS)},
        QUOTA_SCOPE: {"enum": list(SCOPES), "default": "broker"},
        QUOTA_SMOOTHING: {
            "anyOf": [BOOLEAN, {"type": "string", "pattern": "(?i)^\\s*(" + "|".join(SMOOTHING_VALUES) + ")\\s*$"}],
            "description": "off or on (YAML reads a bare on/off as true/false)",
        },
        SPLICE: {"enum": [*SPLICE_MODES, False], "default": "auto"},
        CLUSTER_TOPIC: {"anyOf": [TOPIC, {"type": "null"}]},
        CLUSTER_ID: {"anyOf": [{"type": "string", "minLength": 1, "maxLength": 255}, {"type": "null"}]},
        REQUEST_RATE_APIS: {
            "description": "Kafka API names request_rate counts, comma-separated or a list",
            "default": ",".join(DEFAULT_APIS),
            "anyOf": [{"type": "string"}, {"type": "array", "items": {"enum": list(COUNTABLE_APIS)}}],
        },
    }
    described.update(words)
    out = section(settings_module.SETTING_KEYS, described, text="Broker-style settings, by Kafka property name")
    per_listener = (
        "^listener\\.name\\.[A-Za-z0-9_-]+\\.("
        + "|".join(name.replace(".", "\\.") for name in LISTENER_SETTINGS)
        + ")$"
    )
    out["patternProperties"] = {per_listener: {"type": "number", "minimum": 0}}
    return out


def _quota_item() -> dict:
    rate = number(MIN_RATE)
    entity = {
        "type": "object",
        "additionalProperties": False,
        "minProperties": 1,
        "properties": {
            **{
                name: {"type": "string", "minLength": 1}
                for name in ("user", "client-id", "ip", "topic", "group", QUOTA_GROUP)
            },
            "partition": {
                "anyOf": [
                    {"type": "integer", "minimum": 0, "maximum": 2**31 - 1},
                    {"type": "string", "pattern": "^([0-9]+|<default>)$"},
                ]
            },
        },
        "description": 'user and/or client-id (a name or "<default>"), or ip, topic (with a partition or not), group'
        " or quota-group alone",
    }
    names = {"type": "array", "minItems": 1, "uniqueItems": True, "items": {"type": "string", "minLength": 1}}
    keys = {
        "entity": entity,
        "mode": {"enum": ["enforce", "shadow"]},
        "on_exceed": {"enum": ["throttle", "reject"], "description": "topic entities: reject over-quota writes"},
        USERS: {**names, "description": "quota groups: the users whose clients share its quotas"},
        CLIENT_IDS: {**names, "description": "quota groups: the client ids that share its quotas"},
        CLIENT_ID_PREFIX: {
            "type": "string",
            "minLength": 1,
            "description": "quota groups: every client id starting with this shares its quotas",
        },
        **{key: rate for key in ENFORCED_KEYS},
        CONNECTION_CREATION_RATE: rate,
    }
    return {"type": "object", "additionalProperties": False, "required": ["entity"], "properties": keys}


def _limit() -> dict:
    return section(volume.LIMIT_KEYS, {"type": {"enum": list(LIMIT_TYPES)}, "level": number(0)}, volume.LIMIT_KEYS)


def _volume() -> dict:
    publisher = section(
        volume.PUBLISHER_KEYS,
        {
            "broker_id": number(0, integer=True),
            "log_dirs": {"type": "array", "minItems": 1, "items": FILE},
            "interval_seconds": number(0.1),
            "soft_limit": _limit(),
            "hard_limit": _limit(),
        },
        ("broker_id", "log_dirs", "soft_limit", "hard_limit"),
    )
    log_dirs = section(
        volume.LOG_DIRS_KEYS,
        {"interval_seconds": number(1), "soft_limit": _limit(), "hard_limit": _limit()},
        ("soft_limit", "hard_limit"),
    )
    return section(
        volume.VOLUME_KEYS,
        {
            "source": {"enum": list(volume.SOURCES)},
            "topic": {"type": "string", "minLength": 1},
            "freshness_seconds": number(1),
            "missing_data_action": {"enum": [PAUSE, OPEN]},
            "produce_base_rate": number(1),
            "pause_delay_ms": number(0, integer=True),
            "paused_group_metadata_max_bytes": number(0, integer=True),
            "max_record_bytes": number(1024, integer=True),
            "max_volumes_per_snapshot": number(1, integer=True),
            "metrics_top_volumes": number(0, integer=True),
            "publisher": publisher,
            "describe_log_dirs": log_dirs,
        },
        text="Cluster-wide volume-usage throttling (Strimzi's quotas plugin's)",
    )


def _usage_log() -> dict:
    described = {"dir": {"type": "string", "minLength": 1}}
    described.update({key: number(low, high, kind is int) for key, (low, high, kind) in usage.LIMITS.items()})
    return section(("dir", *usage.LIMITS), described, ("dir",))


def _dynamic() -> dict:
    described: dict[str, dict[str, Any]] = {
        "enabled": BOOLEAN,
        "topic": {"type": "string", "minLength": 1, "maxLength": 249},
    }
    described.update({key: number(low, high, True) for key, (low, high) in dynamic_source.BOUNDS.items()})
    return {"anyOf": [{"type": "null"}, {"const": True}, section(dynamic_source.KEYS, described)]}


def config_schema() -> dict:
    """The configuration's JSON Schema (a fresh dict each call)."""
    listener_tls = section(
        tls.LISTENER_TLS_KEYS,
        {
            "certfile": FILE,
            "keyfile": FILE,
            "cafile": FILE,
            "client_auth": {"enum": list(tls.CLIENT_AUTH)},
            "principal_mapping_rules": {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
        },
        ("certfile",),
    )
    upstream_tls = section(
        tls.UPSTREAM_TLS_KEYS,
        {"cafile": FILE, "certfile": FILE, "keyfile": FILE, "verify": BOOLEAN, "check_hostname": BOOLEAN},
    )
    sasl = section(
        loader.UPSTREAM_SASL_KEYS,
        {
            "mechanism": {"enum": list(SASL_MECHANISMS)},
            "username": {"type": "string", "minLength": 1},
            "password": {"type": "string", "minLength": 1},
            "password_file": FILE,
        },
        ("mechanism", "username"),
    )
    servers = {"type": "array", "minItems": 1, "items": ADDRESS}
    own_clients = section(
        loader.OWN_CLIENTS_KEYS,
        {
            "bootstrap_servers": servers,
            "tls": {"anyOf": [{"const": False}, upstream_tls]},
            "sasl": {"anyOf": [{"const": False}, sasl]},
        },
        ("bootstrap_servers",),
        "Where the proxy's own clients go: a broker listener no proxy is in front of (tls, sasl: the upstream's "
        "unless given; false: none)",
    )
    upstream = section(
        loader.UPSTREAM_KEYS,
        {"bootstrap_servers": servers, "tls": upstream_tls, "sasl": sasl, "own_clients": own_clients},
        ("bootstrap_servers",),
        "The Kafka brokers behind the proxy",
    )
    listener = section(
        loader.LISTENER_KEYS,
        {
            "name": {"type": "string", "pattern": "^[A-Za-z0-9_-]+$"},
            "bind": ADDRESS,
            "advertised_host": {"type": "string", "minLength": 1},
            "broker_port_base": number(1, 65535, True),
            "internal": BOOLEAN,
            "tls": listener_tls,
            "sasl": BOOLEAN,
            "admin": BOOLEAN,
        },
        ("name", "bind"),
    )
    top = section(
        loader.TOP_KEYS,
        {
            "upstream": upstream,
            "listeners": {"type": "array", "minItems": 1, "items": listener},
            "metrics": section(loader.METRICS_KEYS, {"bind": ADDRESS}, ("bind",)),
            "settings": _settings(),
            "quotas": {
                "anyOf": [{"type": "null"}, {"type": "array", "items": _quota_item()}],
                "description": "Client quotas, Kafka's entities and keys",
            },
            "volume_usage": {"anyOf": [{"type": "null"}, _volume()]},
            "usage_log": {"anyOf": [{"type": "null"}, _usage_log()]},
            "dynamic_config": _dynamic(),
            "admin_principals": {"type": "array", "items": {"type": "string", "pattern": "^User:.+"}},
        },
        loader.TOP_REQUIRED,
    )
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "kafka-quota-proxy configuration",
        **top,
    }


def schema_text() -> str:
    """The schema as ``kafka-quota-proxy schema`` prints it and the package ships it."""
    import json

    return json.dumps(config_schema(), indent=2) + "\n"
