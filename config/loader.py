"""Loading and checking the YAML configuration.

Strict: unknown keys are rejected, every value is checked at load, and every error names the key path
(``listeners[0].bind``) and the reason. The result is a frozen :class:`~config.model.ProxyConfig`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable

import yaml

from config.errors import ConfigError, join, mapping_with, show
from config.quotas import parse_quota_section
from config.dynamic_source import parse_dynamic_config
from config.tls import parse_listener_tls, parse_upstream_tls
from config.usage import parse_usage_log
from config.volume import parse_volume_usage
from config.model import Address, ListenerConfig, MetricsConfig, ProxyConfig, Settings, UpstreamConfig
from quota.connection import ConnectionLimits, normalize_ip


@dataclass(frozen=True, slots=True)
class Setting:
    default: int | float | None  # None: derived from other settings where it is used
    kind: type
    minimum: float
    maximum: float
    doc: str


# Settings under `settings:`; Kafka broker property names where Kafka has the same knob.
SETTINGS: dict[str, Setting] = {
    "socket.request.max.bytes": Setting(
        104857600, int, 1024, 2**31 - 1, "Largest request frame accepted from a client; larger closes the connection."
    ),
    "upstream.response.max.bytes": Setting(
        104857600, int, 1024, 2**31 - 1,
        "Largest response frame accepted from the broker; larger closes that client's connection "
        "(default as socket.request.max.bytes). Only responses the proxy decodes are buffered, up to this size.",
    ),
    "connections.max.inflight.requests": Setting(
        200, int, 1, 1_000_000,
        "Requests one client connection may have awaiting an answer; at the bound the proxy stops reading that "
        "client until answers go out (a Kafka broker reads one request per connection at a time).",
    ),
    "connections.max.buffered.response.bytes": Setting(
        1048576, int, 1024, 2**31 - 1,
        "Response bytes waiting for one client to read them; above this the proxy stops reading that client's "
        "broker connection and, at the next request boundary, the client itself.",
    ),
    "shutdown.grace.period.ms": Setting(
        10000, int, 0, 3_600_000, "On SIGTERM/SIGINT, how long in-flight requests may take to finish."
    ),
    "upstream.connect.timeout.ms": Setting(
        5000, int, 1, 600_000, "Time allowed to open the broker connection for a new client connection."
    ),
    "connections.max.idle.ms": Setting(
        600000, int, 1000, 2**31 - 1,
        "A client connection with nothing in flight that sends nothing for this long is closed (Kafka's setting).",
    ),
    "upstream.response.timeout.ms": Setting(
        300000, int, 1000, 2**31 - 1,
        "Longest the proxy waits for the broker to answer a request before closing that client's connection.",
    ),
    "quota.window.num": Setting(11, int, 1, 1000, "Samples kept by the byte-rate quotas (Kafka's quota.window.num)."),
    "quota.window.size.seconds": Setting(
        1, int, 1, 3600, "Length of each sample of the byte-rate quotas (Kafka's quota.window.size.seconds)."
    ),
    "quota.mute.max.ms": Setting(
        25000, int, 1, 2**31 - 1,
        "Longest a client is muted (and the throttle_time_ms reported) for one quota violation, so a client is "
        "never held past the 30 s request timeout its requests wait under; Kafka does not cap byte-rate throttles.",
    ),
    "controller.quota.window.num": Setting(
        11, int, 1, 1000,
        "Samples of the controller mutation quota (Kafka's controller.quota.window.num); the token bucket's burst "
        "is controller_mutation_rate x num x size.",
    ),
    "controller.quota.window.size.seconds": Setting(
        1, int, 1, 3600, "Length of each sample of the controller mutation quota (controller.quota.window.size.seconds).",
    ),
    "controller.quota.metadata.max.age.ms": Setting(
        30000, int, 0, 2**31 - 1,
        "Partition counts the controller mutation quota learnt from Metadata responses older than this are looked "
        "up again (one Metadata request on the client's broker connection) before a DeleteTopics or "
        "CreatePartitions is decided.",
    ),
    "producer.id.quota.window.num": Setting(
        11, int, 1, 1000,
        "Windows of the active producer-id quota (KIP-936); its token bucket's burst is producer_ids_rate x num.",
    ),
    "producer.id.quota.window.size.seconds": Setting(
        3600, int, 1, 2**31 - 1,
        "The producer-id quota's window: producer_ids_rate counts new producer ids per window, and each user's "
        "bloom filter is written for half of it and read for all of it (KIP-936; default one hour).",
    ),
    "producer.id.quota.cache.cleanup.scheduler.interval.ms": Setting(
        10, int, 1, 2**31 - 1,
        "How often users whose bloom filters have all expired are dropped from the producer-id cache (KIP-936's "
        "setting; the proxy's housekeeping runs at most once a second).",
    ),
    "producer.id.quota.bloom.expected.pids": Setting(
        1000, int, 1, 100_000_000,
        "New producer ids one user's bloom filter is sized for per half window (ours; the KIP leaves it open). "
        "More than this raises the false-positive rate above the configured one.",
    ),
    "producer.id.quota.bloom.false.positive.rate": Setting(
        0.001, float, 1e-9, 0.5,
        "False-positive rate of each bloom filter at its expected size: the share of new producer ids mistaken "
        "for known ones (and so not counted; never a wrong throttle).",
    ),
    "cluster.metadata.refresh.ms": Setting(
        30000, int, 100, 2**31 - 1,
        "Cluster mode: how often the proxy asks the cluster for its brokers (Metadata, no topics) to open the port "
        "of every broker; at start-up it asks at once and retries with backoff until a bootstrap server answers.",
    ),
    "cluster.broker.removal.ms": Setting(
        300000, int, 0, 2**31 - 1,
        "Cluster mode: a broker absent from the cluster's answers this long has its port closed, and its "
        "connections closed; a broker that comes back gets the same port.",
    ),
    "sasl.server.max.receive.size": Setting(
        524288, int, 1024, 2**31 - 1,
        "On a listener marked sasl: true, the largest frame a client may send before it has authenticated "
        "(Kafka's setting of the same name); larger closes the connection.",
    ),
    "max.connection.creation.rate": Setting(
        2**31 - 1, int, 1, 2**31 - 1,
        "New client connections accepted per second across the proxy's listeners (KIP-612's broker-wide limit; "
        "the internal listener is exempt when there are others). Over it, accepting waits (at most one quota "
        "window) and new connections queue in the kernel's backlog. Per listener: "
        "listener.name.<name>.max.connection.creation.rate.",
    ),
    "max.connections": Setting(
        2**31 - 1, int, 1, 2**31 - 1,
        "Client connections open at once across the proxy (KIP-402; the internal listener is exempt when there are "
        "others); a new connection over it is closed at once. Per listener: listener.name.<name>.max.connections.",
    ),
    "max.connections.per.ip": Setting(
        2**31 - 1, int, 0, 2**31 - 1,
        "Client connections open at once from one IP address (Kafka's setting); a new one over it is closed at once.",
    ),
    "quota.metrics.max.entities": Setting(
        1000, int, 1, 1_000_000,
        "Quota entities with their own metric labels; the rest are summed under user/client_id '__other__'.",
    ),
}

_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
# Per-listener settings, as Kafka prefixes them: listener.name.<name>.<setting>
LISTENER_SETTINGS = ("max.connection.creation.rate", "max.connections")
_LISTENER_SETTING = re.compile(r"^listener\.name\.([A-Za-z0-9_-]+)\.(" +
                               "|".join(re.escape(name) for name in LISTENER_SETTINGS) + r")$")
IP_OVERRIDES = "max.connections.per.ip.overrides"  # Kafka's "<ip>:<count>,<ip>:<count>", or a mapping
QUOTA_MODE = "quota.mode"  # enforce or shadow: every quota of the proxy computed and metered, none applied


def load_config_file(path: str) -> ProxyConfig:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise ConfigError("", f"cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError("", f"{path} is not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    return load_config_text(text)


MAX_CONFIG_DEPTH = 32


class _StrictLoader(yaml.SafeLoader):
    """Safe YAML, stricter: no aliases (an alias bomb expands to gigabytes; a config does not need them), no key
    given twice in one mapping (the second would silently win), no nesting deeper than MAX_CONFIG_DEPTH."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise ConfigError("", f"YAML aliases (*{event.anchor}) are not allowed in the configuration "
                              f"(line {event.start_mark.line + 1})")
        depth = getattr(self, "_depth", 0)
        if depth > MAX_CONFIG_DEPTH:
            raise ConfigError("", f"nested deeper than {MAX_CONFIG_DEPTH} levels "
                              f"(line {self.peek_event().start_mark.line + 1})")
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


