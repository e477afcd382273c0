"""The ``dynamic_config`` section: on by default, off only with ``enabled: false``, strict keys."""

from __future__ import annotations

import pytest

from config.dynamic_source import DEFAULT_TOPIC
from config.errors import ConfigError
from config.loader import parse_config

BASE = {"upstream": {"bootstrap_servers": ["127.0.0.1:9092"]},
        "listeners": [{"name": "PLAINTEXT", "bind": "127.0.0.1:0"}]}


def test_without_the_section_the_default_topic_is_followed():
    assert parse_config(dict(BASE)).dynamic_config.topic == DEFAULT_TOPIC
    assert parse_config(dict(BASE, dynamic_config={"topic": "cfg"})).dynamic_config.topic == "cfg"
    assert parse_config(dict(BASE, dynamic_config={"enabled": True})).dynamic_config.topic == DEFAULT_TOPIC


def test_enabled_false_turns_it_off():
    assert parse_config(dict(BASE, dynamic_config={"enabled": False})).dynamic_config is None


@pytest.mark.parametrize("section,path", [({"enabled": "no"}, "dynamic_config.enabled"),
                                          ({"enabled": 0}, "dynamic_config.enabled"),
                                          ({"enabeld": False}, "dynamic_config.enabeld")])
def test_a_bad_value_or_unknown_key_is_named(section, path):
    with pytest.raises(ConfigError) as err:
        parse_config(dict(BASE, dynamic_config=section))
    assert path in str(err.value)
