"""The ``dynamic_config:`` section: where the proxy reads (and, for AlterClientQuotas, writes) dynamic entries.

```yaml
dynamic_config:
  topic: __kafka_quota_proxy_configs    # compacted; created if missing
```
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
    if raw is None:
        return None
    if raw is True or raw == {}:
        return DynamicConfigSource()
    if not isinstance(raw, dict):
        raise ConfigError(path, f"expected a mapping (topic: NAME), got {type(raw).__name__}")
    for key in raw:
        if key != "topic":
            raise ConfigError(f"{path}.{key}", "unknown key (known keys: topic)")
    topic = raw.get("topic", DEFAULT_TOPIC)
    if not isinstance(topic, str) or not topic or len(topic) > 249:
        raise ConfigError(f"{path}.topic", f"expected a topic name, got {topic!r}")
    return DynamicConfigSource(topic)
