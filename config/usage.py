"""The ``usage_log:`` section: where and how often the proxy writes its usage log (see :mod:`proxy.ops.usage_log`).

```yaml
usage_log:
  dir: /var/lib/kafka-quota-proxy/usage
  interval_seconds: 10          # one record per entity per interval
  max_file_bytes: 67108864      # a new file past this size...
  max_file_age_seconds: 3600    # ...or this age
  max_files: 100                # the oldest files beyond this many are deleted
```
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from config.errors import ConfigError


@dataclass(frozen=True, slots=True)
class UsageLogConfig:
    dir: str
    interval_seconds: float = 10.0
    max_file_bytes: int = 64 * 2**20
    max_file_age_seconds: int = 3600
    max_files: int = 100
    file_tag: str = ""  # not from YAML: a worker's ``.w<index>`` (settings.workers), so workers never share a file


LIMITS = {
    "interval_seconds": (0.1, 86400, float),
    "max_file_bytes": (4096, 2**40, int),
    "max_file_age_seconds": (1, 2**31 - 1, int),
    "max_files": (1, 1_000_000, int),
}


def parse_usage_log(raw: Any, path: str) -> UsageLogConfig | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ConfigError(path, f"expected a mapping with 'dir', got {type(raw).__name__}")
    for key in raw:
        if key != "dir" and key not in LIMITS:
            raise ConfigError(f"{path}.{key}", f"unknown key (known keys: dir, {', '.join(LIMITS)})")
    directory = raw.get("dir")
    if directory is None:
        raise ConfigError(f"{path}.dir", "required key is missing")
    if not isinstance(directory, str) or not directory.strip():
        raise ConfigError(f"{path}.dir", f"expected a directory path, got {directory!r}")
    values = {}
    for key, (low, high, kind) in LIMITS.items():
        if key not in raw:
            continue
        value = raw[key]
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or (kind is int and value != int(value))
            or not low <= value <= high
        ):
            raise ConfigError(
                f"{path}.{key}",
                f"expected {'an integer' if kind is int else 'a number'} between {low:g} and {high:g}, got {value!r}",
            )
        values[key] = kind(value)
    return UsageLogConfig(dir=directory, **values)
