"""``quota.smoothing``: parsed strictly (YAML's on/off booleans too), dynamic as quota.mode is, and switched on the
producer_byte_rate and consumer_byte_rate managers of a running proxy when the effective configuration changes."""

from __future__ import annotations

import json

import pytest

from config.dynamic import PROXY_KEY, DynamicEntries, RecordError, effective, entity_key
from config.errors import ConfigError
from config.loader import load_config_text
from proxy.enforcement.proxy_quotas import ProxyQuotas
from quota import ManualClock

YAML = """
upstream: {bootstrap_servers: ["127.0.0.1:9092"]}
listeners: [{name: L, bind: "127.0.0.1:0"}]
dynamic_config: {}
quotas:
  - entity: {user: alice}
    producer_byte_rate: 1000
    consumer_byte_rate: 1000
"""


@pytest.mark.parametrize(
    "written, value",
    [("", "off"), ("on", "on"), ("off", "off"), ("'on'", "on"), ("'OFF'", "off"), ("true", "on"), ("false", "off")],
)
def test_values(written, value):
    text = YAML + (f"settings: {{quota.smoothing: {written}}}\n" if written else "")
    assert load_config_text(text).settings.quota_smoothing == value


@pytest.mark.parametrize("written", ["smooth", "1", "[on]", "null"])
def test_a_bad_value_names_the_key(written):
    with pytest.raises(ConfigError) as err:
        load_config_text(YAML + f"settings: {{quota.smoothing: {written}}}\n")
    assert "settings.quota.smoothing: expected off or on" in str(err.value)


def test_dynamic_record_switches_the_managers_both_ways():
    base = load_config_text(YAML)
    clock = ManualClock()
    quotas = ProxyQuotas(base, clock)
    assert not quotas.produce.smoothing and not quotas.fetch.smoothing
    key = entity_key(PROXY_KEY)
    entries = DynamicEntries().with_record(base, key, json.dumps({"quota.smoothing": "on"}).encode())
    quotas.apply(effective(base, entries))
    assert quotas.produce.smoothing and quotas.fetch.smoothing
    # in force: 1000 B/s with a 1 s burst, so 3000 B is throttled 2 s (Kafka's fresh 10 s burst would take it)
    assert quotas.produce.record_and_get_throttle_time_ms("alice", "c", 3000) == 2000
    quotas.apply(effective(base, entries.with_record(base, key, None)))
    assert not quotas.produce.smoothing and not quotas.fetch.smoothing
    with pytest.raises(RecordError, match="expected off or on"):
        entries.with_record(base, key, json.dumps({"quota.smoothing": "sometimes"}).encode())


def test_every_brokers_set_follows_the_setting():
    """quota.scope broker in cluster mode: a set per broker, made before or after the switch, smooths alike."""
    from config.loader import parse_config

    raw = {
        "upstream": {"bootstrap_servers": ["b:1"]},
        "listeners": [{"name": "L", "bind": "127.0.0.1:9000", "broker_port_base": 9100}],
        "quotas": [{"entity": {"user": "<default>"}, "producer_byte_rate": 1000, "consumer_byte_rate": 1000}],
    }
    base = parse_config(raw)
    quotas = ProxyQuotas(base, ManualClock())
    before = quotas.for_broker(1)
    assert not before.produce.smoothing
    quotas.apply(parse_config({**raw, "settings": {"quota.smoothing": "on"}}))
    after = quotas.for_broker(2)
    assert before is not after and before.produce is not quotas.home.produce
    assert all(m.smoothing for m in (before.produce, before.fetch, after.produce, after.fetch, quotas.produce))
    assert after.produce.record_and_get_throttle_time_ms("alice", "c", 3000) == 2000
