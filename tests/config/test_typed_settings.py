"""The typed settings object: one attribute per key of the settings table, of the table's type, read by attribute;
the YAML keys and the values a dynamic update and DescribeConfigs see are those of the table."""

import typing

from config.loader import load_config_text
from config.settings import parse_settings
from config.settings_table import LISTENER_SETTINGS, SETTINGS
from config.typed_settings import SETTING_KEYS, Settings, attribute, listener_attribute

BASE = """
upstream: {bootstrap_servers: ["127.0.0.1:19092"]}
listeners: [{name: PLAIN, bind: "127.0.0.1:0"}, {name: REPL, bind: "127.0.0.1:0", internal: true}]
"""


def test_one_attribute_per_key_of_the_table_of_its_type():
    hints = typing.get_type_hints(Settings)
    assert set(hints) == {attribute(k) for k in SETTING_KEYS} | {listener_attribute(n) for n in LISTENER_SETTINGS}
    for key, spec in SETTINGS.items():
        assert hints[attribute(key)] is spec.kind, key
    defaults = parse_settings({}, "settings")
    for key, spec in SETTINGS.items():
        value = getattr(defaults, attribute(key))
        assert type(value) is spec.kind, key
        if spec.default is not None:
            assert value == spec.default, key


def test_yaml_keys_read_by_attribute_and_listed_by_key():
    settings = load_config_text(
        BASE
        + """
settings:
  quota.window.num: 5
  producer.id.quota.bloom.false.positive.rate: 0.01
  quota.mode: shadow
  max.connections.per.ip.overrides: "10.0.0.1:3"
  listener.name.PLAIN.max.connections: 7
  listener.name.REPL.max.connection.creation.rate: 9
"""
    ).settings
    assert settings.quota_window_num == 5
    assert settings.producer_id_quota_bloom_false_positive_rate == 0.01
    assert settings.quota_mode == "shadow"
    assert dict(settings.max_connections_per_ip_overrides) == {"10.0.0.1": 3}
    assert dict(settings.listener_max_connections) == {"PLAIN": 7}
    assert dict(settings.listener_max_connection_creation_rate) == {"REPL": 9}
    values = settings.values
    assert values["quota.window.num"] == 5
    assert values["listener.name.PLAIN.max.connections"] == 7
    assert values["listener.name.REPL.max.connection.creation.rate"] == 9
    # the keys as written, laid over again (what a dynamic update does), give the same object
    assert parse_settings(dict(values), "settings", {"PLAIN", "REPL"}) == settings
