"""The recommendation rule on plain values: rounding, headroom, the KIP-599 burst term, YAML and commands."""

import pytest
import yaml

from analytics.recommend import Rules, build_quotas, round_up, to_command, to_commands, to_yaml


@pytest.mark.parametrize(
    "x, expected",
    [
        (148_500, 150_000),
        (150_000, 150_000),
        (150_001, 160_000),
        (5.4000000000000004, 5.4),
        (0.9134, 0.92),
        (0.0123, 0.013),
        (0, 0),
        (999.5, 1000),
        (7, 7),
    ],
)
def test_round_up_to_two_significant_digits(x, expected):
    assert round_up(x) == expected


def entity(user, client_id, api, **values):
    row = {
        "user": user,
        "client_id": client_id,
        "api": api,
        "request_rate_p99": 0.0,
        "response_rate_p99": 0.0,
        "mutation_rate_p99": 0.0,
        "mutations_max_interval": 0,
        "mutations_p99_interval": 0.0,
    }
    return {**row, **values}


def test_byte_rates_are_p99_times_headroom_rounded_up_as_integers():
    items = build_quotas(
        [
            entity("alice", "etl", "Produce", request_rate_p99=99_000.0),
            entity("alice", "etl", "Fetch", response_rate_p99=198_000.0),
        ],
        [],
        [],
    )
    assert items == [
        {"entity": {"user": "alice", "client-id": "etl"}, "producer_byte_rate": 150_000, "consumer_byte_rate": 300_000}
    ]
    assert isinstance(items[0]["producer_byte_rate"], int)
    items = build_quotas([entity("alice", "etl", "Produce", request_rate_p99=99_000.0)], [], [], Rules(headroom=2))
    assert items[0]["producer_byte_rate"] == 200_000


def test_controller_mutation_rate_bucket_holds_the_largest_burst_of_one_interval():
    # p99 rate 0 (one burst in 101 intervals), 55 partitions at once: B = rate x 11 x 1 s >= 55 -> rate 5.0.
    row = entity("ops", None, "*", mutations_max_interval=55, mutations_p99_interval=0.0)
    assert build_quotas([row], [], []) == [{"entity": {"user": "ops"}, "controller_mutation_rate": 5.0}]
    # With a 2 s window the same burst needs half the rate; with burst=p99 only the p99 burst counts.
    assert build_quotas([row], [], [], Rules(controller_window_s=2))[0]["controller_mutation_rate"] == 2.5
    assert build_quotas([row], [], [], Rules(burst="p99")) == []
    # A steady rate above the burst term: p99 x headroom wins.
    row = entity("ops", None, "*", mutation_rate_p99=20.0, mutations_max_interval=200)
    assert build_quotas([row], [], [])[0]["controller_mutation_rate"] == 30.0


def test_producer_ids_rate_is_per_user_and_per_window():
    users = [{"user": "bob", "new_pid_rate_p99": 0.1, "new_pids_max_interval": 1, "new_pids_p99_interval": 1.0}]
    # 0.1 new PIDs/s x 3600 s x 1.5
    assert build_quotas([], users, []) == [{"entity": {"user": "bob"}, "producer_ids_rate": 540.0}]
    assert build_quotas([], users, [], Rules(producer_id_window_s=60))[0]["producer_ids_rate"] == 9.0


def test_unused_keys_are_left_out_and_null_names_are_absent_keys():
    rows = [
        entity(None, "no-auth", "Produce", request_rate_p99=1000.0),
        entity("idle", "c", "Produce"),
        entity(None, None, "Produce", request_rate_p99=1000.0),
    ]
    ips = [{"ip": "192.0.2.9", "connection_rate_p99": 2.0, "connection_rate_max": 3.0}]
    items = build_quotas(rows, [], ips)
    assert items == [
        {"entity": {"client-id": "no-auth"}, "producer_byte_rate": 1500},
        {"entity": {"ip": "192.0.2.9"}, "connection_creation_rate": 3.0},
    ]


def test_yaml_and_commands():
    items = [
        {"entity": {"user": "alice", "client-id": "x"}, "producer_byte_rate": 123, "consumer_byte_rate": 456},
        {"entity": {"ip": "1.2.3.4"}, "connection_creation_rate": 5.0},
        {"entity": {"user": "has space"}, "producer_ids_rate": 10.0},
    ]
    assert yaml.safe_load(to_yaml(items, Rules())) == {"quotas": items}
    assert to_command(items[0]) == (
        "kafka-quota-proxy configs --bootstrap-server HOST:PORT --alter --entity-type users --entity-name alice "
        "--entity-type clients --entity-name x --add-config "
        "producer_byte_rate=123,consumer_byte_rate=456"
    )
    assert to_command(items[1]) == (
        "kafka-quota-proxy configs --bootstrap-server HOST:PORT --alter --entity-type ips --entity-name 1.2.3.4 "
        "--add-config connection_creation_rate=5.0"
    )
    assert "--entity-name 'has space'" in to_commands(items).splitlines()[2]


