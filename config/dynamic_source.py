"""The ``dynamic_config:`` section: where the proxy reads (and, for AlterClientQuotas, writes) dynamic entries.

```yaml
dynamic_config:
  enabled: true                         # the default, as Kafka's dynamic quotas are always on
  topic: __kafka_quota_proxy_configs    # compacted; created if missing
  max_entries: 1000000                  # entries in force at most; a record adding one more is skipped
  max_key_bytes: 1024                   # a record with a longer key is skipped unread
  max_value_bytes: 65536                # a record with a longer value is skipped unread
```

Without the section the default topic is followed; ``enabled: false`` alone turns it off (YAML alone applies and the
client-quota APIs go to the broker). The bounds keep what a writer to the topic can make the proxy hold and parse:
a record past them is counted (``dynamic_config_records_skipped_total{reason}``), logged once per key, and skipped;
the entries in force stay.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from config.errors import ConfigError

DEFAULT_TOPIC = "__kafka_quota_proxy_configs"
KEYS = ("enabled", "topic", "max_entries", "max_key_bytes", "max_value_bytes")
# (smallest, largest) of each bound: a key holds an entity of two names; a value, a settings record with its
# per-IP overrides
BOUNDS = {"max_entries": (1, 100_000_000), "max_key_bytes": (64, 1_048_576), "max_value_bytes": (256, 16_777_216)}


@dataclass(frozen=True, slots=True)
class DynamicConfigSource:
    topic: str = DEFAULT_TOPIC
    max_entries: int = 1_000_000
    max_key_bytes: int = 1024
    max_value_bytes: int = 65_536


def parse_dynamic_config(raw: Any, path: str) -> DynamicConfigSource | None:
    """The section's source; None only for ``enabled: false``."""
    if raw is None or raw is True or raw == {}:
        return DynamicConfigSource()
    if not isinstance(raw, dict):
        raise ConfigError(path, f"expected a mapping ({', '.join(KEYS)}), got {type(raw).__name__}")
    for key in raw:
        if key not in KEYS:
            raise ConfigError(f"{path}.{key}", f"unknown key (known keys: {', '.join(KEYS)})")
    enabled = raw.get("enabled", True)
    if not isinstance(enabled, bool):
        raise ConfigError(f"{path}.enabled", f"expected true or false, got {enabled!r}")
    topic = raw.get("topic", DEFAULT_TOPIC)
    if not isinstance(topic, str) or not topic or len(topic) > 249:
        raise ConfigError(f"{path}.topic", f"expected a topic name, got {topic!r}")
    bounds, defaults = {}, DynamicConfigSource()
    for key, (smallest, largest) in BOUNDS.items():
        value = raw.get(key, getattr(defaults, key))
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{path}.{key}", f"expected an integer, got {value!r}")
        if not smallest <= value <= largest:
            raise ConfigError(f"{path}.{key}", f"must be between {smallest} and {largest}, got {value}")
        bounds[key] = value
    return DynamicConfigSource(topic, **bounds) if enabled else None
