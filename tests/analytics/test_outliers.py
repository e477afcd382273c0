"""Offenders named, not rewarded (issue 48): each fleet's outliers by the median and MAD of the log of its figures,
held to the fleet's figure; --legitimate keeps a tenant's own. Plain values, figures computed by hand, no Spark."""

import math
import shlex

import pytest
import yaml

from analytics.fleet import plan
from analytics.outliers import MIN_FLEET, entity_flag, parse_entity
from analytics.recommend import Rules, entity_id, to_commands, to_yaml

EXACT = Rules(headroom=1)  # a recommendation is its p99, rounded up to two digits: figures by hand


def producers(rates, api="Produce", side="request"):
    return [
        {"user": f"user-{i}", "client_id": f"app-{i}", "api": api, f"{side}_rate_p99": rate, "intervals": 60}
        for i, rate in enumerate(rates)
    ]


# Five tenants at 100,000 B/s, two at 200,000, two at 50,000 and a hog at 10,000,000. On the log scale the median
# is ln 100,000; the deviations are 0 (x5), ln 2 (x4) and ln 100, so the MAD is ln 2 / 2, read as ln 2 (the least
# spread): the hog is ln 100 / ln 2 = 6.6 MADs above the median, the 200,000s one. It is held to the p99 of the nine
# within the fence (the lower of the two around rank 0.99 x 8 = 7.92: the eighth, 200,000).
FLEET = [100_000.0] * 5 + [200_000.0] * 2 + [50_000.0] * 2 + [10_000_000.0]
HOG = {"user": "user-9", "client-id": "app-9"}


def test_the_hog_is_named_with_its_evidence_and_held_to_the_fleets_p99():
    table = plan(producers(FLEET), [], [], EXACT, q=None)
    [hog] = table.outliers
    assert (hog.entity, hog.key, hog.figure, hog.fleet) == (HOG, "producer_byte_rate", 10**7, 10)
    assert hog.median == pytest.approx(100_000)
    assert hog.mads == pytest.approx(math.log(100) / math.log(2)) and not hog.legitimate
    assert {"entity": HOG, "producer_byte_rate": 200_000} in table.items
    said = table.basis[entity_id(HOG)]["producer_byte_rate"]
    assert said.startswith(
        "offender: 10,000,000 is 100 x its fleet's median 100,000 (10 user and client-id entities), 6.6 MADs above it "
        "on the log scale (offender past 4); held to the fleet's p99 200,000, not its own figure (--legitimate "
        "users=user-9,clients=app-9 keeps it where the use is legitimate)"
    )
    assert said.endswith("Its own figure rests on: p99 10,000,000 B/s over 60 intervals on the quota's window")
    assert all(it["producer_byte_rate"] <= 200_000 for it in table.items)  # nobody else touched
    assert "offenders: a figure more than 4 MADs above its fleet's median on the log scale" in table.notes[1]


def test_a_legitimate_tenant_keeps_its_own_figure_and_is_listed_as_kept():
    table = plan(producers(FLEET), [], [], EXACT, q=None, legitimate=[parse_entity("users=user-9")])
    [hog] = table.outliers
    assert hog.legitimate and hog.recommended == 10_000_000
    assert {"entity": HOG, "producer_byte_rate": 10_000_000} in table.items
    assert table.basis[entity_id(HOG)]["producer_byte_rate"].startswith(
        "outlier kept: 10,000,000 is 100 x its fleet's median 100,000"
    )
    assert (
        "its own figure kept: --legitimate users=user-9,clients=app-9"
        in table.basis[entity_id(HOG)]["producer_byte_rate"]
    )
    assert table.notes[1].endswith("0 in this table, 1 kept by --legitimate")


def test_flags_that_keep_nothing_are_said():
    table = plan(producers(FLEET), [], [], EXACT, None, [parse_entity("users=nobody"), parse_entity("clients=app-1")])
    assert table.notes[2:] == [
        "--legitimate users=nobody: no such entity in this log",
        "--legitimate clients=app-1: within its fleets, its own figures apply anyway",
    ]


def test_a_flat_fleet_is_read_as_spread_by_a_factor_of_two():
    """Nine IPs at 0.45 connections/s (MAD 0, read as ln 2): one at 7.0 (15.6 x, 3.96 MADs) is not named, one at
    7.5 (16.7 x, 4.06 MADs) is, and held to the p99 of the ten within the fence (the ninth of ten: 0.45)."""
    ips = [{"ip": f"192.0.2.{i}", "connection_rate_p99": 0.45, "connection_rate_max": 0.5} for i in range(9)]
    ips += [
        {"ip": "198.51.100.1", "connection_rate_p99": 7.0, "connection_rate_max": 7.0},
        {"ip": "203.0.113.66", "connection_rate_p99": 7.5, "connection_rate_max": 7.5},
    ]
    table = plan([], [], ips, EXACT, q=None)
    [storm] = table.outliers
    assert storm.entity == {"ip": "203.0.113.66"} and storm.mads == pytest.approx(math.log(7.5 / 0.45) / math.log(2))
    assert {"entity": {"ip": "203.0.113.66"}, "connection_creation_rate": 0.45} in table.items
    assert {"entity": {"ip": "198.51.100.1"}, "connection_creation_rate": 7.0} in table.items


