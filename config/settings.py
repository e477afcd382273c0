"""The ``settings:`` section checked: every value against its bounds in :mod:`config.settings_table` at load, an
error naming the key and the reason; and the connection limits (KIP-612, KIP-402) the settings and the
``{ip: ...}`` quotas make.

Per-listener settings are prefixed as Kafka prefixes them (``listener.name.<name>.<setting>``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Set
from types import MappingProxyType
from typing import Any

from config.errors import ConfigError, collecting, join, raise_all, show, unknown_key
from config.model import ListenerConfig
from config.request_rate import DEFAULT_APIS, parse_request_rate_apis
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
from config.typed_settings import QUOTA_MODES, SETTING_KEYS, Settings
from quota.managers.connection import ConnectionLimits, normalize_ip
from quota.managers.producer_ids import DEFAULT_MAX_HOLD_MS, ENFORCEMENTS, HOLD

_LISTENER_SETTING = re.compile(
    r"^listener\.name\.([A-Za-z0-9_-]+)\.(" + "|".join(re.escape(name) for name in LISTENER_SETTINGS) + r")$"
)
_TOPIC_NAME = re.compile(r"^[A-Za-z0-9._-]{1,249}$")


def listener_setting_names(listener_names: Iterable[str]) -> list[str]:
    """The per-listener keys these listeners can take (``listener.name.<name>.<setting>``)."""
    return [f"listener.name.{listener}.{name}" for listener in sorted(listener_names) for name in LISTENER_SETTINGS]


def parse_settings(raw: Any, path: str, listener_names: Set[str] = frozenset()) -> Settings:
    """The ``settings:`` section, every default filled in (also: the YAML's laid over with dynamic ones)."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(path, f"expected a mapping, got {show(raw)}")
    prefixed = {key for key in raw if isinstance(key, str) and _LISTENER_SETTING.match(key)}
    hints = [*SETTING_KEYS, *listener_setting_names(listener_names)]  # what a misspelt key may have meant
    errors = [unknown_key(path, key, hints) for key in raw if key not in SETTING_KEYS and key not in prefixed]
    m = {name: value for name, value in raw.items() if name in SETTING_KEYS or name in prefixed}
    values: dict[str, Any] = {name: s.default for name, s in SETTINGS.items()}
    values[IP_OVERRIDES] = MappingProxyType({})
    values[QUOTA_MODE] = "enforce"
    values[PRODUCER_ID_ENFORCEMENT] = HOLD
    values[QUOTA_SCOPE] = "broker"
    values[QUOTA_SMOOTHING] = "off"
    values[SPLICE] = "auto"
    values[CLUSTER_TOPIC] = values[CLUSTER_ID] = None
    values[REQUEST_RATE_APIS] = DEFAULT_APIS
    for name, value in m.items():
        collecting(errors, _setting, values, name, value, join(path, name), listener_names)
    raise_all(errors)  # every key's error at once; the checks across settings below need good values
    if QUOTA_SMOOTHING not in m and values[CLUSTER_TOPIC] is not None:  # sidecars sharing usage: the bucket keeps
        values[QUOTA_SMOOTHING] = (
            "on"  # their total at the quota (README "Cluster-wide budgets", bench/cluster_budget.py)
        )
    hold, mute_max = values["producer.id.quota.max.hold.ms"], values["quota.mute.max.ms"]
    upstream = values["upstream.response.timeout.ms"]
    if "producer.id.quota.max.hold.ms" not in m:  # the default, within a lower mute cap or upstream timeout
        values["producer.id.quota.max.hold.ms"] = min(DEFAULT_MAX_HOLD_MS, mute_max, upstream // 2)
    elif hold > mute_max:
        raise ConfigError(
            join(path, "producer.id.quota.max.hold.ms"),
            f"must be at most quota.mute.max.ms ({mute_max}): a refused Produce's retry is muted for "
            f"quota.mute.max.ms less the hold, so mute and hold together stay under clients' request "
            f"timeouts; got {hold}",
        )
    elif hold >= upstream:
        raise ConfigError(
            join(path, "producer.id.quota.max.hold.ms"),
            f"must be below upstream.response.timeout.ms ({upstream}): a held Produce counts as waiting "
            f"for the broker's answer; got {hold}",
        )
    return Settings.from_keys(values)


# settings whose value is one of a few words: the words, in the order an error lists them
_CHOICES = {
    QUOTA_MODE: QUOTA_MODES,
    QUOTA_SCOPE: SCOPES,
    SPLICE: SPLICE_MODES,
    PRODUCER_ID_ENFORCEMENT: ENFORCEMENTS,
}


def _setting(values: dict[str, Any], name: str, value: Any, key: str, listener_names: Set[str]) -> None:
    """One ``settings:`` key checked into ``values``; a ConfigError naming it otherwise."""
    if name in (CLUSTER_TOPIC, CLUSTER_ID) and value is None:  # unset (as a re-parsed effective config has it)
        return
    if name == CLUSTER_TOPIC:
        if not isinstance(value, str) or not _TOPIC_NAME.match(value) or value in (".", ".."):
            raise ConfigError(key, f"expected a Kafka topic name (1-249 of A-Z a-z 0-9 . _ -), got {show(value)}")
        values[name] = value
        return
    if name == CLUSTER_ID:
        if not isinstance(value, str) or not value.strip() or len(value) > 255:
            raise ConfigError(
                key,
                f"expected a non-empty name of at most 255 characters, unique among the sidecars, got {show(value)}",
            )
        values[name] = value
        return
    if name == IP_OVERRIDES:
        values[name] = _ip_overrides(value, key)
        return
    if name == REQUEST_RATE_APIS:
        values[name] = parse_request_rate_apis(value, key)
        return
    choices = _CHOICES.get(name)
    if choices is not None:
        if name == SPLICE and value is False:  # YAML 1.1 reads a bare off as false
            value = "off"
        if value not in choices:
            raise ConfigError(key, f"expected {' or '.join(choices)}, got {show(value)}")
        values[name] = value
        return
    if name == QUOTA_SMOOTHING:
        values[name] = _smoothing(value, key)
        return
    match = _LISTENER_SETTING.match(name)
    if match:
        if match.group(1) not in listener_names:
            raise ConfigError(
                key, f"no listener named {match.group(1)!r} (listeners: {', '.join(sorted(listener_names))})"
            )
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


def _smoothing(raw: Any, path: str) -> str:
    """``quota.smoothing``: ``off`` or ``on`` (a YAML boolean, as YAML reads a bare on/off, means the same)."""
    if isinstance(raw, bool):
        return "on" if raw else "off"
    if isinstance(raw, str) and raw.strip().lower() in SMOOTHING_VALUES:
        return raw.strip().lower()
    raise ConfigError(path, f"expected off or on, got {show(raw)}")


def _ip_overrides(raw: Any, path: str) -> Mapping[str, int]:
    """``max.connections.per.ip.overrides``: Kafka's ``"<ip>:<count>,<ip>:<count>"``, or a YAML mapping."""
    pairs: list[tuple[Any, Any]] = []
    if isinstance(raw, str):
        for part in filter(None, (p.strip() for p in raw.split(","))):
            ip, sep, written = part.rpartition(":")
            if not sep:
                raise ConfigError(path, f"expected <ip>:<count>, got {part!r}")
            pairs.append((ip, written))
    elif isinstance(raw, Mapping):  # a YAML mapping, or (an update laid over it) the value parsed before
        pairs = list(raw.items())
    else:
        raise ConfigError(path, f'expected "<ip>:<count>,..." or a mapping of IP to count, got {show(raw)}')
    out: dict[str, int] = {}
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
    return MappingProxyType(out)


def connection_limits(
    settings: Settings, listeners: tuple[ListenerConfig, ...], ip_rates: Mapping[str, float]
) -> ConnectionLimits:
    """The connection limits (KIP-612, KIP-402) from settings, listeners and the ``{ip: ...}`` quotas."""
    unlimited = 2**31 - 1

    def limit(value: int) -> int | None:
        return None if value == unlimited else value

    rate = settings.max_connection_creation_rate
    return ConnectionLimits(
        max_connection_creation_rate=math.inf if rate == unlimited else float(rate),
        listener_creation_rates=MappingProxyType(
            {name: float(v) for name, v in settings.listener_max_connection_creation_rate.items()}
        ),
        max_connections=limit(settings.max_connections),
        listener_max_connections=MappingProxyType(dict(settings.listener_max_connections)),
        max_connections_per_ip=limit(settings.max_connections_per_ip),
        max_connections_per_ip_overrides=MappingProxyType(dict(settings.max_connections_per_ip_overrides)),
        ip_rates=MappingProxyType(ip_rates),
        internal_listener=next((lc.name for lc in listeners if lc.internal), None),
    )


def _num(value: float) -> str:
    return str(int(value)) if value == int(value) else str(value)


DEFAULT_SETTINGS = parse_settings({}, "settings")  # every setting at its default, typed, for defaults elsewhere