def load_config_text(text: str) -> ProxyConfig:
    try:
        raw = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise ConfigError("", f"not valid YAML: {exc}") from None
    return parse_config(raw)


def parse_config(raw: Any) -> ProxyConfig:
    top = _mapping(raw, "", required={"upstream", "listeners"},
                   optional={"metrics", "settings", "quotas", "volume_usage", "usage_log", "dynamic_config",
                             "admin_principals"})
    listeners = _listeners(top["listeners"], "listeners")
    settings = _settings(top.get("settings", {}), "settings", {lc.name for lc in listeners})
    quotas, ip_rates = parse_quota_section(top.get("quotas", []), "quotas")
    return ProxyConfig(
        upstream=_upstream(top["upstream"], "upstream"),
        listeners=listeners,
        metrics=_metrics(top.get("metrics", {"bind": "127.0.0.1:9464"}), "metrics"),
        settings=settings,
        quotas=quotas,
        volume_usage=parse_volume_usage(top.get("volume_usage"), "volume_usage"),
        connections=connection_limits(settings, listeners, ip_rates),
        usage_log=parse_usage_log(top.get("usage_log"), "usage_log"),
        dynamic_config=parse_dynamic_config(top.get("dynamic_config"), "dynamic_config"),
        raw_quotas=tuple(dict(item) for item in (top.get("quotas") or [])),
        admin_principals=_principals(top.get("admin_principals", []), "admin_principals"),
    )