def test_tenants_that_create_no_topics_are_the_fleets_norm():
    """Eight tenants seen, none mutating partitions (each counts at what one mutation gives: a bucket of 11 x 1 s
    holding 1, 1/11 -> 0.091), one that created a 5-partition topic once (5 / 11 -> 0.46, 2.3 MADs) and a topic
    creator (200 partitions in a burst, 20/s at p99 -> 20 x 1.5 = 30): ln(30 / 0.091) / ln 2 = 8.4 MADs. It is held
    to the p99 of the nine within the fence (0.091: nobody else mutates), so one partition in its bucket."""

    def tenant(name, **stats):
        return {"user": name, "client_id": "c", "api": "*", "mutation_rate_p99": 0.0, "mutations_max_interval": 0,
                **stats}  # fmt: skip

    rows = [tenant(f"quiet-{i}") for i in range(8)]
    rows += [
        tenant("once", mutations_max_interval=5),
        tenant("ops", mutation_rate_p99=20.0, mutations_max_interval=200),
    ]
    table = plan(rows, [], [], Rules(), q=None)
    [ops] = table.outliers
    assert (ops.entity, ops.figure, ops.limit) == ({"user": "ops", "client-id": "c"}, 30.0, 0.091)
    assert ops.median == pytest.approx(0.091)
    assert ops.mads == pytest.approx(math.log(30 / 0.091) / math.log(2))
    assert {"entity": {"user": "once", "client-id": "c"}, "controller_mutation_rate": 0.46} in table.items


def test_users_that_start_no_producer_count_and_a_churner_is_held():
    """Producer ids per user (KIP-936, per 3600 s): six users start none (each counts at 1 / 11 windows -> 0.091),
    the churner starts one a second (p99 1.0/s x 3600 s x 1.5 = 5,400): held to 0.091, one id in its bucket."""
    users = [{"user": f"u{i}", "new_pid_rate_p99": 0.0, "new_pids_max_interval": 0} for i in range(6)]
    users.append({"user": "churner", "new_pid_rate_p99": 1.0, "new_pids_max_interval": 12})
    table = plan([], users, [], Rules(), q=None)
    assert [(o.entity, o.figure, o.limit) for o in table.outliers] == [({"user": "churner"}, 5400.0, 0.091)]
    assert table.items == [{"entity": {"user": "churner"}, "producer_ids_rate": 0.091}]


def test_a_fleet_smaller_than_min_fleet_judges_nobody():
    rows = producers([100_000.0] * (MIN_FLEET - 2) + [10_000_000.0])
    assert plan(rows, [], [], EXACT, q=None).outliers == []


def test_with_fleet_defaults_outliers_are_left_out_of_the_default_and_pinned():
    """The default is p90 of the nine tenants within the fence (rank 7.2: the eighth, 200,000), not pulled by the
    hog; the hog is pinned at its limit (200,000, equal to the default: pinned all the same, so raising the default
    later does not raise it), the others at or below the default dropped."""
    table = plan(producers(FLEET), [], [], EXACT, q=90)
    assert table.items == [
        {"entity": {"user": "<default>", "client-id": "<default>"}, "producer_byte_rate": 200_000},
        {"entity": HOG, "producer_byte_rate": 200_000},
    ]
    default = table.basis[entity_id({"user": "<default>", "client-id": "<default>"})]["producer_byte_rate"]
    assert default == (
        "fleet default: p90 of the 9 user and client-id entities' recommendations (outliers left out); 0 above it "
        "keep a named entry"
    )
    assert table.basis[entity_id(HOG)]["producer_byte_rate"].startswith("offender: ")
    kept = plan(producers(FLEET), [], [], EXACT, q=90, legitimate=[parse_entity("users=user-9,clients=app-9")])
    assert {"entity": HOG, "producer_byte_rate": 10_000_000} in kept.items


