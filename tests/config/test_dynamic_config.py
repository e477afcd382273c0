"""The dynamic configuration on plain values: config-topic records laid over the YAML, every entity kind, Kafka's
precedence, tombstones, proxy settings, shadow mode, and bad records that change nothing."""

from __future__ import annotations

import json

import pytest

from config.dynamic import PROXY_KEY, DynamicEntries, RecordError, describe, effective, entity_key
from config.loader import load_config_text

YAML = """
upstream: {bootstrap_servers: ["127.0.0.1:9092"]}
listeners: [{name: L, bind: "127.0.0.1:0"}]
dynamic_config: {}
quotas:
  - entity: {user: alice}
    producer_byte_rate: 1000
    consumer_byte_rate: 2000
  - entity: {ip: "<default>"}
    connection_creation_rate: 10
"""
BASE = load_config_text(YAML)


def record(entries: DynamicEntries, entity: dict, values: dict | None) -> DynamicEntries:
    return entries.with_record(BASE, entity_key(entity), None if values is None else json.dumps(values).encode())


def test_dynamic_keys_override_the_yaml_per_key_and_a_tombstone_restores_it():
    entries = record(DynamicEntries(), {"user": "alice"}, {"producer_byte_rate": 5000})
    config = effective(BASE, entries)
    assert config.quotas.limit("producer_byte_rate", "alice", "x") == 5000
    assert config.quotas.limit("consumer_byte_rate", "alice", "x") == 2000  # the YAML's key stays
    entries = record(entries, {"user": "alice"}, None)
    assert effective(BASE, entries).quotas.limit("producer_byte_rate", "alice", "x") == 1000


def test_every_entity_kind_with_kafkas_precedence():
    entries = DynamicEntries()
    for entity, rate in [
        ({"user": "<default>"}, 1),
        ({"client-id": "etl"}, 2),
        ({"user": "bob", "client-id": "etl"}, 3),
        ({"user": "<default>", "client-id": "<default>"}, 4),
        ({"client-id": "<default>"}, 5),
    ]:
        entries = record(entries, entity, {"producer_byte_rate": rate})
    entries = record(entries, {"ip": "10.0.0.7"}, {"connection_creation_rate": 2})
    config = effective(BASE, entries)
    limit = lambda user, client: config.quotas.limit("producer_byte_rate", user, client)  # noqa: E731
    assert limit("bob", "etl") == 3  # user + client-id
    assert limit("carol", "etl") == 4  # default user + default client beats client-id alone
    assert limit("alice", "x") == 1000  # alice's own (YAML) entry
    assert config.connections.ip_rate("10.0.0.7") == 2 and config.connections.ip_rate("10.0.0.8") == 10
    shown = {json.dumps(e, sort_keys=True): v for e, v in describe(config)}
    assert shown['{"client-id": "etl", "user": "bob"}'] == {"producer_byte_rate": 3}
    assert shown['{"ip": "10.0.0.7"}'] == {"connection_creation_rate": 2}


@pytest.mark.parametrize(
    "key,value,reason",
    [
        (b"not json", b"{}", "is not JSON"),
        (entity_key({"team": "x"}), b"{}", "unknown entity type 'team'"),
        (entity_key({"ip": "10.0.0.1", "user": "a"}), b"{}", "cannot be combined"),
        (entity_key({"ip": "nope"}), b"{}", "is not an IP address"),
        (entity_key({"user": "a"}), b"[1]", "expected a JSON object"),
        (entity_key({"user": "a"}), b'{"producer_byte_rate": -5}', "producer_byte_rate"),
        (entity_key({"user": "a"}), b'{"request_percentage": 5}', "request_percentage"),
        (entity_key({"user": "a"}), b'{"mode": "maybe"}', "mode"),
        (entity_key(PROXY_KEY), b'{"socket.request.max.bytes": 5}', "not a dynamic setting"),
        (entity_key(PROXY_KEY), b'{"max.connections": 0}', "max.connections"),
        (None, b"{}", "without a key"),
    ],
)
def test_a_bad_record_is_an_error_naming_the_key_and_changes_nothing(key, value, reason):
    good = record(DynamicEntries(), {"user": "alice"}, {"producer_byte_rate": 5000})
    with pytest.raises(RecordError) as info:
        good.with_record(BASE, key, value)
    assert reason in str(info.value)
    assert effective(BASE, good).quotas.limit("producer_byte_rate", "alice", "x") == 5000


def test_proxy_settings_and_shadow_mode():
    entries = record(DynamicEntries(), PROXY_KEY, {"max.connection.creation.rate": 50, "quota.mode": "shadow"})
    entries = record(entries, {"user": "bob"}, {"producer_byte_rate": 10, "mode": "shadow"})
    config = effective(BASE, entries)
    assert config.connections.max_connection_creation_rate == 50
    assert config.settings.quota_mode == "shadow"
    assert config.quotas.resolve("producer_byte_rate", "bob", "x").shadow
    assert not config.quotas.resolve("producer_byte_rate", "alice", "x").shadow
