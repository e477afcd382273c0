"""Dynamic configuration: entries from the compacted config topic, laid over the YAML configuration.

YAML stays the base; the config topic (``dynamic_config.topic``, default ``__kafka_quota_proxy_configs``) overrides
it, as dynamic configs override ``server.properties`` in Kafka. One record per entity:

- key: the entity as canonical JSON (sorted keys, no spaces): ``{"user":"alice"}``, ``{"client-id":"etl"}``,
  ``{"client-id":"etl","user":"alice"}``, ``{"ip":"10.0.0.7"}``, ``{"topic":"orders"}``,
  ``{"partition":"3","topic":"orders"}``, ``{"group":"payments"}``, each name possibly ``<default>`` (a partition's
  topic named); or
  ``{"proxy":"settings"}`` for proxy-wide settings;
- value: a JSON object of quota keys (``{"producer_byte_rate": 1048576}``) and optionally ``"mode": "shadow"`` or
  ``"enforce"``; for the proxy-wide record, dynamic settings (:data:`DYNAMIC_SETTINGS`); a tombstone (null value)
  removes the entry.

A record's keys replace that entity's dynamic keys whole (the ``configs`` CLI writes the merged result); per key,
dynamic wins over YAML. Everything here is pure: a record is checked on its own (:func:`check_record`, against the
YAML's item for the same entity only), :class:`DynamicEntries` holds the entries in force, and :func:`effective`
builds the configuration every manager then reads from scratch; :mod:`config.dynamic_state` changes it record by
record in work linear in what changed.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from config.errors import ConfigError
from config.model import ProxyConfig
from config.quota_groups import parse_client_quotas
from config.quotas import parse_quota_item
from config.request_rate import parse_group_item, parse_group_quotas
from config.topic_quotas import check_partition, check_topic_name, parse_topic_item, parse_topic_quotas
from config.typed_settings import Settings
from quota.managers.connection import IP, normalize_ip
from quota.primitives.chunked import REMOVED, ChunkedMap
from quota.primitives.entity import CLIENT_ID, DEFAULT, USER, QuotaEntity, QuotaEntry
from quota.primitives.group_quotas import GROUP, GroupEntity
from quota.primitives.quota_groups import QUOTA_GROUP
from quota.primitives.topic_quotas import PARTITION, TOPIC, PartitionEntity, TableKey, TopicEntity

DEFAULT_TOPIC = "__kafka_quota_proxy_configs"
PROXY_KEY = {"proxy": "settings"}
ENTITY_TYPES = (USER, CLIENT_ID, IP, TOPIC, PARTITION, GROUP)
MODES = ("enforce", "shadow")
# Proxy-wide settings a dynamic record may change (the rest need a restart, as Kafka's static configs do).
Record = tuple[bytes, "bytes | None"]  # one record of the topic: the entity's key, its JSON value (None: a tombstone)

DYNAMIC_SETTINGS = (
    "max.connection.creation.rate",
    "max.connections",
    "max.connections.per.ip",
    "max.connections.per.ip.overrides",
    "quota.mode",
    "quota.smoothing",
)


class RecordError(ValueError):
    """A config-topic record that cannot be used; the message names the key and the reason."""


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"))


def entity_key(entity: Mapping[str, str]) -> bytes:
    """The record key of an entity: canonical JSON, so every writer produces the same bytes (compaction keys); a
    partition's index as a string, as Kafka's entity names are (the YAML may write it as a number)."""
    canonical = dict(entity)
    index = canonical.get(PARTITION)
    if isinstance(index, int) and not isinstance(index, bool):
        canonical[PARTITION] = str(index)
    return _CANONICAL.encode(canonical).encode()


def parse_key(key: bytes | None) -> dict[str, str]:
    if key is None:
        raise RecordError("a record without a key")
    try:
        entity = json.loads(key.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise RecordError(f"key {key[:100]!r} is not JSON") from None
    if entity == PROXY_KEY:
        return dict(PROXY_KEY)
    if not isinstance(entity, dict) or not entity:
        raise RecordError(f"key {key[:100]!r}: expected an entity object")
    for part, name in entity.items():
        if part == QUOTA_GROUP:
            raise RecordError(
                f"key {key[:100]!r}: a {QUOTA_GROUP} is configured in the YAML only (its members are a list, which "
                "Kafka's entity model cannot name); the config topic may set its members' own entries"
            )
        if part not in ENTITY_TYPES:
            raise RecordError(f"key {key[:100]!r}: unknown entity type {part!r} (known: {', '.join(ENTITY_TYPES)})")
        if not isinstance(name, str) or not name:
            raise RecordError(f'key {key[:100]!r}: {part} must be a name or "{DEFAULT}"')
    if PARTITION in entity and TOPIC not in entity:
        raise RecordError(f"key {key[:100]!r}: a partition entity names its topic too")
    if TOPIC in entity:
        if len(entity) > (2 if PARTITION in entity else 1):
            raise RecordError(f"key {key[:100]!r}: a topic entity cannot be combined with user, client-id or ip")
        try:
            check_topic_name(entity[TOPIC], "entity.topic")
            if PARTITION in entity:
                entity[PARTITION] = check_partition(entity[PARTITION], entity[TOPIC], "entity.partition")
        except ConfigError as exc:
            raise RecordError(f"key {key[:100]!r}: {exc}") from None
    if GROUP in entity and len(entity) > 1:
        raise RecordError(f"key {key[:100]!r}: a group entity cannot be combined with user, client-id, ip or topic")
    if IP in entity:
        if len(entity) > 1:
            raise RecordError(f"key {key[:100]!r}: an ip entity cannot be combined with user or client-id")
        if entity[IP] != DEFAULT:
            try:
                entity[IP] = normalize_ip(entity[IP])
            except ValueError:
                raise RecordError(f"key {key[:100]!r}: {entity[IP]!r} is not an IP address") from None
    return entity


@dataclass(frozen=True, slots=True)
class Checked:
    """One record checked on its own, against the YAML's item for the same entity (nothing else can make it bad):
    the entity's dynamic keys (None: a tombstone) and what it then gives: a user/client-id entity's entry
    (``quota``: None when neither the YAML nor the topic configures it any more), an IP's
    ``connection_creation_rate`` (``ip_rate``), a topic's entry (``topic``, and ``topic_quota``: None when
    nothing configures it any more), a group's (``group``, ``group_quota``), or the proxy-wide ``settings``."""

    canonical: bytes
    entity: dict
    values: dict | None
    quota_entity: QuotaEntity | None = None
    quota: QuotaEntry | None = None
    ip: str | None = None
    ip_rate: float | None = None
    settings: Settings | None = None
    topic: TableKey | None = None  # a topic's name, or (topic, partition)
    topic_quota: QuotaEntry | None = None
    group: str | None = None
    group_quota: QuotaEntry | None = None


