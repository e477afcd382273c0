"""The ``quotas:`` section's topic entities: a byte rate per topic, whoever writes or reads it.

```yaml
quotas:
  - entity: {topic: orders}             # this topic's own quota
    producer_byte_rate: 10485760
    consumer_byte_rate: 20971520
  - entity: {topic: "<default>"}        # every other topic, each on its own
    producer_byte_rate: 1048576
```

A partition entity names a topic and a partition (``{topic: orders, partition: 3}``, or ``partition: <default>``
for each partition of the topic on its own) and takes the same keys.

A topic entity stands alone (no user, client-id or ip beside it; a partition only) and takes ``producer_byte_rate`` and
``consumer_byte_rate`` (and ``mode``, and ``on_exceed``: ``throttle``, the default, or ``reject``: over its
``producer_byte_rate`` a Produce's partitions of the topic are refused with a retriable error instead). The config topic and AlterClientQuotas name them as ``{"topic": NAME}``
and ``{"partition": "3", "topic": NAME}`` (:mod:`config.dynamic`).
"""

from __future__ import annotations

import math
import re
from typing import Any

from config.errors import ConfigError
from config.quotas import MIN_RATE, check_alone, is_topic_item, named_entries
from quota.primitives.entity import DEFAULT, PRODUCER_BYTE_RATE, QuotaEntry
from quota.primitives.topic_quotas import (
    PARTITION,
    TOPIC,
    TOPIC_KEYS,
    PartitionEntity,
    TopicEntity,
    TopicQuotaEntry,
    TopicQuotaTable,
)

ON_EXCEED, THROTTLE, REJECT = "on_exceed", "throttle", "reject"
_LEGAL = re.compile(r"[a-zA-Z0-9._-]{1,249}")  # Kafka's topic names (Topic.validate)
_MAX_PARTITION = 2**31 - 1  # a partition's index is an int32


def parse_topic_quotas(raw: Any, path: str) -> TopicQuotaTable:
    """The topic entries of the ``quotas:`` list (the other items are config.quotas's), every error reported."""
    if not isinstance(raw, list):
        return TopicQuotaTable()  # config.quotas reports it
    return TopicQuotaTable(named_entries(raw, path, TOPIC, is_topic_item, parse_topic_item))


def check_topic_name(name: Any, where: str) -> None:
    """A topic entity's name: a legal Kafka topic name or ``<default>``."""
    if not isinstance(name, str) or (name != DEFAULT and not _LEGAL.fullmatch(name)):
        raise ConfigError(
            where, f'expected a topic name (letters, digits, ".", "_", "-"; at most 249) or "{DEFAULT}", got {name!r}'
        )


def check_partition(partition: Any, topic: Any, where: str) -> str:
    """A partition entity's partition: its index (an int, or its decimal string as Kafka's entity names are
    strings), or ``<default>``; its topic named (``<default>`` is not one). Returns it as a string."""
    if topic == DEFAULT:
        raise ConfigError(
            where.removesuffix(PARTITION) + TOPIC,
            f"a {PARTITION} entity names its topic ({DEFAULT} is not one: set {{topic: {DEFAULT}}} for every topic)",
        )
    if partition == DEFAULT:
        return DEFAULT
    if isinstance(partition, str) and partition.isascii() and partition.isdigit() and partition == str(int(partition)):
        partition = int(partition)
    if isinstance(partition, bool) or not isinstance(partition, int) or not 0 <= partition <= _MAX_PARTITION:
        raise ConfigError(
            where, f'expected a partition index (0 to {_MAX_PARTITION}) or "{DEFAULT}", got {partition!r}'
        )
    return str(partition)


def parse_topic_item(item: dict, where: str) -> QuotaEntry:
    """One ``{topic: ...}`` or ``{topic: ..., partition: ...}`` item."""
    entity = item["entity"]
    alone = {k: v for k, v in entity.items() if k != PARTITION}
    check_alone(alone, TOPIC, where, f"a {TOPIC} entity", ": a topic quota counts every client's bytes")
    name = entity[TOPIC]
    check_topic_name(name, f"{where}.entity.{TOPIC}")
    quota_entity: TopicEntity | PartitionEntity = TopicEntity.of(name)
    if PARTITION in entity:
        partition = check_partition(entity[PARTITION], name, f"{where}.entity.{PARTITION}")
        quota_entity = PartitionEntity.of(name, partition)
    mode = item.get("mode", "enforce")
    if mode not in ("enforce", "shadow"):
        raise ConfigError(f"{where}.mode", f"expected enforce or shadow, got {mode!r}")
    on_exceed = item.get(ON_EXCEED, THROTTLE)
    if on_exceed not in (THROTTLE, REJECT):
        raise ConfigError(f"{where}.{ON_EXCEED}", f"expected {THROTTLE} or {REJECT}, got {on_exceed!r}")
    quotas: dict[str, float] = {}
    for key, value in item.items():
        if key in ("entity", "mode", ON_EXCEED):
            continue
        if key not in TOPIC_KEYS:
            raise ConfigError(f"{where}.{key}", f"not a key of {TOPIC} entities (known: {', '.join(TOPIC_KEYS)})")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not MIN_RATE <= value < math.inf:
            raise ConfigError(
                f"{where}.{key}",
                f"expected a rate in bytes per second > 0 (finite, at least {MIN_RATE:g}), got {value!r}",
            )
        quotas[key] = value
    if not quotas:
        kind = PARTITION if PARTITION in entity else TOPIC
        raise ConfigError(where, f"no quota key given (a {kind} entity takes {', '.join(TOPIC_KEYS)})")
    if on_exceed == REJECT and PRODUCER_BYTE_RATE not in quotas:
        raise ConfigError(
            f"{where}.{ON_EXCEED}",
            f"{REJECT} refuses writes over producer_byte_rate, which this entry does not set (reads are throttled)",
        )
    return TopicQuotaEntry(quota_entity, quotas, mode == "shadow", on_exceed == REJECT)