def _principals(raw: Any, path: str) -> frozenset[str]:
    """``admin_principals``: Kafka principals, ``User:alice`` (``User:ANONYMOUS`` for unauthenticated clients)."""
    if not isinstance(raw, list):
        raise ConfigError(path, f"expected a list of principals such as User:alice, got {show(raw)}")
    for i, item in enumerate(raw):
        if not isinstance(item, str) or not item.startswith("User:") or len(item) <= 5:
            raise ConfigError(f"{path}[{i}]", f"expected a principal such as User:alice, got {show(item)}")
    return frozenset(raw)


def connection_limits(settings: Settings, listeners: tuple[ListenerConfig, ...],
                      ip_rates: dict[str, float]) -> ConnectionLimits:
    """The connection limits (KIP-612, KIP-402) from settings, listeners and the ``{ip: ...}`` quotas."""
    unlimited = 2**31 - 1
    values = settings.values

    def limit(name: str) -> int | None:
        return None if values[name] == unlimited else values[name]

    per_listener = {name: {} for name in LISTENER_SETTINGS}
    for key, value in values.items():
        match = _LISTENER_SETTING.match(key)
        if match:
            per_listener[match.group(2)][match.group(1)] = value
    rate = values["max.connection.creation.rate"]
    return ConnectionLimits(
        max_connection_creation_rate=math.inf if rate == unlimited else float(rate),
        listener_creation_rates=MappingProxyType({name: float(v) for name, v in
                                                  per_listener["max.connection.creation.rate"].items()}),
        max_connections=limit("max.connections"),
        listener_max_connections=MappingProxyType(dict(per_listener["max.connections"])),
        max_connections_per_ip=limit("max.connections.per.ip"),
        max_connections_per_ip_overrides=MappingProxyType(dict(values[IP_OVERRIDES])),
        ip_rates=MappingProxyType(ip_rates),
        internal_listener=next((lc.name for lc in listeners if lc.internal), None),
    )


def _mapping(raw: Any, path: str, required: set[str], optional: set[str] = frozenset()) -> dict:
    return mapping_with(raw, path, set(required) | set(optional), required)


def _upstream(raw: Any, path: str) -> UpstreamConfig:
    m = _mapping(raw, path, required={"bootstrap_servers"}, optional={"tls"})
    servers = _list(m["bootstrap_servers"], f"{path}.bootstrap_servers", _address)
    return UpstreamConfig(bootstrap_servers=tuple(servers), tls=parse_upstream_tls(m.get("tls"), f"{path}.tls"))


def _listeners(raw: Any, path: str) -> tuple[ListenerConfig, ...]:
    listeners = _list(raw, path, _listener)
    seen: dict[str, int] = {}
    binds: dict[Address, int] = {}
    for i, listener in enumerate(listeners):
        if listener.name in seen:
            raise ConfigError(f"{path}[{i}].name", f"duplicate listener name {listener.name!r}")
        if listener.bind in binds and listener.bind.port != 0:
            raise ConfigError(f"{path}[{i}].bind", f"{listener.bind} is already bound by {path}[{binds[listener.bind]}]")
        seen[listener.name] = i
        binds[listener.bind] = i
    internal = [i for i, listener in enumerate(listeners) if listener.internal]
    if len(internal) > 1:
        raise ConfigError(f"{path}[{internal[1]}].internal", f"only one listener can be internal; "
                          f"{path}[{internal[0]}] already is")
    return tuple(listeners)


