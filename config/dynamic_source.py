"""The ``dynamic_config:`` section: where the proxy reads (and, for AlterClientQuotas, writes) dynamic entries.

```yaml
dynamic_config:
  enabled: true                         # the default, as Kafka's dynamic quotas are always on
  topic: __kafka_quota_proxy_configs    # compacted; created if missing
```

Without the section the default topic is followed; ``enabled: false`` alone turns it off (YAML alone applies and the
client-quota APIs go to the broker).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from config.errors import ConfigError

DEFAULT_TOPIC = "__kafka_quota_proxy_configs"


@dataclass(frozen=True, slots=True)
class DynamicConfigSource:
    topic: str = DEFAULT_TOPIC


def parse_dynamic_config(raw: Any, path: str) -> DynamicConfigSource | None:
    """The section's source; None only for ``enabled: false``."""
    if raw is None or raw is True or raw == {}:
        return DynamicConfigSource()
    if not isinstance(raw, dict):
        raise ConfigError(path, f"expected a mapping (enabled: BOOL, topic: NAME), got {type(raw).__name__}")
    for key in raw:
        if key not in ("enabled", "topic"):
            raise ConfigError(f"{path}.{key}", "unknown key (known keys: enabled, topic)")
    enabled = raw.get("enabled", True)
    if not isinstance(enabled, bool):
        raise ConfigError(f"{path}.enabled", f"expected true or false, got {enabled!r}")
    topic = raw.get("topic", DEFAULT_TOPIC)
    if not isinstance(topic, str) or not topic or len(topic) > 249:
        raise ConfigError(f"{path}.topic", f"expected a topic name, got {topic!r}")
    return DynamicConfigSource(topic) if enabled else None