def test_the_yaml_marks_the_offender_on_its_entry_and_the_commands_file_before_its_command():
    from config.quotas import parse_quota_section
    from proxy.cli.configs import build_parser, entity_from_args, parse_add

    table = plan(producers(FLEET), [], [], EXACT, q=None)
    text = to_yaml(table.items, EXACT, basis=table.basis)
    entry = text[text.index("  - entity: {user: user-9, client-id: app-9}") :].splitlines()
    assert (
        entry[1]
        == "    # offender: 10,000,000 is 100 x its fleet's median 100,000 (10 user and client-id entities), 6.6 MADs above it"
    )
    assert entry[next(i for i, line in enumerate(entry) if i and not line.startswith("    #"))] == (
        "    producer_byte_rate: 200000"
    )
    table_loaded, _ = parse_quota_section(yaml.safe_load(text)["quotas"], "quotas")
    assert table_loaded.resolve("producer_byte_rate", "user-9", "app-9").limit == 200_000
    lines = to_commands(table.items, basis=table.basis).splitlines()
    hog = next(i for i, line in enumerate(lines) if "--entity-name user-9" in line)
    block = []
    while lines[hog - 1 - len(block)].startswith("# "):
        block.insert(0, lines[hog - 1 - len(block)][2:])
    said = " ".join(block)
    assert said.startswith("producer_byte_rate: offender: 10,000,000 is 100 x its fleet's median 100,000")
    assert said.endswith("keeps it where the use is legitimate)") and "Its own figure" not in said
    args = build_parser().parse_args(shlex.split(lines[hog])[2:])
    assert entity_from_args(args.entity_type, args.entity_name) == HOG
    assert parse_add(args.add_config) == {"producer_byte_rate": 200_000}
    assert sum(line.startswith("#") for line in lines) == len(block)  # only the offender's command has a comment


@pytest.mark.parametrize(
    "text, entity",
    [
        ("users=hog", {"user": "hog"}),
        ("clients=bulk-loader", {"client-id": "bulk-loader"}),
        ("clients=etl,users=hog", {"user": "hog", "client-id": "etl"}),
        ("ips=203.0.113.66", {"ip": "203.0.113.66"}),
        ("users=CN=app,O=Example Corp,clients=a=b", {"user": "CN=app,O=Example Corp", "client-id": "a=b"}),
        ("topics=clickstream", {"topic": "clickstream"}),
        ("groups=nightly-batch", {"group": "nightly-batch"}),
    ],
)
def test_legitimate_entities_are_written_as_the_commands_file_names_them(text, entity):
    assert parse_entity(text) == entity
    assert parse_entity(entity_flag(entity)) == entity


@pytest.mark.parametrize(
    "text, says",
    [
        ("hog", "an entity is users=NAME"),
        ("user=hog", "an entity is users=NAME"),
        ("users=", "names one tenant"),
        ("users=<default>", "names one tenant"),
        ("users=a,users=b", "users= given twice"),
        ("ips=203.0.113.66,users=a", "ips= stands alone"),
        ("topics=orders,users=a", "topics= stands alone"),
        ("groups=<default>", "names one tenant"),
    ],
)
def test_a_malformed_entity_is_refused_saying_why(text, says):
    with pytest.raises(ValueError, match=says):
        parse_entity(text)


def test_the_command_line_takes_legitimate_repeatedly_and_refuses_a_bad_one(capsys):
    from analytics.cli import build_parser

    base = ["analyze", "--input", "in", "--output", "out"]
    args = build_parser().parse_args([*base, "--legitimate", "users=hog", "--legitimate", "ips=192.0.2.7"])
    assert args.legitimate == [{"user": "hog"}, {"ip": "192.0.2.7"}]
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args([*base, "--legitimate", "hog"])
    assert exited.value.code == 2 and "an entity is users=NAME" in capsys.readouterr().err


def test_the_commands_output_names_the_farthest_outliers_first_and_counts_the_rest():
    from analytics.report import SUMMARY_OUTLIERS_N, summary_lines

    ips = [{"ip": f"192.0.2.{i}", "connection_rate_p99": 0.45, "connection_rate_max": 0.5} for i in range(30)]
    ips += [
        {"ip": f"203.0.113.{i}", "connection_rate_p99": 10.0 * i, "connection_rate_max": 10.0 * i} for i in range(1, 13)
    ]
    table = plan([], [], ips, EXACT, q=None)
    assert len(table.outliers) == 12
    base = {"records": 1, "quota items": 1, "seconds": 1, "scope_lines": [], "local_dir": ".", "output_dir": "."}
    lines = summary_lines({**base, "quotas": table.items, "outliers": table.outliers})
    named = [line for line in lines if line.startswith("offender ")]
    assert len(named) == SUMMARY_OUTLIERS_N and named[0].startswith("offender ips=203.0.113.12 ")
    assert f'... {12 - SUMMARY_OUTLIERS_N} more outliers (report.html, "Offenders")' in lines
