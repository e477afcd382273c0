"""The ``quotas:`` section: Kafka client-quota entities and keys, as ``kafka-configs`` uses them.

```yaml
quotas:
  - entity: {user: "<default>"}
    producer_byte_rate: 1048576
  - entity: {user: alice, client-id: etl}
    consumer_byte_rate: 4194304
```
"""

from __future__ import annotations

import math
from typing import Any

from config.errors import ConfigError
from quota.entity import (CLIENT_ID, CONSUMER_BYTE_RATE, CONTROLLER_MUTATION_RATE, PRODUCER_BYTE_RATE, PRODUCER_IDS_RATE,
                          USER, QuotaTable)

# Keys this version enforces. Kafka's other client-quota key (request_percentage) is rejected rather than accepted
# and silently ignored.
ENFORCED_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, CONTROLLER_MUTATION_RATE, PRODUCER_IDS_RATE)
MIN_RATE = 0.001  # below this a quota means "nothing at all" with throttles of days: say so instead
UNITS = {PRODUCER_BYTE_RATE: "bytes per second", CONSUMER_BYTE_RATE: "bytes per second",
         CONTROLLER_MUTATION_RATE: "partition mutations per second",
         PRODUCER_IDS_RATE: "new producer ids per producer.id.quota.window.size.seconds"}


def parse_quotas(raw: Any, path: str) -> QuotaTable:
    if raw is None:
        raw = []
    if not isinstance(raw, list):
        raise ConfigError(path, f"expected a list of quota entries, got {type(raw).__name__}")
    values = []
    for i, item in enumerate(raw):
        where = f"{path}[{i}]"
        if not isinstance(item, dict):
            raise ConfigError(where, f"expected a mapping with 'entity' and quota keys, got {item!r}")
        if "entity" not in item:
            raise ConfigError(f"{where}.entity", "required key is missing")
        entity = item["entity"]
        if not isinstance(entity, dict) or not entity:
            raise ConfigError(f"{where}.entity", f"expected a mapping with '{USER}' and/or '{CLIENT_ID}', got {entity!r}")
        for key, value in entity.items():
            if key not in (USER, CLIENT_ID):
                raise ConfigError(f"{where}.entity.{key}", f"unknown entity type (known: {USER}, {CLIENT_ID})")
            if not isinstance(value, str) or not value:
                raise ConfigError(f"{where}.entity.{key}", f"expected a name or \"<default>\", got {value!r}")
        quotas = {}
        for key, value in item.items():
            if key == "entity":
                continue
            if key not in ENFORCED_KEYS:
                raise ConfigError(f"{where}.{key}", f"unknown or not yet enforced quota key (known: {', '.join(ENFORCED_KEYS)})")
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not MIN_RATE <= value < math.inf:
                raise ConfigError(f"{where}.{key}", f"expected a rate in {UNITS[key]} > 0 (finite, at least "
                                  f"{MIN_RATE:g}), got {value!r}")
            if key == PRODUCER_IDS_RATE and CLIENT_ID in entity:
                raise ConfigError(f"{where}.{key}", "only for user entities (KIP-936): remove client-id or this key")
            quotas[key] = value
        if not quotas:
            raise ConfigError(where, f"no quota key given (known: {', '.join(ENFORCED_KEYS)})")
        values.append((entity, quotas))
    try:
        return QuotaTable.from_values(values)
    except ValueError as exc:
        raise ConfigError(path, str(exc)) from None
