"""The ``quotas:`` section: Kafka client-quota entities and keys, as ``kafka-configs`` uses them.

```yaml
quotas:
  - entity: {user: "<default>"}
    producer_byte_rate: 1048576
  - entity: {user: alice, client-id: etl}
    consumer_byte_rate: 4194304
  - entity: {ip: "<default>"}         # KIP-612: per source IP, not combined with user or client-id
    connection_creation_rate: 10
```
"""

from __future__ import annotations

import math
from collections.abc import Callable
from difflib import get_close_matches
from typing import Any

from config.errors import ConfigError, collecting, raise_all
from quota.managers.connection import CONNECTION_CREATION_RATE, IP, normalize_ip
from quota.primitives.entity import (
    CLIENT_ID,
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    DEFAULT,
    PRODUCER_BYTE_RATE,
    PRODUCER_IDS_RATE,
    REQUEST_PERCENTAGE,
    REQUEST_RATE,
    USER,
    QuotaEntity,
    QuotaEntry,
)
from quota.primitives.group_quotas import GROUP
from quota.primitives.quota_groups import QUOTA_GROUP
from quota.primitives.quota_table import QuotaTable
from quota.primitives.topic_quotas import TOPIC

# Keys the proxy enforces on user/client-id entities (and connection_creation_rate on ip entities).
ENFORCED_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, CONTROLLER_MUTATION_RATE, PRODUCER_IDS_RATE, REQUEST_RATE)
# Kafka's client-quota keys the brokers enforce and the proxy does not (KIP-124: a proxy cannot measure a broker's
# request-handler time): AlterClientQuotas through the proxy passes them on to the broker, DescribeClientQuotas
# shows the broker's values; they have no place in the proxy's own configuration.
BROKER_KEYS = (REQUEST_PERCENTAGE,)
MIN_RATE = 0.001  # below this a quota means "nothing at all" with throttles of days: say so instead
UNITS = {
    PRODUCER_BYTE_RATE: "bytes per second",
    CONSUMER_BYTE_RATE: "bytes per second",
    CONTROLLER_MUTATION_RATE: "partition mutations per second",
    PRODUCER_IDS_RATE: "new producer ids per producer.id.quota.window.size.seconds",
    REQUEST_RATE: "requests per second (of the APIs quota.request.rate.apis lists)",
}


def is_topic_item(item: Any) -> bool:
    """Whether a ``quotas:`` item names a topic entity (parsed by :mod:`config.topic_quotas`, skipped here)."""
    return isinstance(item, dict) and isinstance(item.get("entity"), dict) and TOPIC in item["entity"]


def is_group_item(item: Any) -> bool:
    """Whether a ``quotas:`` item names a group entity (parsed by :mod:`config.request_rate`, skipped here)."""
    return isinstance(item, dict) and isinstance(item.get("entity"), dict) and GROUP in item["entity"]


def is_quota_group_item(item: Any) -> bool:
    """Whether a ``quotas:`` item names a quota group (parsed by :mod:`config.quota_groups`, skipped here)."""
    return isinstance(item, dict) and isinstance(item.get("entity"), dict) and QUOTA_GROUP in item["entity"]


def named_entries(
    raw: list, path: str, kind: str, is_item: Callable[[Any], bool], parse_item: Callable[[dict, str], QuotaEntry]
) -> list[QuotaEntry]:
    """The items of ``raw`` that ``is_item`` takes (an entity of one ``kind`` named alone: a topic, a group), each
    parsed by ``parse_item``; a name given twice is refused; every error reported together."""
    entries: list[QuotaEntry] = []
    errors: list[ConfigError] = []
    seen: set[QuotaEntity] = set()
    for i, item in enumerate(raw):
        if not is_item(item):
            continue
        where = f"{path}[{i}]"
        entry = collecting(errors, parse_item, item, where)
        if entry is None:
            continue
        name = item["entity"][kind] if len(item["entity"]) == 1 else entry.entity.path  # a partition's: its path
        if entry.entity in seen:
            errors.append(ConfigError(f"{where}.entity.{kind}", f"{name} is configured more than once"))
        seen.add(entry.entity)
        entries.append(entry)
    raise_all(errors)
    return entries


def parse_quotas(raw: Any, path: str) -> QuotaTable:
    """The user/client-id entities (see :func:`parse_quota_section` for the IP ones too)."""
    return parse_quota_section(raw, path)[0]


def parse_quota_section(raw: Any, path: str) -> tuple[QuotaTable, dict[str, float]]:
    """The ``quotas:`` list: the user/client-id quota table, and ``{ip or <default>: connection_creation_rate}``
    (its topic entities are :func:`config.topic_quotas.parse_topic_quotas`'s)."""
    if raw is None:
        raw = []
    if not isinstance(raw, list):
        raise ConfigError(path, f"expected a list of quota entries, got {type(raw).__name__}")
    entries = []
    ip_rates: dict[str, float] = {}
    errors: list[ConfigError] = []
    for i, item in enumerate(raw):
        if is_topic_item(item) or is_group_item(item) or is_quota_group_item(item):
            continue
        where = f"{path}[{i}]"
        parsed = collecting(errors, parse_quota_item, item, where)
        if parsed is None:
            continue  # its errors are reported with every other item's
        if isinstance(parsed, QuotaEntry):
            entries.append(parsed)
            continue
        ip, rate = parsed
        if ip in ip_rates:
            errors.append(ConfigError(f"{where}.entity.{IP}", f"{ip} is configured more than once"))
        ip_rates[ip] = rate
    raise_all(errors)
    try:
        return QuotaTable(entries), ip_rates
    except ValueError as exc:
        raise ConfigError(path, str(exc)) from None


