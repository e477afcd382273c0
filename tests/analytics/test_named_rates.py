"""Recommendations for topics' byte rates and for request rates (analytics.named_rates) from named_stats rows:
the byte rates' rule, a request rate at least 1/s, the <default> sums never a figure, offenders judged per fleet,
and a fleet default the proxy loads. Plain values, no Spark."""

import pytest

from analytics.fleet import plan
from analytics.named_rates import MIN_REQUEST_RATE, notes, recommendations
from analytics.recommend import Rules, entity_id, to_commands
from quota.primitives.entity import DEFAULT


def row(key, p99, *, user=None, client_id=None, topic=None, group=None, peak=None):
    return {
        "user": user,
        "client_id": client_id,
        "topic": topic,
        "group": group,
        "key": key,
        "intervals": 60,
        "total": 1,
        "rate_p99": p99,
        "burst_max": p99 if peak is None else peak,
    }


def topics(rates, key="producer_byte_rate"):
    return [row(key, rate, topic=f"topic-{i}") for i, rate in enumerate(rates)]


def test_the_rule_per_kind_and_the_default_sums_give_no_figure():
    rows = [
        row("producer_byte_rate", 99_000.0, topic="orders"),
        row("producer_byte_rate", 5_000_000.0, topic=DEFAULT),
        row("request_rate", 0.2, user="alice", client_id="etl", peak=3.0),
        row("request_rate", 4.0, group="payments"),
        row("request_rate", 300.0, group=DEFAULT),
    ]
    found = {entity_id(e): (k, v) for e, k, v, _ in recommendations(rows, Rules())}
    assert found == {
        entity_id({"topic": "orders"}): ("producer_byte_rate", 150_000),
        entity_id({"user": "alice", "client-id": "etl"}): ("request_rate", MIN_REQUEST_RATE),  # 0.3/s: at least 1
        entity_id({"group": "payments"}): ("request_rate", 6.0),
    }
    said = notes(rows, Rules())
    assert any("topics under <default> (producer_byte_rate) are logged together" in line for line in said)
    assert any("groups under <default> (request_rate) are logged together" in line for line in said)
    assert "JoinGroup, SyncGroup, OffsetCommit, Metadata, FindCoordinator, ListOffsets" in said[0]


def test_a_topic_far_above_the_topics_is_held_and_a_group_fleet_gets_a_default_the_proxy_loads():
    from config.loader import load_config_text

    rows = topics([10_000.0] * 8 + [10_000_000.0]) + [row("request_rate", 2.0, group=f"g{i}") for i in range(6)]
    table = plan([], [], [], named_rows=rows)
    (held,) = table.outliers
    assert (held.entity, held.key, held.figure, held.limit) == (
        {"topic": "topic-8"},
        "producer_byte_rate",
        15_000_000,
        15_000,
    )
    assert {"entity": {"topic": DEFAULT}, "producer_byte_rate": 15_000} in table.items  # p90 of the eight
    assert {"entity": {"group": DEFAULT}, "request_rate": 3.0} in table.items
    assert {"entity": {"topic": "topic-8"}, "producer_byte_rate": 15_000} in table.items  # an offender stays pinned
    commands = to_commands(table.items, basis=table.basis)
    assert "--entity-type topics --entity-default --add-config producer_byte_rate=15000" in commands
    assert "--entity-type groups --entity-default --add-config request_rate=3.0" in commands
    base = "upstream: {bootstrap_servers: ['127.0.0.1:9092']}\nlisteners: [{name: L, bind: '127.0.0.1:0'}]\n"
    import yaml

    config = load_config_text(base + yaml.safe_dump({"quotas": table.items}))
    assert config.topic_quotas.resolve_topic("producer_byte_rate", "any").limit == 15_000
    assert config.group_quotas.resolve("request_rate", "", "any").limit == 3.0


