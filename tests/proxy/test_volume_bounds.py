"""Volume-usage records stay cheap whatever a writer publishes: bounded records (size, volumes), evaluations only
when a snapshot changes or goes stale, and metrics bounded in cardinality. Pure: records in, state and Prometheus
samples out; time is a fake clock (and, for the background timer, a loop whose time is virtual)."""

from __future__ import annotations

import pytest

from config.errors import ConfigError
from config.loader import parse_config

BASE = {"upstream": {"bootstrap_servers": ["b:1"]}, "listeners": [{"name": "L", "bind": "h:2"}]}


def volume_config(**keys):
    return parse_config({**BASE, "volume_usage": keys}).volume_usage


def test_the_bounds_have_defaults_that_fit_a_real_cluster():
    config = volume_config()
    assert (config.max_record_bytes, config.max_volumes_per_snapshot, config.metrics_top_volumes) == (
        1_048_576, 10_000, 10)
    config = volume_config(max_record_bytes=65536, max_volumes_per_snapshot=50, metrics_top_volumes=0)
    assert (config.max_record_bytes, config.max_volumes_per_snapshot, config.metrics_top_volumes) == (65536, 50, 0)


@pytest.mark.parametrize("key,value,message", [
    ("max_record_bytes", 100, "volume_usage.max_record_bytes: must be at least 1024"),
    ("max_record_bytes", "1MiB", "volume_usage.max_record_bytes: expected an integer"),
    ("max_volumes_per_snapshot", 0, "volume_usage.max_volumes_per_snapshot: must be at least 1"),
    ("max_volumes_per_snapshot", 1.5, "volume_usage.max_volumes_per_snapshot: expected an integer"),
    ("metrics_top_volumes", -1, "volume_usage.metrics_top_volumes: must be at least 0"),
])
def test_bad_bounds_name_the_key(key, value, message):
    with pytest.raises(ConfigError) as info:
        volume_config(**{key: value})
    assert message in str(info.value)
