"""The ``volume_usage:`` section: cluster-wide volume-usage throttling (Strimzi's design).

```yaml
volume_usage:
  source: topic                      # or describe_log_dirs (then a describe_log_dirs: section, no publisher)
  topic: __kafka_quota_proxy_volume_usage
  freshness_seconds: 60
  missing_data_action: PAUSE         # or OPEN
  produce_base_rate: 10485760        # bytes/s scaled by the factor where no per-entity produce quota applies
  pause_delay_ms: 1000               # how long a paused produce is held before its retriable error
  paused_group_metadata_max_bytes: 65536  # at PAUSE: a member's group record (metadata, heartbeat), an assignment,
  #                                         share acknowledgements' state
  max_record_bytes: 1048576          # a bigger volume-usage record (key + value) is skipped unread
  max_volumes_per_snapshot: 10000    # a snapshot listing more volumes is skipped
  metrics_top_volumes: 10            # per-volume metrics for the N volumes nearest their hard limit only
  publisher:                         # present only on sidecars next to a broker
    broker_id: 1
    log_dirs: [/var/lib/kafka/data]
    interval_seconds: 10
    soft_limit: {type: MinFreePercentage, level: 20}
    hard_limit: {type: MinFreeBytes, level: 1073741824}
```
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from config.errors import ConfigError, mapping_with
from quota.managers.volume import LIMIT_TYPES, OPEN, PAUSE, Limit, SnapshotError

DEFAULT_TOPIC = "__kafka_quota_proxy_volume_usage"
SOURCES = ("topic", "describe_log_dirs")
VOLUME_KEYS = (
    "source",
    "topic",
    "freshness_seconds",
    "missing_data_action",
    "produce_base_rate",
    "pause_delay_ms",
    "paused_group_metadata_max_bytes",
    "max_record_bytes",
    "max_volumes_per_snapshot",
    "metrics_top_volumes",
    "publisher",
    "describe_log_dirs",
)
PUBLISHER_KEYS = ("broker_id", "log_dirs", "interval_seconds", "soft_limit", "hard_limit")
LOG_DIRS_KEYS = ("interval_seconds", "soft_limit", "hard_limit")
LIMIT_KEYS = ("type", "level")


@dataclass(frozen=True, slots=True)
class PublisherConfig:
    broker_id: int
    log_dirs: tuple[str, ...]
    interval_seconds: float
    soft_limit: Limit
    hard_limit: Limit


@dataclass(frozen=True, slots=True)
class LogDirsConfig:
    """``source: describe_log_dirs``: every broker's log dirs polled with DescribeLogDirs v4+ (total and usable
    bytes per log dir), judged against these limits."""

    interval_seconds: float
    soft_limit: Limit
    hard_limit: Limit


@dataclass(frozen=True, slots=True)
class VolumeUsageConfig:
    source: str = "topic"
    topic: str = DEFAULT_TOPIC
    freshness_seconds: float = 60
    missing_data_action: str = PAUSE
    produce_base_rate: float = 10485760
    pause_delay_ms: int = 1000
    paused_group_metadata_max_bytes: int = 65536
    max_record_bytes: int = 1_048_576
    max_volumes_per_snapshot: int = 10_000
    metrics_top_volumes: int = 10
    publisher: PublisherConfig | None = None
    describe_log_dirs: LogDirsConfig | None = None


def _number(raw: Any, path: str, minimum: float, integer: bool = False) -> float:
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or (integer and raw != int(raw)):
        raise ConfigError(path, f"expected {'an integer' if integer else 'a number'}, got {raw!r}")
    if raw < minimum:
        raise ConfigError(path, f"must be at least {minimum:g}, got {raw!r}")
    return int(raw) if integer else float(raw)


def _integer(m: dict, key: str, path: str, defaults: VolumeUsageConfig, minimum: int) -> int:
    return int(_number(m.get(key, getattr(defaults, key)), f"{path}.{key}", minimum, integer=True))


def _limit(raw: Any, path: str) -> Limit:
    m = mapping_with(raw, path, LIMIT_KEYS, LIMIT_KEYS)
    if m["type"] not in LIMIT_TYPES:
        raise ConfigError(f"{path}.type", f"expected one of {', '.join(LIMIT_TYPES)}, got {m['type']!r}")
    try:
        return Limit(m["type"], _number(m["level"], f"{path}.level", 0))
    except SnapshotError as exc:
        raise ConfigError(f"{path}.level", str(exc)) from None


def parse_volume_usage(raw: Any, path: str) -> VolumeUsageConfig | None:
    if raw is None:
        return None
    m = mapping_with(raw, path, VOLUME_KEYS)
    defaults = VolumeUsageConfig()
    source = m.get("source", defaults.source)
    if source not in SOURCES:
        raise ConfigError(f"{path}.source", f"expected one of {', '.join(SOURCES)}, got {source!r}")
    log_dirs = None
    if source == "describe_log_dirs":
        if "publisher" in m:
            raise ConfigError(f"{path}.publisher", "only with source: topic (describe_log_dirs asks the brokers)")
        if "describe_log_dirs" not in m:
            raise ConfigError(f"{path}.describe_log_dirs", "required with source: describe_log_dirs (the limits)")
        lp = f"{path}.describe_log_dirs"
        d = mapping_with(m["describe_log_dirs"], lp, LOG_DIRS_KEYS, {"soft_limit", "hard_limit"})
        log_dirs = LogDirsConfig(
            _number(d.get("interval_seconds", 30), f"{lp}.interval_seconds", 1),
            _limit(d["soft_limit"], f"{lp}.soft_limit"),
            _limit(d["hard_limit"], f"{lp}.hard_limit"),
        )
    elif "describe_log_dirs" in m:
        raise ConfigError(f"{path}.describe_log_dirs", "only with source: describe_log_dirs")
    topic = m.get("topic", defaults.topic)
    if not isinstance(topic, str) or not topic:
        raise ConfigError(f"{path}.topic", f"expected a topic name, got {topic!r}")
    action = m.get("missing_data_action", defaults.missing_data_action)
    if action not in (PAUSE, OPEN):
        raise ConfigError(f"{path}.missing_data_action", f"expected PAUSE or OPEN, got {action!r}")
    publisher = None
    if "publisher" in m:
        pp = f"{path}.publisher"
        p = mapping_with(m["publisher"], pp, PUBLISHER_KEYS, {"broker_id", "log_dirs", "soft_limit", "hard_limit"})
        dirs = p["log_dirs"]
        if not isinstance(dirs, list) or not dirs or not all(isinstance(d, str) and d for d in dirs):
            raise ConfigError(f"{pp}.log_dirs", f"expected a non-empty list of paths, got {dirs!r}")
        publisher = PublisherConfig(
            int(_number(p["broker_id"], f"{pp}.broker_id", 0, integer=True)),
            tuple(dirs),
            _number(p.get("interval_seconds", 10), f"{pp}.interval_seconds", 0.1),
            _limit(p["soft_limit"], f"{pp}.soft_limit"),
            _limit(p["hard_limit"], f"{pp}.hard_limit"),
        )
    freshness = _number(m.get("freshness_seconds", defaults.freshness_seconds), f"{path}.freshness_seconds", 1)
    if log_dirs is not None and log_dirs.interval_seconds >= freshness:
        raise ConfigError(
            f"{path}.describe_log_dirs.interval_seconds",
            f"must be below freshness_seconds ({freshness:g}), or every poll would be stale",
        )
    return VolumeUsageConfig(
        source=source,
        topic=topic,
        freshness_seconds=freshness,
        missing_data_action=action,
        produce_base_rate=_number(
            m.get("produce_base_rate", defaults.produce_base_rate), f"{path}.produce_base_rate", 1
        ),
        pause_delay_ms=int(
            _number(m.get("pause_delay_ms", defaults.pause_delay_ms), f"{path}.pause_delay_ms", 0, integer=True)
        ),
        paused_group_metadata_max_bytes=_integer(m, "paused_group_metadata_max_bytes", path, defaults, 0),
        max_record_bytes=_integer(m, "max_record_bytes", path, defaults, 1024),
        max_volumes_per_snapshot=_integer(m, "max_volumes_per_snapshot", path, defaults, 1),
        metrics_top_volumes=_integer(m, "metrics_top_volumes", path, defaults, 0),
        publisher=publisher,
        describe_log_dirs=log_dirs,
    )