class _YamlItems:
    """The YAML's quota items by entity key, made once per configuration (the last few kept)."""

    def __init__(self) -> None:
        self._made: list[tuple[tuple, dict[bytes, dict]]] = []

    def of(self, base: ProxyConfig) -> dict[bytes, dict]:
        for raw, items in self._made:
            if raw is base.raw_quotas:
                return items
        items = {entity_key(item["entity"]): item for item in base.raw_quotas}
        self._made = [(base.raw_quotas, items)] + self._made[:3]
        return items


YAML_ITEMS = _YamlItems()


def check_record(base: ProxyConfig, key: bytes | None, value: bytes | None) -> Checked:
    """A record of the config topic checked on its own (work independent of how many entries there are); raises
    :class:`RecordError` naming the key and the reason."""
    from config.settings import parse_settings

    entity = parse_key(key)
    canonical = entity_key(entity)
    values = None
    if value is not None:
        try:
            values = json.loads(value.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise RecordError(f"{canonical.decode()}: value is not JSON") from None
        if not isinstance(values, dict):
            raise RecordError(f"{canonical.decode()}: expected a JSON object of quota keys, got {str(values)[:100]}")
    try:
        if entity == PROXY_KEY:
            if not values:
                return Checked(canonical, entity, values, settings=base.settings)
            unknown = [k for k in values if k not in DYNAMIC_SETTINGS]
            if unknown:
                raise ConfigError(
                    f"proxy settings.{unknown[0]}", f"not a dynamic setting (dynamic: {', '.join(DYNAMIC_SETTINGS)})"
                )
            settings = parse_settings(
                {**base.settings.values, **values}, "proxy settings", {lc.name for lc in base.listeners}
            )
            return Checked(canonical, entity, values, settings=settings)
        item = YAML_ITEMS.of(base).get(canonical)
        if TOPIC in entity:
            return _topic_checked(base, canonical, entity, values, item)
        if GROUP in entity:
            group_entry = None
            if values is not None or item is not None:
                group_entry = parse_group_item({**(item or {"entity": dict(entity)}), **(values or {})}, "quotas")
            return Checked(canonical, entity, values, group=entity[GROUP], group_quota=group_entry)
        parsed = None
        if values is not None or item is not None:
            parsed = parse_quota_item({**(item or {"entity": dict(entity)}), **(values or {})}, "quotas")
    except ConfigError as exc:
        raise RecordError(f"{canonical.decode()}: {exc}") from None
    if IP in entity:  # parsed: (ip, connection_creation_rate), or None for a tombstone
        return Checked(
            canonical, entity, values, ip=entity[IP], ip_rate=parsed[1] if isinstance(parsed, tuple) else None
        )
    quota = parsed if isinstance(parsed, QuotaEntry) else None
    return Checked(
        canonical,
        entity,
        values,
        quota_entity=quota.entity if quota is not None else QuotaEntity.from_dict(entity),
        quota=quota,
    )


def _topic_checked(
    base: ProxyConfig, canonical: bytes, entity: dict, values: dict | None, item: dict | None
) -> Checked:
    """A topic entity's record, its values laid over the YAML's item for the same topic (raises ConfigError)."""
    entry = None
    if values is not None or item is not None:
        entry = parse_topic_item({**(item or {"entity": dict(entity)}), **(values or {})}, "quotas")
    key: TableKey = (entity[TOPIC], entity[PARTITION]) if PARTITION in entity else entity[TOPIC]
    return Checked(canonical, entity, values, topic=key, topic_quota=entry)


@dataclass(frozen=True, slots=True)
class DynamicEntries:
    """The config topic's live entries: entity key bytes -> (entity, values)."""

    entries: Mapping[bytes, tuple[dict, dict]] = field(default_factory=ChunkedMap)

    def with_record(self, base: ProxyConfig, key: bytes | None, value: bytes | None) -> DynamicEntries:
        """These entries with one record applied; raises :class:`RecordError` (and changes nothing) for a record
        that cannot be used. Work independent of the number of entries."""
        return self.with_checked([check_record(base, key, value)])

    def with_checked(self, records: list[Checked]) -> DynamicEntries:
        """These entries with records already checked applied, in order."""
        entries = self.entries if isinstance(self.entries, ChunkedMap) else ChunkedMap(self.entries)
        return DynamicEntries(
            entries.updated({c.canonical: REMOVED if c.values is None else (c.entity, c.values) for c in records})
        )


def effective(base: ProxyConfig, dynamic: DynamicEntries) -> ProxyConfig:
    """The YAML configuration with the dynamic entries laid over it: per entity and key, dynamic wins. Built whole
    (linear in the number of entries; :mod:`config.dynamic_state` changes it by what changed). Raises ConfigError
    naming the key for anything the YAML loader would reject."""
    from config.settings import connection_limits, parse_settings

    items: dict[bytes, dict] = {}
    for item in base.raw_quotas:
        entry = dict(item)
        items[entity_key(entry["entity"])] = entry
    settings_overlay: dict[str, Any] = {}
    for canonical, (entity, values) in dynamic.entries.items():
        if entity == PROXY_KEY:
            unknown = [k for k in values if k not in DYNAMIC_SETTINGS]
            if unknown:
                raise ConfigError(
                    f"proxy settings.{unknown[0]}", f"not a dynamic setting (dynamic: {', '.join(DYNAMIC_SETTINGS)})"
                )
            settings_overlay.update(values)
            continue
        entry = items.get(canonical, {"entity": dict(entity)})
        items[canonical] = {**entry, **values}
    raw = list(items.values())
    quotas, ip_rates = parse_client_quotas(raw, "quotas (YAML and dynamic)")
    topic_quotas = parse_topic_quotas(raw, "quotas (YAML and dynamic)")
    group_quotas = parse_group_quotas(raw, "quotas (YAML and dynamic)")
    settings = base.settings
    if settings_overlay:
        merged = {**{k: v for k, v in settings.values.items()}, **settings_overlay}
        settings = parse_settings(merged, "proxy settings", {lc.name for lc in base.listeners})
    return dataclasses.replace(
        base,
        quotas=quotas,
        settings=settings,
        connections=connection_limits(settings, base.listeners, ip_rates),
        topic_quotas=topic_quotas,
        group_quotas=group_quotas,
    )


def describe(config: ProxyConfig) -> list[tuple[dict, dict]]:
    """Every configured quota entity with its effective keys, as DescribeClientQuotas and ``configs --describe``
    show them: [(entity, {key: value})]."""
    out = []
    for entry in config.quotas.entries:
        entity = {}
        if entry.entity.user is not None:
            entity[USER] = entry.entity.user
        if entry.entity.client_id is not None:
            entity[CLIENT_ID] = entry.entity.client_id
        out.append((entity, {k: v for k, v in entry.quotas.items() if not math.isinf(v)}))
    for ip, rate in config.connections.ip_rates.items():
        out.append(({IP: ip}, {"connection_creation_rate": rate}))
    for topic_entry in config.topic_quotas.entries:
        named = topic_entry.entity
        if isinstance(named, TopicEntity):
            out.append(({TOPIC: named.topic}, dict(topic_entry.quotas)))
        elif isinstance(named, PartitionEntity):
            out.append(({TOPIC: named.topic, PARTITION: named.partition}, dict(topic_entry.quotas)))
    for group_entry in config.group_quotas.entries:
        if isinstance(group_entry.entity, GroupEntity):
            out.append(({GROUP: group_entry.entity.group}, dict(group_entry.quotas)))
    return out