def parse_quota_item(item: Any, where: str) -> QuotaEntry | tuple[str, float]:
    """One item of the list: a user/client-id entry, or ``(ip or <default>, connection_creation_rate)``. Checked
    on its own (a dynamic record is checked this way, whatever the number of other entries)."""
    if not isinstance(item, dict):
        raise ConfigError(where, f"expected a mapping with 'entity' and quota keys, got {item!r}")
    if "entity" not in item:
        raise ConfigError(f"{where}.entity", "required key is missing")
    entity = item["entity"]
    if not isinstance(entity, dict) or not entity:
        raise ConfigError(
            f"{where}.entity",
            f"expected a mapping with '{USER}' and/or '{CLIENT_ID}', or '{IP}', '{TOPIC}', '{GROUP}' or "
            f"'{QUOTA_GROUP}', got {entity!r}",
        )
    if IP in entity:
        return _ip_entry(item, entity, where)
    for key, value in entity.items():
        if key not in (USER, CLIENT_ID):
            raise ConfigError(
                f"{where}.entity.{key}",
                f"unknown entity type (known: {USER}, {CLIENT_ID}, {IP}, {TOPIC}, {GROUP}, {QUOTA_GROUP})",
            )
        if not isinstance(value, str) or not value:
            raise ConfigError(f"{where}.entity.{key}", f'expected a name or "<default>", got {value!r}')
    quotas = {}
    mode = item.get("mode", "enforce")
    if mode not in ("enforce", "shadow"):
        raise ConfigError(f"{where}.mode", f"expected enforce or shadow, got {mode!r}")
    for key, value in item.items():
        if key in ("entity", "mode"):
            continue
        if key == CONNECTION_CREATION_RATE:
            raise ConfigError(f"{where}.{key}", f"only for ip entities (KIP-612): use entity {{{IP}: ...}}")
        if key in BROKER_KEYS:
            raise ConfigError(
                f"{where}.{key}",
                "enforced by the brokers, not the proxy: set it with kafka-configs "
                "(AlterClientQuotas) through the proxy, which passes it on, or at the brokers",
            )
        if key not in ENFORCED_KEYS:
            close = get_close_matches(str(key), [*ENFORCED_KEYS, CONNECTION_CREATION_RATE], n=1, cutoff=0.75)
            raise ConfigError(
                f"{where}.{key}",
                f"unknown quota key; did you mean {close[0]}?"
                if close
                else f"unknown quota key (known: {', '.join(ENFORCED_KEYS)}; "
                f"{', '.join(BROKER_KEYS)} is passed on to the brokers)",
            )
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not MIN_RATE <= value < math.inf:
            raise ConfigError(
                f"{where}.{key}", f"expected a rate in {UNITS[key]} > 0 (finite, at least {MIN_RATE:g}), got {value!r}"
            )
        if key == PRODUCER_IDS_RATE and CLIENT_ID in entity:
            raise ConfigError(f"{where}.{key}", "only for user entities (KIP-936): remove client-id or this key")
        quotas[key] = value
    if not quotas:
        raise ConfigError(where, f"no quota key given (known: {', '.join(ENFORCED_KEYS)})")
    try:
        return QuotaEntry(QuotaEntity.from_dict(entity), quotas, mode == "shadow")
    except ValueError as exc:
        raise ConfigError(where, str(exc)) from None


def check_alone(entity: dict, kind: str, where: str, named: str, why: str) -> None:
    """An entity of ``kind`` names nothing else; the error says ``named`` cannot be combined, and ``why``."""
    others = [key for key in entity if key != kind]
    if others:
        raise ConfigError(f"{where}.entity.{others[0]}", f"{named} cannot be combined with {others[0]}{why}")


def _ip_entry(item: dict, entity: dict, where: str) -> tuple[str, float]:
    """An ``{ip: ...}`` entity: an IP address or ``<default>``, alone, with only ``connection_creation_rate``."""
    check_alone(entity, IP, where, f"an {IP} entity", " (KIP-612: IP and user/client-id quotas share no key)")
    name = entity[IP]
    if name != DEFAULT:
        try:
            name = normalize_ip(name) if isinstance(name, str) else None
        except ValueError:
            name = None
        if name is None:
            raise ConfigError(f"{where}.entity.{IP}", f'expected an IP address or "{DEFAULT}", got {entity[IP]!r}')
    if "mode" in item:
        raise ConfigError(f"{where}.mode", "ip entities have no shadow mode (connection limits are enforced)")
    keys = [key for key in item if key != "entity"]
    if keys != [CONNECTION_CREATION_RATE]:
        wrong = next((key for key in keys if key != CONNECTION_CREATION_RATE), None)
        if wrong is None:
            raise ConfigError(where, f"no quota key given (an {IP} entity takes {CONNECTION_CREATION_RATE})")
        raise ConfigError(f"{where}.{wrong}", f"not a key of {IP} entities (known: {CONNECTION_CREATION_RATE})")
    value = item[CONNECTION_CREATION_RATE]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not MIN_RATE <= value < math.inf:
        raise ConfigError(
            f"{where}.{CONNECTION_CREATION_RATE}",
            f"expected a rate in connections per second > 0 (finite, at least {MIN_RATE:g}), got {value!r}",
        )
    return name, float(value)