def test_rules_are_checked():
    with pytest.raises(ValueError):
        Rules(headroom=0)
    with pytest.raises(ValueError):
        Rules(burst="p50")


def test_every_command_is_one_the_configs_cli_accepts():
    import shlex

    from proxy.cli.configs import build_parser, entity_from_args, parse_add

    items = [
        {"entity": {"user": "alice", "client-id": "x"}, "producer_byte_rate": 123},
        {"entity": {"ip": "1.2.3.4"}, "connection_creation_rate": 5.0},
        {"entity": {"user": "has space"}, "producer_ids_rate": 10.0},
    ]
    for item, line in zip(items, to_commands(items).splitlines()):
        argv = shlex.split(line)
        assert argv[:2] == ["kafka-quota-proxy", "configs"]
        args = build_parser().parse_args(argv[2:])
        assert args.alter and args.bootstrap_server == "HOST:PORT"
        entity = entity_from_args(args.entity_type, args.entity_name)
        assert entity == item["entity"]
        assert parse_add(args.add_config) == {k: v for k, v in item.items() if k != "entity"}


def test_each_comment_sits_with_its_own_entry_above_its_own_key():
    """Issue 48: the comments of one entry read as the next one's (written above each item, at the indent of the
    previous item's keys). Each key's comment now sits inside its own entry, just above it, at its indent; the
    burst-measured keys (controller_mutation_rate, producer_ids_rate, connection_creation_rate) have one too."""
    from analytics.recommend import bases

    rows = [
        entity("user-0", "app-0", "Produce", request_rate_p99=99_000.0, intervals=60),
        entity("ops", "topic-creator", "*", mutations_max_interval=55, mutations_p99_interval=0.0),
    ]
    users = [{"user": "churner", "new_pid_rate_p99": 2.0, "new_pids_max_interval": 40, "new_pids_p99_interval": 30.0}]
    ips = [{"ip": "203.0.113.66", "connection_rate_p99": 100.0, "connection_rate_max": 120.0, "intervals": 60}]
    items = build_quotas(rows, users, ips)
    text = to_yaml(items, Rules(), basis=bases(rows, users, ips))
    assert yaml.safe_load(text) == {"quotas": items}
    lines = text[text.index("quotas:\n") :].splitlines()[1:]
    said: dict = {}
    entity_now, comment = None, []
    for line in lines:
        if line.startswith("  - entity: "):
            assert not comment, f"a comment above an entry's first line: {comment}"
            entity_now = yaml.safe_load(line[4:])["entity"]
        elif line.startswith("    # "):
            comment.append(line[6:])
        else:
            assert line.startswith("    ") and not line.startswith("     "), line  # a key of the entry, at its indent
            key = line.strip().split(":")[0]
            said[(tuple(entity_now.items()), key)] = " ".join(comment)
            comment = []
    assert not comment and all(len(line) <= 116 for line in lines)
    assert said[((("user", "user-0"), ("client-id", "app-0")), "producer_byte_rate")].startswith("p99 99,000 B/s")
    mutations = said[((("user", "ops"), ("client-id", "topic-creator")), "controller_mutation_rate")]
    assert "burst of 55 partition mutations needs 5: the burst decides" in mutations
    assert "the bucket holds 11 samples of 1 s of the rate" in mutations
    pids = said[((("user", "churner"),), "producer_ids_rate")]  # 2/s x 3600 s x 1.5 = 10,800 against 40 / 11
    assert "p99 2 new producer ids/s x 3600 s x headroom 1.5 = 10,800" in pids and "the p99 decides" in pids
    connections = said[((("ip", "203.0.113.66"),), "connection_creation_rate")]
    assert "p99 100 connections/s over 60 intervals" in connections and "peak 120/s" in connections


def test_window_lengths_are_whole_seconds_as_the_proxy_takes_them():
    with pytest.raises(ValueError, match="quota-window-s must be a whole number"):
        Rules(quota_window_s=1.5)
    with pytest.raises(ValueError, match="controller-window-s"):
        Rules(controller_window_s=0)
