"""The ``dynamic_config`` section: on by default, off only with ``enabled: false``, strict keys."""

from __future__ import annotations

import pytest

from config.dynamic_source import DEFAULT_TOPIC
from config.errors import ConfigError
from config.loader import parse_config

BASE = {
    "upstream": {"bootstrap_servers": ["127.0.0.1:9092"]},
    "listeners": [{"name": "PLAINTEXT", "bind": "127.0.0.1:0"}],
}


def test_without_the_section_the_default_topic_is_followed():
    assert parse_config(dict(BASE)).dynamic_config.topic == DEFAULT_TOPIC
    assert parse_config(dict(BASE, dynamic_config={"topic": "cfg"})).dynamic_config.topic == "cfg"
    assert parse_config(dict(BASE, dynamic_config={"enabled": True})).dynamic_config.topic == DEFAULT_TOPIC


def test_enabled_false_turns_it_off():
    assert parse_config(dict(BASE, dynamic_config={"enabled": False})).dynamic_config is None


@pytest.mark.parametrize(
    "section,path",
    [
        ({"enabled": "no"}, "dynamic_config.enabled"),
        ({"enabled": 0}, "dynamic_config.enabled"),
        ({"enabeld": False}, "dynamic_config.enabeld"),
    ],
)
def test_a_bad_value_or_unknown_key_is_named(section, path):
    with pytest.raises(ConfigError) as err:
        parse_config(dict(BASE, dynamic_config=section))
    assert path in str(err.value)


def test_the_bounds_default_to_a_million_entries_1_kib_keys_and_64_kib_values():
    source = parse_config(dict(BASE)).dynamic_config
    assert (source.max_entries, source.max_key_bytes, source.max_value_bytes) == (1_000_000, 1024, 65_536)
    source = parse_config(
        dict(BASE, dynamic_config={"max_entries": 10, "max_key_bytes": 100, "max_value_bytes": 1000})
    ).dynamic_config
    assert (source.max_entries, source.max_key_bytes, source.max_value_bytes) == (10, 100, 1000)


@pytest.mark.parametrize(
    "key,value",
    [
        ("max_entries", 0),
        ("max_entries", "many"),
        ("max_entries", True),
        ("max_key_bytes", 10),
        ("max_value_bytes", 1.5),
        ("max_value_bytes", 10**9),
    ],
)
def test_a_bound_out_of_range_is_named(key, value):
    with pytest.raises(ConfigError) as err:
        parse_config(dict(BASE, dynamic_config={key: value}))
    assert f"dynamic_config.{key}" in str(err.value)
