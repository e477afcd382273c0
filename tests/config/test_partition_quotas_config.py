"""Partition entities (``{topic: NAME, partition: N|<default>}``) in the ``quotas:`` section and the config topic:
what loads, the errors that name the entry, and a bad dynamic record that leaves the last good config."""

import pytest

from config.dynamic import DynamicEntries, RecordError, check_record, describe, effective, entity_key
from config.errors import ConfigError
from config.loader import load_config_text
from proxy.ops.about import quota_counts
from quota.primitives.entity import CONSUMER_BYTE_RATE, DEFAULT, PRODUCER_BYTE_RATE

BASE = """
upstream:
  bootstrap_servers: ["127.0.0.1:9092"]
listeners:
  - name: PLAINTEXT
    bind: "127.0.0.1:19092"
"""

PARTITIONS = (
    BASE
    + """
quotas:
  - entity: {topic: orders}
    producer_byte_rate: 4194304
  - entity: {topic: orders, partition: 3}
    producer_byte_rate: 2097152
    on_exceed: reject
  - entity: {topic: orders, partition: "<default>"}
    producer_byte_rate: 1048576
    consumer_byte_rate: 2097152
    mode: shadow
"""
)


def test_partition_entries_load_beside_the_topic_one():
    config = load_config_text(PARTITIONS)
    table = config.topic_quotas
    assert table.resolve_topic(PRODUCER_BYTE_RATE, "orders").limit == 4194304
    three = table.resolve_partition(PRODUCER_BYTE_RATE, "orders", "3")
    assert (three.limit, three.shadow, three.entity.path) == (2097152, False, "/topics/orders/partitions/3")
    other = table.resolve_partition(CONSUMER_BYTE_RATE, "orders", "7")
    assert (other.limit, other.shadow) == (2097152, True)
    assert table.partition_rejects("orders", "3") and not table.partition_rejects("orders", "7")
    assert ({"topic": "orders", "partition": "3"}, {PRODUCER_BYTE_RATE: 2097152}) in describe(config)
    assert quota_counts(config) == {
        "topic producer_byte_rate": 1,
        "partition producer_byte_rate": 2,
        "partition consumer_byte_rate": 1,
    }


@pytest.mark.parametrize(
    "entry,message",
    [
        ("{entity: {topic: orders, partition: -1}, producer_byte_rate: 1}", "quotas[0].entity.partition: expected a"),
        ("{entity: {topic: orders, partition: x}, producer_byte_rate: 1}", "quotas[0].entity.partition: expected a"),
        ("{entity: {topic: orders, partition: 1.5}, producer_byte_rate: 1}", "quotas[0].entity.partition: expected"),
        ("{entity: {topic: orders, partition: true}, producer_byte_rate: 1}", "quotas[0].entity.partition: expected"),
        (
            "{entity: {topic: orders, partition: 2147483648}, producer_byte_rate: 1}",
            "quotas[0].entity.partition: expected",
        ),
        (
            "{entity: {topic: '<default>', partition: 0}, producer_byte_rate: 1}",
            "quotas[0].entity.topic: a partition entity names its topic",
        ),
        (
            "{entity: {topic: orders, partition: 0, user: alice}, producer_byte_rate: 1}",
            "quotas[0].entity.user: a topic entity cannot be combined",
        ),
        ("{entity: {partition: 0}, producer_byte_rate: 1}", "quotas[0]"),
        (
            "{entity: {topic: orders, partition: 0}, request_percentage: 1}",
            "quotas[0].request_percentage: not a key",
        ),
        ("{entity: {topic: orders, partition: 0}, producer_byte_rate: 0}", "quotas[0].producer_byte_rate: expected"),
        (
            "{entity: {topic: orders, partition: 0}, consumer_byte_rate: 5, on_exceed: reject}",
            "quotas[0].on_exceed: reject refuses writes over producer_byte_rate",
        ),
    ],
)
def test_bad_partition_entries_name_the_key_and_the_reason(entry, message):
    with pytest.raises(ConfigError) as err:
        load_config_text(BASE + f"quotas:\n  - {entry}\n")
    assert message in str(err.value)


def test_a_partition_given_twice_is_refused_whichever_way_it_is_written():
    twice = (
        BASE
        + "quotas:\n  - {entity: {topic: a, partition: 1}, producer_byte_rate: 1}\n"
        + "  - {entity: {topic: a, partition: '1'}, consumer_byte_rate: 1}\n"
        + "  - {entity: {topic: a}, consumer_byte_rate: 1}\n"
    )
    with pytest.raises(ConfigError, match=r"quotas\[1\].entity.topic: /topics/a/partitions/1 is configured more"):
        load_config_text(twice)


def test_a_config_topic_record_names_a_partition_over_the_yaml_entry_and_a_bad_one_changes_nothing():
    """The record key is {"partition": "3", "topic": "orders"} (the index a string, as Kafka's entity names are):
    laid over the YAML's item written with a number, key by key; a tombstone gives the YAML's back."""
    base = load_config_text(PARTITIONS)
    three = entity_key({"topic": "orders", "partition": "3"})
    assert three == entity_key({"topic": "orders", "partition": 3}) == b'{"partition":"3","topic":"orders"}'
    entries = DynamicEntries().with_record(base, three, b'{"producer_byte_rate": 8192}')
    entries = entries.with_record(
        base, entity_key({"topic": "clicks", "partition": DEFAULT}), b'{"consumer_byte_rate": 9}'
    )
    table = effective(base, entries).topic_quotas
    assert table.resolve_partition(PRODUCER_BYTE_RATE, "orders", "3").limit == 8192
    assert table.partition_rejects("orders", "3")  # the YAML's on_exceed kept
    assert table.resolve_partition(CONSUMER_BYTE_RATE, "clicks", "0").limit == 9  # a topic the YAML does not name
    back = effective(base, entries.with_record(base, three, None)).topic_quotas
    assert back.resolve_partition(PRODUCER_BYTE_RATE, "orders", "3").limit == 2097152
    for key, value, message in [
        (b'{"partition":"3"}', b'{"producer_byte_rate": 1}', "a partition entity names its topic too"),
        (b'{"partition":"-3","topic":"orders"}', b'{"producer_byte_rate": 1}', "expected a partition index"),
        (b'{"partition":"03","topic":"orders"}', b'{"producer_byte_rate": 1}', "expected a partition index"),
        (b'{"partition":"3","topic":"<default>"}', b'{"producer_byte_rate": 1}', "names its topic"),
        (b'{"client-id":"a","partition":"3","topic":"o"}', b'{"producer_byte_rate": 1}', "cannot be combined"),
        (three, b'{"producer_byte_rate": 0}', "producer_byte_rate: expected a rate"),
        (three, b'{"request_percentage": 5}', "request_percentage: not a key"),
    ]:
        with pytest.raises(RecordError, match=message):
            check_record(base, key, value)
    # a record refused leaves the entries as they were: the last good configuration stays
    with pytest.raises(RecordError):
        entries.with_record(base, three, b'{"producer_byte_rate": -1}')
    assert effective(base, entries).topic_quotas.resolve_partition(PRODUCER_BYTE_RATE, "orders", "3").limit == 8192
