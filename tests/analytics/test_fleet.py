"""The fleet default (issue 48): a <default> entry per entity type and quota key, named entries only for the
tenants above it; the table the proxy loads, and the commands the configs command takes. Plain values, no Spark."""

import shlex

import yaml

from analytics.fleet import MIN_FLEET, percentile, with_defaults
from analytics.recommend import Rules, bases, build_quotas, entity_id, to_commands, to_yaml


def pairs(rates):
    return [
        {"user": f"user-{i}", "client_id": f"app-{i}", "api": "Produce", "request_rate_p99": rate, "intervals": 60}
        for i, rate in enumerate(rates)
    ]


IPS = [
    {"ip": f"192.0.2.{i}", "connection_rate_p99": 0.3, "connection_rate_max": 0.5, "intervals": 60} for i in range(9)
]
STORM = {"ip": "203.0.113.66", "connection_rate_p99": 100.0, "connection_rate_max": 120.0, "intervals": 60}


def test_percentile_interpolates_between_ranks_as_spark_does():
    assert percentile([1, 2, 3, 4, 5], 50) == 3
    assert percentile(list(range(101)), 99) == 99
    assert percentile([10] * 9 + [1000], 90) == 10  # rank 8.1: the ninth tenant's, not a tenth of the way to 1000


def test_a_default_per_entity_type_and_key_and_only_the_tenants_above_it_named():
    # nine tenants at 10,000 B/s, one hog at 1,000,000: p90 of the recommendations (15,000 x 9, 1,500,000) is the
    # ninth's, 15,000; the hog alone is above it (likewise the storm IP among ten)
    rows = pairs([10_000.0] * 9 + [1_000_000.0])
    items = build_quotas(rows, [], [*IPS, STORM])
    fleet, said = with_defaults(items, bases(rows, [], [*IPS, STORM]))
    assert fleet == [
        {"entity": {"user": "<default>", "client-id": "<default>"}, "producer_byte_rate": 15_000},
        {"entity": {"ip": "<default>"}, "connection_creation_rate": 0.45},
        {"entity": {"user": "user-9", "client-id": "app-9"}, "producer_byte_rate": 1_500_000},
        {"entity": {"ip": "203.0.113.66"}, "connection_creation_rate": 150.0},
    ]
    default = said[entity_id({"user": "<default>", "client-id": "<default>"})]["producer_byte_rate"]
    assert default.startswith("fleet default: p90 of the 10 user and client-id entities' recommendations")
    assert default.endswith("1 above it keep a named entry")
    assert said[entity_id({"user": "user-9", "client-id": "app-9"})]["producer_byte_rate"].endswith(
        "; above the fleet default 15,000"
    )


def test_fewer_tenants_than_a_fleet_keep_their_own_entries():
    rows = pairs([10_000.0] * (MIN_FLEET - 1))
    items = build_quotas(rows, [], [])
    assert with_defaults(items, bases(rows))[0] == items


def test_the_proxy_loads_the_table_and_resolves_a_tenant_without_an_entry_to_the_default():
    from config.quotas import parse_quota_section

    rows = pairs([10_000.0] * 9 + [1_000_000.0])
    fetch = [{**row, "api": "Fetch", "request_rate_p99": 0.0, "response_rate_p99": 10_000.0} for row in rows]
    fleet, said = with_defaults(build_quotas(rows + fetch, [], [*IPS, STORM]), bases(rows + fetch, [], [*IPS, STORM]))
    assert {"entity": {"user": "user-9", "client-id": "app-9"}, "producer_byte_rate": 1_500_000} in fleet
    table, ip_rates = parse_quota_section(yaml.safe_load(to_yaml(fleet, Rules(), basis=said))["quotas"], "quotas")
    assert table.resolve("producer_byte_rate", "user-3", "app-3").limit == 15_000
    assert table.resolve("producer_byte_rate", "someone-new", "x").limit == 15_000
    assert table.resolve("producer_byte_rate", "user-9", "app-9").limit == 1_500_000
    assert table.resolve("consumer_byte_rate", "user-9", "app-9").limit == 15_000  # its own at the default: dropped
    assert ip_rates == {"<default>": 0.45, "203.0.113.66": 150.0}