def _listener(raw: Any, path: str) -> ListenerConfig:
    m = _mapping(raw, path, required={"name", "bind"},
                 optional={"advertised_host", "broker_port_base", "internal", "tls", "sasl"})
    internal = m.get("internal", False)
    if not isinstance(internal, bool):
        raise ConfigError(f"{path}.internal", f"expected true or false, got {show(internal)}")
    sasl = m.get("sasl", False)
    if not isinstance(sasl, bool):
        raise ConfigError(f"{path}.sasl", f"expected true or false, got {show(sasl)}")
    tls = parse_listener_tls(m.get("tls"), f"{path}.tls")
    name = m["name"]
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigError(f"{path}.name", f"expected a listener name of letters, digits, '_' or '-', got {show(name)}")
    bind = _address(m["bind"], f"{path}.bind")
    base = m.get("broker_port_base")
    if base is not None and (isinstance(base, bool) or not isinstance(base, int) or not 1 <= base <= 65535):
        raise ConfigError(f"{path}.broker_port_base", f"expected a port number between 1 and 65535, got {show(base)}")
    advertised = m.get("advertised_host")
    if advertised is not None and (not isinstance(advertised, str) or not advertised or " " in advertised):
        raise ConfigError(f"{path}.advertised_host", f"expected a host name or address, got {show(advertised)}")
    if advertised is not None and base is None:
        raise ConfigError(f"{path}.advertised_host", "only used in cluster mode: set broker_port_base too")
    if base is not None:
        if bind.port >= base:
            raise ConfigError(f"{path}.broker_port_base",
                              f"must be above the bootstrap port {bind.port}, which would otherwise be broker "
                              f"{bind.port - base}'s port")
        if advertised is None:
            if bind.host in ("0.0.0.0", "::", ""):
                raise ConfigError(f"{path}.advertised_host", f"required in cluster mode when binding {bind.host}")
            advertised = bind.host
    return ListenerConfig(name=name, bind=bind, advertised_host=advertised, broker_port_base=base, internal=internal,
                          tls=tls, sasl=sasl)


def _metrics(raw: Any, path: str) -> MetricsConfig:
    m = _mapping(raw, path, required={"bind"})
    return MetricsConfig(bind=_address(m["bind"], f"{path}.bind"))


def _settings(raw: Any, path: str, listener_names: set[str] = frozenset()) -> Settings:
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(path, f"expected a mapping, got {show(raw)}")
    prefixed = {key for key in raw if isinstance(key, str) and _LISTENER_SETTING.match(key)}
    m = _mapping(raw, path, required=set(), optional=set(SETTINGS) | {IP_OVERRIDES, QUOTA_MODE} | prefixed)
    values: dict[str, Any] = {name: s.default for name, s in SETTINGS.items()}
    values[IP_OVERRIDES] = {}
    values[QUOTA_MODE] = "enforce"
    for name, value in m.items():
        key = join(path, name)
        if name == IP_OVERRIDES:
            values[name] = _ip_overrides(value, key)
            continue
        if name == QUOTA_MODE:
            if value not in ("enforce", "shadow"):
                raise ConfigError(key, f"expected enforce or shadow, got {show(value)}")
            values[name] = value
            continue
        match = _LISTENER_SETTING.match(name)
        if match:
            if match.group(1) not in listener_names:
                raise ConfigError(key, f"no listener named {match.group(1)!r} (listeners: "
                                  f"{', '.join(sorted(listener_names))})")
            spec = SETTINGS[match.group(2)]
        else:
            spec = SETTINGS[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(key, f"expected a number, got {show(value)}")
        if not math.isfinite(value):
            raise ConfigError(key, f"expected a finite number, got {value!r}")
        if spec.kind is int and value != int(value):
            raise ConfigError(key, f"expected an integer, got {value!r}")
        if not spec.minimum <= value <= spec.maximum:
            raise ConfigError(key, f"must be between {_num(spec.minimum)} and {_num(spec.maximum)}, got {value!r}")
        values[name] = spec.kind(value)
    return Settings(MappingProxyType(values))


def parse_settings_values(raw: Any, path: str, listener_names: set[str]) -> Settings:
    """Settings from a mapping (the YAML's, or the YAML's laid over with dynamic ones)."""
    return _settings(raw, path, listener_names)


def _ip_overrides(raw: Any, path: str) -> dict[str, int]:
    """``max.connections.per.ip.overrides``: Kafka's ``"<ip>:<count>,<ip>:<count>"``, or a YAML mapping."""
    if isinstance(raw, str):
        pairs = []
        for part in filter(None, (p.strip() for p in raw.split(","))):
            ip, sep, count = part.rpartition(":")
            if not sep:
                raise ConfigError(path, f"expected <ip>:<count>, got {part!r}")
            pairs.append((ip, count))
    elif isinstance(raw, dict):
        pairs = list(raw.items())
    else:
        raise ConfigError(path, f"expected \"<ip>:<count>,...\" or a mapping of IP to count, got {show(raw)}")
    out = {}
    for ip, count in pairs:
        try:
            address = normalize_ip(str(ip))
        except ValueError:
            raise ConfigError(path, f"not an IP address: {ip!r}") from None
        if isinstance(count, str) and count.strip().isdigit():
            count = int(count)
        if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= 2**31 - 1:
            raise ConfigError(path, f"{ip}: expected a connection count >= 0, got {count!r}")
        out[address] = count
    return out


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
    return [item(v, f"{path}[{i}]") for i, v in enumerate(raw)]


def _num(value: float) -> str:
    return str(int(value)) if value == int(value) else str(value)
