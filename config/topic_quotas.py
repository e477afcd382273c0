"""The ``quotas:`` section's topic entities: a byte rate per topic, whoever writes or reads it.

```yaml
quotas:
  - entity: {topic: orders}             # this topic's own quota
    producer_byte_rate: 10485760
    consumer_byte_rate: 20971520
  - entity: {topic: "<default>"}        # every other topic, each on its own
    producer_byte_rate: 1048576
```

A topic entity stands alone (no user, client-id or ip beside it) and takes ``producer_byte_rate`` and
``consumer_byte_rate`` (and ``mode``, and ``on_exceed``: ``throttle``, the default, or ``reject``: over its
``producer_byte_rate`` a Produce's partitions of the topic are refused with a retriable error instead). The config topic and AlterClientQuotas name them as ``{"topic": NAME}``
(:mod:`config.dynamic`).
"""

from __future__ import annotations

import math
import re
from typing import Any

from config.errors import ConfigError
from config.quotas import MIN_RATE, check_alone, is_topic_item, named_entries
from quota.primitives.entity import DEFAULT, PRODUCER_BYTE_RATE, QuotaEntry
from quota.primitives.topic_quotas import TOPIC, TOPIC_KEYS, TopicEntity, TopicQuotaEntry, TopicQuotaTable

ON_EXCEED, THROTTLE, REJECT = "on_exceed", "throttle", "reject"
_LEGAL = re.compile(r"[a-zA-Z0-9._-]{1,249}")  # Kafka's topic names (Topic.validate)


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


def parse_topic_item(item: dict, where: str) -> QuotaEntry:
    """One ``{topic: ...}`` item."""
    entity = item["entity"]
    check_alone(entity, TOPIC, where, f"a {TOPIC} entity", ": a topic quota counts every client's bytes")
    name = entity[TOPIC]
    check_topic_name(name, f"{where}.entity.{TOPIC}")
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
        raise ConfigError(where, f"no quota key given (a {TOPIC} entity takes {', '.join(TOPIC_KEYS)})")
    if on_exceed == REJECT and PRODUCER_BYTE_RATE not in quotas:
        raise ConfigError(
            f"{where}.{ON_EXCEED}",
            f"{REJECT} refuses writes over producer_byte_rate, which this entry does not set (reads are throttled)",
        )
    return TopicQuotaEntry(TopicEntity.of(name), quotas, mode == "shadow", on_exceed == REJECT)
