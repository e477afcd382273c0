"""config.dynamic_state on plain values: a batch of config-topic records gives the same configuration as building
it whole (config.dynamic.effective), whatever parts it is built in; the dynamic_config bounds skip a record and
change nothing; the state in force is never changed by building the next one."""

from __future__ import annotations

import json

import pytest

from config.dynamic import PROXY_KEY, RecordError, effective, entity_key
from config.dynamic_state import Batch, DynamicState, RecordSkipped
from config.loader import load_config_text

YAML = """
upstream: {bootstrap_servers: ["127.0.0.1:9092"]}
listeners: [{name: L, bind: "127.0.0.1:0"}]
dynamic_config: {max_entries: 7, max_key_bytes: 100, max_value_bytes: 300}
quotas:
  - entity: {user: alice}
    producer_byte_rate: 1000
    consumer_byte_rate: 2000
  - entity: {ip: "<default>"}
    connection_creation_rate: 10
  - entity: {topic: orders}
    consumer_byte_rate: 4000
"""
BASE = load_config_text(YAML)
P = "producer_byte_rate"


def value(values: dict | None) -> bytes | None:
    return None if values is None else json.dumps(values).encode()


def batch_of(state: DynamicState, *records) -> Batch:
    batch = Batch(state, BASE.dynamic_config)
    for entity, values in records:
        batch.add(entity_key(entity), value(values))
    return batch


RECORDS = [
    ({"user": "alice"}, {P: 5000}),
    ({"user": "bob"}, {P: 7, "mode": "shadow"}),
    ({"client-id": "etl"}, {P: 9}),
    ({"ip": "10.0.0.7"}, {"connection_creation_rate": 2}),
    (PROXY_KEY, {"max.connection.creation.rate": 50}),
    ({"user": "bob"}, None),
    ({"user": "alice"}, None),
    ({"ip": "<default>"}, {"connection_creation_rate": 3}),
    ({"topic": "orders"}, {P: 300, "on_exceed": "reject"}),
    ({"topic": "<default>"}, {P: 100}),
    ({"topic": "clicks"}, {P: 200}),
    ({"topic": "clicks"}, None),
]


@pytest.mark.parametrize("step", [1, 2, 1000])
def test_a_batch_built_in_parts_gives_what_building_it_whole_gives(step):
    state = DynamicState.initial(BASE)
    batch = batch_of(state, *RECORDS)
    list(batch.build(step))
    new = batch.result
    whole = effective(BASE, new.entries)
    for user, client in [("alice", "x"), ("bob", "x"), ("carol", "etl"), ("alice", "etl")]:
        assert new.config.quotas.resolve(P, user, client) == whole.quotas.resolve(P, user, client)
    assert new.config.quotas.limit(P, "alice", "x") == 1000  # the tombstone gave the YAML's entry back
    assert dict(new.config.connections.ip_rates) == dict(whole.connections.ip_rates) == {"<default>": 3, "10.0.0.7": 2}
    assert new.config.connections.max_connection_creation_rate == 50
    for topic in ("orders", "clicks", "other"):
        for key in (P, "consumer_byte_rate"):
            assert new.config.topic_quotas.resolve_topic(key, topic) == whole.topic_quotas.resolve_topic(key, topic)
    topics = new.config.topic_quotas
    assert topics.resolve_topic(P, "orders").limit == 300  # over the YAML's entry, whose consumer_byte_rate stays
    assert topics.resolve_topic("consumer_byte_rate", "orders").limit == 4000
    assert topics.resolve_topic(P, "clicks").limit == 100  # its own entry gone: <default>'s
    assert topics.rejects("orders") and whole.topic_quotas.rejects("orders") and not topics.rejects("clicks")
    assert state.config is BASE and len(state.entries.entries) == 0  # the state in force is untouched


def test_one_record_per_batch_gives_the_same():
    state = DynamicState.initial(BASE)
    for record in RECORDS:
        state = batch_of(state, record).built()
    whole = effective(BASE, state.entries)
    assert state.config.quotas.limit(P, "carol", "etl") == whole.quotas.limit(P, "carol", "etl") == 9
    assert state.config.connections.ip_rate("10.0.0.7") == 2 and state.config.connections.ip_rate("1.1.1.1") == 3


@pytest.mark.parametrize(
    "key,data,reason",
    [
        (b'{"user":"' + b"x" * 100 + b'"}', value({P: 1}), "key_too_large"),
        (entity_key({"user": "a"}), b'{"producer_byte_rate": 1, "pad": "' + b"x" * 300 + b'"}', "value_too_large"),
    ],
)
def test_a_record_past_a_size_bound_is_skipped_unread(key, data, reason):
    batch = Batch(DynamicState.initial(BASE), BASE.dynamic_config)
    with pytest.raises(RecordSkipped) as info:
        batch.add(key, data)
    assert info.value.reason == reason and len(batch) == 0


def test_max_entries_counts_entries_in_force_not_records():
    state = batch_of(DynamicState.initial(BASE), *[({"user": f"u{i}"}, {P: i + 1}) for i in range(7)]).built()
    batch = Batch(state, BASE.dynamic_config)
    batch.add(entity_key({"user": "u0"}), value({P: 99}))  # replaces one: still 7
    with pytest.raises(RecordSkipped) as info:
        batch.add(entity_key({"user": "new"}), value({P: 1}))
    assert info.value.reason == "too_many_entries"
    batch.add(entity_key({"user": "u1"}), None)  # a tombstone makes room
    batch.add(entity_key({"user": "new"}), value({P: 1}))
    assert batch.size == 7
    new = batch.built()
    assert new.config.quotas.limit(P, "new", "x") == 1 and new.config.quotas.limit(P, "u0", "x") == 99


def test_a_bad_record_changes_nothing_and_the_next_good_one_applies():
    batch = Batch(DynamicState.initial(BASE), BASE.dynamic_config)
    with pytest.raises(RecordError):
        batch.add(entity_key({"user": "a"}), value({P: -1}))
    batch.add(entity_key({"user": "a"}), value({P: 3}))
    assert batch.built().config.quotas.limit(P, "a", "x") == 3


def test_an_empty_batch_keeps_the_configuration_object():
    state = DynamicState.initial(BASE)
    assert Batch(state).built().config is BASE
