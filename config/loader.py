"""Loading and checking the YAML configuration.

Strict: unknown keys are rejected, every value is checked at load, and every error names the key path
(``listeners[0].bind``) and the reason. The result is a frozen :class:`~config.model.ProxyConfig`. The
``settings:`` section and the connection limits are :mod:`config.settings` (its table: :mod:`config.settings_table`); the other sections have their own
modules too.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from typing import Any

import yaml

from config.dynamic_source import parse_dynamic_config
from config.env_refs import ENV_TAG, WHOLE, construct_env_ref, expand
from config.errors import ConfigError, collecting, mapping_with, raise_all, show, unknown_keys
from config.model import (
    SASL_MECHANISMS,
    Address,
    ListenerConfig,
    MetricsConfig,
    OwnClientsConfig,
    ProxyConfig,
    UpstreamConfig,
    UpstreamSasl,
)
from config.quota_entries import parse_quota_entries
from config.quotas import is_group_item, is_quota_group_item, is_topic_item, parse_quota_section
from config.scope import check_scope
from config.settings import connection_limits, parse_settings
from config.tls import parse_listener_tls, parse_upstream_tls
from config.typed_settings import Settings
from config.usage import parse_usage_log
from config.volume import parse_volume_usage

_NAME = re.compile(r"^[A-Za-z0-9_-]+$")


def load_config_file(path: str) -> ProxyConfig:
    return load_config_text(_read(path))


def load_settings_and_quotas(path: str) -> tuple[Settings, tuple[dict, ...]]:
    """The ``settings:`` section and the user, client-id and IP ``quotas:`` of a configuration file, checked as
    :func:`load_config_file` checks them, the other sections not read: for a tool on a host without the files those
    name (TLS keys, password files), such as the quota planner."""
    raw = _yaml(_read(path))
    if not isinstance(raw, dict):
        raise ConfigError("", f"expected a mapping, got {show(raw)}")
    errors: list[ConfigError] = []
    settings = expand(raw.get("settings", {}), os.environ, "settings")
    settings = collecting(errors, parse_settings, settings, "settings", _listener_names(raw.get("listeners")))
    items = expand(raw.get("quotas") or [], os.environ, "quotas")
    collecting(errors, parse_quota_section, items, "quotas")
    raise_all(errors)  # every error of both, each naming its key; else settings is parsed
    others = (is_topic_item, is_group_item, is_quota_group_item)  # not a user's, a client id's or an IP's
    return settings, tuple(dict(i) for i in items if not any(other(i) for other in others))


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as exc:
        raise ConfigError("", f"cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError("", f"{path} is not UTF-8 text (byte {exc.start}: {exc.reason})") from None


MAX_CONFIG_DEPTH = 32


class _StrictLoader(yaml.SafeLoader):
    """Safe YAML, stricter: no aliases (an alias bomb expands to gigabytes; a config does not need them), no key
    given twice in one mapping (the second would silently win), no nesting deeper than MAX_CONFIG_DEPTH."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise ConfigError(
                "",
                f"YAML aliases (*{event.anchor}) are not allowed in the configuration "
                f"(line {event.start_mark.line + 1})",
            )
        depth = getattr(self, "_depth", 0)
        if depth > MAX_CONFIG_DEPTH:
            raise ConfigError(
                "", f"nested deeper than {MAX_CONFIG_DEPTH} levels (line {self.peek_event().start_mark.line + 1})"
            )
        self._depth = depth + 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth = depth

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, (str, int, float, bool)) and key in seen:
                raise ConfigError(str(key), f"given twice in one mapping (line {key_node.start_mark.line + 1})")
            if isinstance(key, (str, int, float, bool)):
                seen.add(key)
        return super().construct_mapping(node, deep)


_StrictLoader.add_implicit_resolver(ENV_TAG, WHOLE, list("$"))  # plain scalars only: a quoted one stays text
_StrictLoader.add_constructor(ENV_TAG, construct_env_ref)


def load_config_text(text: str, environ: Mapping[str, str] | None = None) -> ProxyConfig:
    """``text`` parsed, its ``${env:NAME}`` references taken from ``environ`` (the process's environment)."""
    return parse_config(expand(_yaml(text), os.environ if environ is None else environ))


def _yaml(text: str) -> Any:
    try:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise ConfigError("", f"not valid YAML: {exc}") from None