@pytest.mark.parametrize("rates", [[], [0.0]])
def test_nothing_counted_is_nothing_recommended(rates):
    assert list(recommendations([row("request_rate", r, user="u", peak=0.0) for r in rates], Rules())) == []


def test_the_apis_counted_are_the_proxys_setting_from_its_configuration(tmp_path):
    from analytics.cli import build_parser, windows

    config = tmp_path / "proxy.yaml"
    config.write_text(
        "upstream: {bootstrap_servers: ['127.0.0.1:9092']}\nlisteners: [{name: L, bind: '127.0.0.1:0'}]\n"
        "settings: {quota.request.rate.apis: 'JoinGroup,OffsetCommit'}\n"
    )
    argv = ["analyze", "--input", "in", "--output", "out"]
    found, _, _ = windows(build_parser().parse_args([*argv, "--proxy-config", str(config)]))
    assert Rules(**found).request_rate_apis == ("JoinGroup", "OffsetCommit")
    found, _, _ = windows(build_parser().parse_args(argv))
    assert Rules(**found).request_rate_apis == Rules().request_rate_apis  # the proxy's default set


def test_a_topic_or_a_client_a_quota_held_is_recommended_on_its_estimated_demand():
    """Held by a topic quota (or a request rate), what it sent is what the quota let through: the figure rests on
    the demand the holds hid; where none could be estimated, on what it was let through, said as such."""
    topic = {**row("producer_byte_rate", 100_000.0, topic="orders"), "held_intervals": 50, "demand": 300_000.0}
    client = {**row("request_rate", 5.0, user="alice", client_id="etl"), "held_intervals": 60, "demand": 20.0}
    stuck = {**row("request_rate", 5.0, user="bob", client_id="x"), "held_intervals": 60, "demand": None}
    found = {entity_id(e): (v, text) for e, _, v, text in recommendations([topic, client, stuck], Rules())}
    value, text = found[entity_id({"topic": "orders"})]
    assert value == 450_000 and "held by a quota in 50 of 60 intervals" in text
    assert "estimated demand 300,000 B/s" in text
    value, text = found[entity_id({"user": "alice", "client-id": "etl"})]
    assert value == 30.0 and "estimated demand 20 requests/s" in text
    value, text = found[entity_id({"user": "bob", "client-id": "x"})]
    assert value == 7.5 and "demand not measurable" in text


