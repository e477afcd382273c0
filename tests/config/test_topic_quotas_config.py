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


def test_the_dynamic_config_keeps_the_yaml_topic_entries_and_names_no_topic():
    """A config-topic record is laid over the YAML's client entries; the topic entries stay as the YAML has them,
    and a record naming a topic is refused (topics are not in the config topic yet)."""
    base = load_config_text(TOPICS)
    entries = DynamicEntries().with_record(base, entity_key({"client-id": "etl"}), b'{"producer_byte_rate": 8192}')
    config = effective(base, entries)
    assert config.quotas.limit(PRODUCER_BYTE_RATE, "", "etl") == 8192
    assert config.topic_quotas is base.topic_quotas
    with pytest.raises(RecordError, match="unknown entity type 'topic'"):
        check_record(base, entity_key({"topic": "orders"}), b'{"producer_byte_rate": 1}')


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


def test_a_topic_given_twice_and_topics_with_workers_are_refused():
    twice = (
        BASE
        + "quotas:\n  - {entity: {topic: a}, producer_byte_rate: 1}\n  - {entity: {topic: a}, consumer_byte_rate: 1}\n"
    )
    with pytest.raises(ConfigError, match=r"quotas\[1\].entity.topic: a is configured more than once"):
        load_config_text(twice)
    workers = (
        BASE + f"settings:\n  workers: 2\nquotas:\n  - {{entity: {{topic: '{DEFAULT}'}}, producer_byte_rate: 1}}\n"
    )
    with pytest.raises(ConfigError, match="topic quotas are kept per process: not with settings.workers 2"):
        load_config_text(workers)