# The keys of each mapping the loader reads (required ones first); config.schema builds the JSON Schema from these.
TOP_REQUIRED = ("upstream", "listeners")
TOP_KEYS = (
    *TOP_REQUIRED,
    "metrics",
    "settings",
    "quotas",
    "volume_usage",
    "usage_log",
    "dynamic_config",
    "admin_principals",
)
UPSTREAM_KEYS = ("bootstrap_servers", "tls", "sasl", "own_clients")
OWN_CLIENTS_KEYS = ("bootstrap_servers", "tls", "sasl")
UPSTREAM_SASL_KEYS = ("mechanism", "username", "password", "password_file")
LISTENER_KEYS = ("name", "bind", "advertised_host", "broker_port_base", "internal", "tls", "sasl", "admin")
METRICS_KEYS = ("bind",)
DEFAULT_METRICS = {"bind": "127.0.0.1:9464"}


def parse_config(raw: Any) -> ProxyConfig:
    """The whole file checked: every section is parsed even when another has errors, and every error found is
    raised together (:class:`~config.errors.ConfigErrors`), each with its key path."""
    if not isinstance(raw, dict):
        raise ConfigError("", f"expected a mapping, got {show(raw)}")
    errors = unknown_keys(raw, "", TOP_KEYS)
    errors += [ConfigError(key, "required key is missing") for key in TOP_REQUIRED if key not in raw]
    upstream = collecting(errors, _upstream, raw["upstream"], "upstream") if "upstream" in raw else None
    listeners = collecting(errors, _listeners, raw["listeners"], "listeners") if "listeners" in raw else None
    settings = collecting(
        errors, parse_settings, raw.get("settings", {}), "settings", _listener_names(raw.get("listeners"))
    )
    if settings is not None and listeners is not None:
        collecting(errors, check_scope, settings, listeners, "settings")
    entries = collecting(errors, parse_quota_entries, raw.get("quotas", []), "quotas")
    metrics = collecting(errors, _metrics, raw.get("metrics", DEFAULT_METRICS), "metrics")
    volume_usage = collecting(errors, parse_volume_usage, raw.get("volume_usage"), "volume_usage")
    usage_log = collecting(errors, parse_usage_log, raw.get("usage_log"), "usage_log")
    dynamic_config = collecting(errors, parse_dynamic_config, raw.get("dynamic_config"), "dynamic_config")
    admin_principals = collecting(errors, _principals, raw.get("admin_principals", []), "admin_principals")
    raise_all(errors)
    assert upstream is not None and listeners is not None  # required: without them raise_all raised
    return ProxyConfig(
        upstream=upstream,
        listeners=listeners,
        metrics=metrics,
        settings=settings,
        quotas=entries.clients,
        volume_usage=volume_usage,
        connections=connection_limits(settings, listeners, entries.ip_rates),
        usage_log=usage_log,
        dynamic_config=dynamic_config,
        raw_quotas=tuple(dict(item) for item in (raw.get("quotas") or [])),
        admin_principals=admin_principals,
        topic_quotas=entries.topics,
        group_quotas=entries.groups,
    )


def _listener_names(raw: Any) -> set[str]:
    """The listener names the file gives (also when a listener has errors: its per-listener settings are still
    checked against its name)."""
    items = raw if isinstance(raw, list) else []
    return {item["name"] for item in items if isinstance(item, dict) and isinstance(item.get("name"), str)}


def _principals(raw: Any, path: str) -> frozenset[str]:
    """``admin_principals``: Kafka principals, ``User:alice`` (``User:ANONYMOUS`` for unauthenticated clients)."""
    if not isinstance(raw, list):
        raise ConfigError(path, f"expected a list of principals such as User:alice, got {show(raw)}")
    for i, item in enumerate(raw):
        if not isinstance(item, str) or not item.startswith("User:") or len(item) <= 5:
            raise ConfigError(f"{path}[{i}]", f"expected a principal such as User:alice, got {show(item)}")
    return frozenset(raw)


def _upstream(raw: Any, path: str) -> UpstreamConfig:
    m = mapping_with(raw, path, UPSTREAM_KEYS, {"bootstrap_servers"})
    errors: list[ConfigError] = []
    servers = collecting(errors, _list, m["bootstrap_servers"], f"{path}.bootstrap_servers", _address)
    tls = collecting(errors, parse_upstream_tls, m.get("tls"), f"{path}.tls")
    sasl = collecting(errors, _upstream_sasl, m.get("sasl"), f"{path}.sasl")
    own = (
        collecting(errors, _own_clients, m["own_clients"], f"{path}.own_clients", tls, sasl)
        if "own_clients" in m
        else None
    )
    raise_all(errors)
    return UpstreamConfig(bootstrap_servers=tuple(servers), tls=tls, sasl=sasl, own_clients=own)