def test_a_partition_gets_the_entry_an_operator_pastes_and_its_default_sum_no_figure():
    """A partition the log names (``orders/3``) is recommended by the topics' rule, on its estimated demand where a
    quota held it, as ``{topic: orders, partition: 3}``, which the proxy loads and the commands file sets; the
    ``orders/<default>`` sum (every other partition of orders) gives none, nor a default of orders' partitions
    (its named one is its hot one); partitions are judged for no offender and get no ``{topic: <default>,
    partition: <default>}`` default (the proxy refuses one). The 8 partitions of logs, every one named (none logged
    under <default>), are a fleet of their own: ``{topic: logs, partition: <default>}`` at their p90, and no
    named entry where none is above it (tests/analytics/test_fleet.py has one that is)."""
    import yaml

    from config.loader import load_config_text

    hot = {**row("producer_byte_rate", 100_000.0, topic="orders"), "partition": "3"}
    held = {**row("consumer_byte_rate", 40_000.0, topic="orders"), "partition": "3", "held_intervals": 9}
    lump = {**row("producer_byte_rate", 900_000.0, topic="orders"), "partition": DEFAULT}
    others = [{**row("producer_byte_rate", 1_000.0, topic="logs"), "partition": str(i)} for i in range(8)]
    rows = [hot, {**held, "demand": 80_000.0}, lump, *others]
    found = {(entity_id(e), k): (v, text) for e, k, v, text in recommendations(rows, Rules())}
    orders_3 = entity_id({"topic": "orders", "partition": 3})
    assert set(found) == {(orders_3, "producer_byte_rate"), (orders_3, "consumer_byte_rate")} | {
        (entity_id({"topic": "logs", "partition": i}), "producer_byte_rate") for i in range(8)
    }
    value, text = found[(orders_3, "producer_byte_rate")]
    assert value == 150_000 and "of the partition's records" in text
    value, text = found[(orders_3, "consumer_byte_rate")]
    assert value == 120_000 and "held by a quota in 9 of 60 intervals" in text and "estimated demand 80,000" in text
    assert any(
        "partitions of orders under <default> (producer_byte_rate) are logged together" in n
        for n in notes(rows, Rules())
    )
    table = plan([], [], [], named_rows=[*rows, *topics([10_000.0] * 8 + [10_000_000.0])])
    partitions = [it for it in table.items if "partition" in it["entity"]]
    assert {
        "entity": {"topic": "orders", "partition": 3},
        "producer_byte_rate": 150_000,
        "consumer_byte_rate": 120_000,
    } in partitions
    assert len(partitions) == 2 and {"entity": {"topic": "logs", "partition": DEFAULT}, "producer_byte_rate": 1500} in (
        partitions
    )
    assert not any(it["entity"] == {"topic": DEFAULT, "partition": DEFAULT} for it in table.items)
    assert not any("partition" in o.entity for o in table.outliers)
    commands = to_commands(table.items, basis=table.basis)
    assert (
        "--entity-type topics --entity-name orders --entity-type partitions --entity-name 3 "
        "--add-config producer_byte_rate=150000,consumer_byte_rate=120000"
    ) in commands
    base = "upstream: {bootstrap_servers: ['127.0.0.1:9092']}\nlisteners: [{name: L, bind: '127.0.0.1:0'}]\n"
    config = load_config_text(base + yaml.safe_dump({"quotas": table.items}))
    assert config.topic_quotas.resolve_partition("producer_byte_rate", "orders", "3").limit == 150_000
    assert config.topic_quotas.resolve_partition("producer_byte_rate", "logs", "11").limit == 1500  # a new one too
    assert (
        "--entity-type topics --entity-name logs --entity-type partitions --entity-default "
        "--add-config producer_byte_rate=1500"
    ) in commands


def test_a_topic_whose_every_partition_is_named_gets_a_partition_default_and_its_hot_one_a_named_entry():
    """Six partitions of clicks, each with an entry of its own and none logged under <default>: the fleet default's
    rule on the topic's partitions, {topic: clicks, partition: <default>} at their p90 (the lower of the two around
    its rank: 15,000), the partition above it (5: 150,000) keeping its named entry, the others left to the default
    and listed under it; with --no-fleet-default each keeps its own."""
    rates = [10_000.0] * 4 + [9_000.0, 100_000.0]
    rows = [{**row("producer_byte_rate", rate, topic="clicks"), "partition": str(i)} for i, rate in enumerate(rates)]
    table = plan([], [], [], named_rows=rows)
    partitions = [it for it in table.items if "partition" in it["entity"]]
    assert partitions == [
        {"entity": {"topic": "clicks", "partition": DEFAULT}, "producer_byte_rate": 15_000},
        {"entity": {"topic": "clicks", "partition": 5}, "producer_byte_rate": 150_000},
    ]
    said = table.basis[entity_id({"topic": "clicks", "partition": DEFAULT})]["producer_byte_rate"]
    assert said.startswith("fleet default: p90 of the 6 partitions of clicks' recommendations (outliers left out)")
    assert [(u["entity"]["partition"], u["own"], u["default"]) for u in table.under_default] == [
        (0, 15_000, 15_000),
        (1, 15_000, 15_000),
        (2, 15_000, 15_000),
        (3, 15_000, 15_000),
        (4, 14_000, 15_000),
    ]
    assert len([it for it in plan([], [], [], q=None, named_rows=rows).items if "partition" in it["entity"]]) == 6