def test_the_defaults_commands_are_kafka_configs_entity_default():
    from proxy.cli.configs import build_parser, entity_from_args, parse_add

    fleet = [
        {"entity": {"user": "<default>", "client-id": "<default>"}, "producer_byte_rate": 15_000},
        {"entity": {"ip": "<default>"}, "connection_creation_rate": 0.45},
    ]
    lines = to_commands(fleet).splitlines()
    assert lines[0].endswith(
        "--entity-type users --entity-default --entity-type clients --entity-default "
        "--add-config producer_byte_rate=15000"
    )
    for item, line in zip(fleet, lines):
        args = build_parser().parse_args(shlex.split(line)[2:])
        assert entity_from_args(args.entity_type, args.entity_name) == item["entity"]
        assert parse_add(args.add_config) == {k: v for k, v in item.items() if k != "entity"}


def test_ip_addresses_are_the_default_at_p99_and_the_few_that_stand_out():
    """Twenty addresses at 0.15 to 3.0 connections/s (x 1.5: 0.23 to 4.5): p90 would name the two largest; the ip
    default is at p99 (rank 18.81 of 19, the lower: the nineteenth, 2.85 x 1.5 -> 4.3), so only the largest keeps an entry. Users
    and clients stay at p90."""
    ips = [
        {"ip": f"192.0.2.{i}", "connection_rate_p99": 0.15 * (i + 1), "connection_rate_max": 0.15 * (i + 1)}
        for i in range(20)
    ]
    fleet, said = with_defaults(build_quotas([], [], ips), bases([], [], ips))
    assert fleet == [
        {"entity": {"ip": "<default>"}, "connection_creation_rate": 4.3},
        {"entity": {"ip": "192.0.2.19"}, "connection_creation_rate": 4.5},
    ]
    assert said[entity_id({"ip": "<default>"})]["connection_creation_rate"].startswith("fleet default: p99 of the 20")
    assert (
        with_defaults(build_quotas([], [], ips), bases([], [], ips), 100)[0][0]["connection_creation_rate"] == 4.5
    )  # a higher q wins


def test_the_fleet_default_is_the_default_and_no_fleet_default_opts_out(capsys):
    import pytest

    from analytics.cli import build_parser

    base = ["analyze", "--input", "in", "--output", "out"]
    assert build_parser().parse_args(base).fleet_default == 90
    assert build_parser().parse_args([*base, "--fleet-default"]).fleet_default == 90
    assert build_parser().parse_args([*base, "--fleet-default", "95"]).fleet_default == 95
    assert build_parser().parse_args([*base, "--no-fleet-default"]).fleet_default is None
    with pytest.raises(SystemExit):
        build_parser().parse_args([*base, "--no-fleet-default", "--fleet-default", "95"])
    assert "not allowed with argument" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        build_parser().parse_args(["analyze", "--help"])
    assert "--no-fleet-default" in capsys.readouterr().out


def test_a_tenant_left_to_the_default_is_still_said_with_its_own_figure(tmp_path):
    """Eight tenants at 10,000 B/s (15,000), two at 20,000 (30,000) and one a quota of 8,000 B/s held, its demand
    8,000 (12,000): the default is p90 of the eleven (rank 9 of 10: 30,000), so nine have no entry; the report lists
    each with its own figure and what it rests on, the held one's demand among them."""
    from analytics.fleet import plan
    from analytics.report import write_report

    held = {"held_intervals": 50, "quota_rate": 8_000.0, "held_share": 0.5, "request_demand": 8_000.0}
    rows = pairs([10_000.0] * 8 + [20_000.0] * 2 + [7_900.0])
    rows[-1].update(held)
    table = plan(rows, [], [], q=90)
    assert table.items == [{"entity": {"user": "<default>", "client-id": "<default>"}, "producer_byte_rate": 30_000}]
    under = {r["entity"]["user"]: r for r in table.under_default}
    assert len(under) == 11 and under["user-0"]["own"] == 15_000 and under["user-0"]["default"] == 30_000
    assert under["user-10"]["own"] == 12_000
    assert under["user-10"]["rests_on"].startswith("constrained by the current quota 8,000 B/s (held 50% of the time")
    write_report(str(tmp_path / "report.html"), {}, {}, {}, table.items, under_default=table.under_default)
    html = (tmp_path / "report.html").read_text()
    assert "Under a fleet default (11 keys)" in html and "constrained by the current quota 8,000 B/s" in html