def _own_clients(raw: Any, path: str, tls, sasl) -> OwnClientsConfig:
    """``upstream.own_clients``: {bootstrap_servers, tls, sasl}; ``tls``/``sasl`` absent take the upstream's, ``false``
    turns them off (a PLAINTEXT listener for the proxies where the brokers' client listener has TLS), a mapping is
    read as ``upstream.tls``/``upstream.sasl`` are."""
    m = mapping_with(raw, path, OWN_CLIENTS_KEYS, {"bootstrap_servers"})
    errors: list[ConfigError] = []
    servers = collecting(errors, _list, m["bootstrap_servers"], f"{path}.bootstrap_servers", _address)
    for key, parse in (("tls", parse_upstream_tls), ("sasl", _upstream_sasl)):
        if key in m and not isinstance(m[key], dict) and m[key] is not False:
            errors.append(
                ConfigError(f"{path}.{key}", f"expected a mapping (as upstream.{key}) or false, got {show(m[key])}")
            )
        elif key in m:
            own = collecting(errors, parse, m[key], f"{path}.{key}") if m[key] is not False else None
            tls, sasl = (own, sasl) if key == "tls" else (tls, own)
    raise_all(errors)
    return OwnClientsConfig(tuple(servers), tls, sasl)


def _upstream_sasl(raw: Any, path: str) -> UpstreamSasl | None:
    """``upstream.sasl``: {mechanism, username, password | password_file}; the password is read once, here."""
    if raw is None:
        return None
    m = mapping_with(raw, path, UPSTREAM_SASL_KEYS, {"mechanism", "username"})
    mechanism = m["mechanism"]
    if mechanism not in SASL_MECHANISMS:
        raise ConfigError(f"{path}.mechanism", f"expected one of {', '.join(SASL_MECHANISMS)}, got {show(mechanism)}")
    username = m["username"]
    if not isinstance(username, str) or not username:
        raise ConfigError(f"{path}.username", f"expected a non-empty string, got {show(username)}")
    if ("password" in m) == ("password_file" in m):
        raise ConfigError(path, "expected exactly one of password and password_file")
    if "password" in m:
        password = m["password"]
        if not isinstance(password, str) or not password:
            raise ConfigError(f"{path}.password", "expected a non-empty string")
    else:
        source = m["password_file"]
        if not isinstance(source, str) or not source:
            raise ConfigError(f"{path}.password_file", f"expected a file name, got {show(source)}")
        try:
            with open(source, encoding="utf-8") as f:
                password = f.read().rstrip("\r\n")
        except OSError as exc:
            raise ConfigError(f"{path}.password_file", f"cannot read {source}: {exc.strerror}") from None
        if not password:
            raise ConfigError(f"{path}.password_file", f"{source} is empty")
    return UpstreamSasl(mechanism, username, password)


def _listeners(raw: Any, path: str) -> tuple[ListenerConfig, ...]:
    listeners = _list(raw, path, _listener)
    seen: dict[str, int] = {}
    binds: dict[Address, int] = {}
    for i, listener in enumerate(listeners):
        if listener.name in seen:
            raise ConfigError(f"{path}[{i}].name", f"duplicate listener name {listener.name!r}")
        if listener.bind in binds and listener.bind.port != 0:
            raise ConfigError(
                f"{path}[{i}].bind", f"{listener.bind} is already bound by {path}[{binds[listener.bind]}]"
            )
        seen[listener.name] = i
        binds[listener.bind] = i
    for flag in ("internal", "admin"):
        flagged = [i for i, listener in enumerate(listeners) if getattr(listener, flag)]
        if len(flagged) > 1:
            raise ConfigError(
                f"{path}[{flagged[1]}].{flag}", f"only one listener can be {flag}; {path}[{flagged[0]}] already is"
            )
    if listeners and all(listener.admin for listener in listeners):
        raise ConfigError(f"{path}[0].admin", "the admin listener cannot be the only one: add the tenants' listener")
    return tuple(listeners)


