"""Topic entities in the ``quotas:`` section: what loads, and the errors that name the entry."""

import pytest

from config.dynamic import DynamicEntries, RecordError, check_record, effective, entity_key
from config.errors import ConfigError
from config.loader import load_config_text
from quota.primitives.entity import CONSUMER_BYTE_RATE, DEFAULT, PRODUCER_BYTE_RATE

BASE = """
upstream:
  bootstrap_servers: ["127.0.0.1:9092"]
listeners:
  - name: PLAINTEXT
    bind: "127.0.0.1:19092"
"""

TOPICS = (
    BASE
    + """
quotas:
  - entity: {client-id: etl}
    producer_byte_rate: 4096
  - entity: {topic: orders}
    producer_byte_rate: 1048576
    consumer_byte_rate: 2097152
  - entity: {topic: "<default>"}
    producer_byte_rate: 65536
    mode: shadow
"""
)


def test_topic_entries_load_beside_the_client_ones():
    config = load_config_text(TOPICS)
    assert len(config.quotas) == 1 and config.quotas.keys() == {PRODUCER_BYTE_RATE}  # the client entry alone
    table = config.topic_quotas
    assert table.resolve_topic(CONSUMER_BYTE_RATE, "orders").limit == 2097152
    default = table.resolve_topic(PRODUCER_BYTE_RATE, "clicks")
    assert (default.limit, default.shadow, default.entity.path) == (65536, True, "/topics/<default>")
    assert table.resolve_topic(CONSUMER_BYTE_RATE, "clicks").unlimited


def test_a_config_topic_record_names_a_topic_over_the_yaml_entry():
    """A record keyed {"topic": NAME} is laid over the YAML's entry for that topic, key by key, as for the client
    entities; its tombstone gives the YAML's entry back; a record the YAML loader would refuse is refused whole (the
    entries in force stay)."""
    base = load_config_text(TOPICS)
    orders, default = entity_key({"topic": "orders"}), entity_key({"topic": DEFAULT})
    entries = DynamicEntries().with_record(base, orders, b'{"producer_byte_rate": 8192}')
    entries = entries.with_record(base, entity_key({"topic": "clicks"}), b'{"consumer_byte_rate": 100}')
    entries = entries.with_record(base, default, b'{"mode": "enforce"}')
    table = effective(base, entries).topic_quotas
    assert table.resolve_topic(PRODUCER_BYTE_RATE, "orders").limit == 8192
    assert table.resolve_topic(CONSUMER_BYTE_RATE, "orders").limit == 2097152  # the YAML's key kept
    assert table.resolve_topic(CONSUMER_BYTE_RATE, "clicks").limit == 100  # a topic the YAML does not name
    assert not table.resolve_topic(PRODUCER_BYTE_RATE, "clicks").shadow  # <default> enforced now
    back = effective(base, entries.with_record(base, orders, None)).topic_quotas
    assert back.resolve_topic(PRODUCER_BYTE_RATE, "orders").limit == 1048576
    for key, value, message in [
        ({"topic": "orders", "user": "alice"}, b'{"producer_byte_rate": 1}', "cannot be combined"),
        ({"topic": "no/slash"}, b'{"producer_byte_rate": 1}', "expected a topic name"),
        ({"topic": "orders"}, b'{"producer_byte_rate": 0}', "producer_byte_rate: expected a rate"),
        ({"topic": "orders"}, b'{"controller_mutation_rate": 5}', "controller_mutation_rate: not a key"),
        ({"topic": "orders"}, b'{"mode": "loud"}', "mode: expected enforce or shadow"),
        ({"topic": "fresh"}, b"{}", "no quota key given"),
    ]:
        with pytest.raises(RecordError, match=message):
            check_record(base, entity_key(key), value)


@pytest.mark.parametrize(
    "entry,message",
    [
        (
            "{entity: {topic: orders, user: alice}, producer_byte_rate: 1}",
            "quotas[0].entity.user: a topic entity cannot",
        ),
        ("{entity: {topic: 'no/slash'}, producer_byte_rate: 1}", "quotas[0].entity.topic: expected a topic name"),
        ("{entity: {topic: ''}, producer_byte_rate: 1}", "quotas[0].entity.topic: expected a topic name"),
        ("{entity: {topic: orders}, controller_mutation_rate: 1}", "quotas[0].controller_mutation_rate: not a key"),
        ("{entity: {topic: orders}, producer_byte_rate: 0}", "quotas[0].producer_byte_rate: expected a rate"),
        ("{entity: {topic: orders}, producer_byte_rate: true}", "quotas[0].producer_byte_rate: expected a rate"),
        ("{entity: {topic: orders}, mode: loud, producer_byte_rate: 1}", "quotas[0].mode: expected enforce or shadow"),
        ("{entity: {topic: orders}}", "quotas[0]: no quota key given"),
    ],
)
def test_bad_topic_entries_name_the_entry(entry, message):
    with pytest.raises(ConfigError) as err:
        load_config_text(BASE + f"quotas:\n  - {entry}\n")
    assert message in str(err.value)


def test_a_topic_given_twice_is_refused_and_topics_go_with_workers():
    twice = (
        BASE
        + "quotas:\n  - {entity: {topic: a}, producer_byte_rate: 1}\n  - {entity: {topic: a}, consumer_byte_rate: 1}\n"
    )
    with pytest.raises(ConfigError, match=r"quotas\[1\].entity.topic: a is configured more than once"):
        load_config_text(twice)
    workers = (
        BASE + f"settings:\n  workers: 2\nquotas:\n  - {{entity: {{topic: '{DEFAULT}'}}, producer_byte_rate: 1}}\n"
    )
    assert load_config_text(workers).topic_quotas.resolve_topic("producer_byte_rate", "any").limit == 1  # shared


def test_the_start_up_line_counts_quotas_not_how_they_act():
    from proxy.ops.about import quota_counts

    config = load_config_text(
        BASE + "quotas:\n  - {entity: {topic: orders}, producer_byte_rate: 1, on_exceed: reject, mode: shadow}\n"
    )
    assert quota_counts(config) == {"topic producer_byte_rate": 1}
    assert config.topic_quotas.rejects("orders")