def _listener(raw: Any, path: str) -> ListenerConfig:
    m = mapping_with(raw, path, LISTENER_KEYS, {"name", "bind"})
    errors: list[ConfigError] = []  # each key's own error, all of them; then what one key says of another
    internal = collecting(errors, _flag, m.get("internal", False), f"{path}.internal")
    admin = collecting(errors, _flag, m.get("admin", False), f"{path}.admin")
    sasl = collecting(errors, _flag, m.get("sasl", False), f"{path}.sasl")
    tls = collecting(errors, parse_listener_tls, m.get("tls"), f"{path}.tls")
    name = collecting(errors, _listener_name, m["name"], f"{path}.name")
    bind = collecting(errors, _address, m["bind"], f"{path}.bind")
    base = collecting(errors, _port_base, m.get("broker_port_base"), f"{path}.broker_port_base")
    advertised = collecting(errors, _host, m.get("advertised_host"), f"{path}.advertised_host")
    raise_all(errors)
    if admin:
        advertised = _admin_listener(path, internal, base, bind, advertised)
    elif advertised is not None and base is None:
        raise ConfigError(
            f"{path}.advertised_host", "only used in cluster mode (or on the admin listener): set broker_port_base too"
        )
    if base is not None:
        if bind.port >= base:
            raise ConfigError(
                f"{path}.broker_port_base",
                f"must be above the bootstrap port {bind.port}, which would otherwise be broker "
                f"{bind.port - base}'s port",
            )
        if advertised is None:
            if bind.host in ("0.0.0.0", "::", ""):
                raise ConfigError(f"{path}.advertised_host", f"required in cluster mode when binding {bind.host}")
            advertised = bind.host
    return ListenerConfig(
        name=name,
        bind=bind,
        advertised_host=advertised,
        broker_port_base=base,
        internal=internal,
        tls=tls,
        sasl=sasl,
        admin=admin,
    )


def _admin_listener(path: str, internal: bool, base: int | None, bind: Address, advertised: str | None) -> str:
    """What an admin listener cannot also be, and the host it gives its clients for every broker (they stay on it)."""
    if internal:
        raise ConfigError(f"{path}.admin", "the admin listener cannot also be the internal (inter-broker) listener")
    if base is not None:
        raise ConfigError(
            f"{path}.broker_port_base",
            "not on the admin listener: it hands its clients its own address for every broker, so they stay on it",
        )
    if advertised is not None:
        return advertised
    if bind.host in ("0.0.0.0", "::", ""):
        raise ConfigError(
            f"{path}.advertised_host",
            f"required on an admin listener binding {bind.host}: the host its clients are given for every broker",
        )
    return bind.host


def _flag(raw: Any, path: str) -> bool:
    if not isinstance(raw, bool):
        raise ConfigError(path, f"expected true or false, got {show(raw)}")
    return raw


def _listener_name(raw: Any, path: str) -> str:
    if not isinstance(raw, str) or not _NAME.match(raw):
        raise ConfigError(path, f"expected a listener name of letters, digits, '_' or '-', got {show(raw)}")
    return raw


def _port_base(raw: Any, path: str) -> int | None:
    if raw is not None and (isinstance(raw, bool) or not isinstance(raw, int) or not 1 <= raw <= 65535):
        raise ConfigError(path, f"expected a port number between 1 and 65535, got {show(raw)}")
    return raw


def _host(raw: Any, path: str) -> str | None:
    if raw is not None and (not isinstance(raw, str) or not raw or " " in raw):
        raise ConfigError(path, f"expected a host name or address, got {show(raw)}")
    return raw


def _metrics(raw: Any, path: str) -> MetricsConfig:
    m = mapping_with(raw, path, METRICS_KEYS, {"bind"})
    return MetricsConfig(bind=_address(m["bind"], f"{path}.bind"))


def _address(raw: Any, path: str) -> Address:
    if not isinstance(raw, str):
        raise ConfigError(path, f"expected host:port, got {show(raw)}")
    host, sep, port = raw.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ConfigError(path, f"expected host:port, got {raw!r}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not 0 <= int(port) <= 65535:
        raise ConfigError(path, f"port must be between 0 and 65535, got {port}")
    return Address(host, int(port))


def _list(raw: Any, path: str, item: Callable[[Any, str], Any]) -> list:
    if not isinstance(raw, list) or not raw:
        raise ConfigError(path, f"expected a non-empty list, got {show(raw)}")
    errors: list[ConfigError] = []
    items = [collecting(errors, item, v, f"{path}[{i}]") for i, v in enumerate(raw)]
    raise_all(errors)  # every item's errors, not only the first item's
    return items
