"""The change set against the table in force, on plain values with hand-computed figures; the table in force read
from a proxy configuration by the proxy's own parser."""

import shlex

import pytest
import yaml

from analytics import changeset, report
from analytics.in_force import FILE, TOPIC, InForce, from_file, quota_table, window_sources, with_described
from analytics.recommend import entity_id
from config.errors import ConfigError
from config.loader import load_settings_and_quotas
from proxy.cli.configs import build_parser, entity_args, entity_from_args
from quota.primitives.entity import QuotaEntity

D = "<default>"
ALICE = {"user": "alice", "client-id": "etl"}
BOB = {"user": "bob", "client-id": "x"}
CAROL = {"user": "carol", "client-id": "y"}
GHOST = {"user": "ghost", "client-id": "gone"}
DEFAULTS = {"user": D, "client-id": D}

IN_FORCE = [
    {"entity": ALICE, "producer_byte_rate": 1000},
    {"entity": BOB, "producer_byte_rate": 5000},
    {"entity": GHOST, "producer_byte_rate": 10},
    {"entity": DEFAULTS, "consumer_byte_rate": 100},
    {"entity": {"user": D}, "producer_byte_rate": 50},
    {"entity": {"ip": D}, "connection_creation_rate": 7},
]
RECOMMENDED = [
    {"entity": DEFAULTS, "producer_byte_rate": 2000, "consumer_byte_rate": 100},
    {"entity": {"ip": D}, "connection_creation_rate": 0.5},
    {"entity": ALICE, "producer_byte_rate": 4000},
    {"entity": CAROL, "producer_byte_rate": 3000},
]
# The log saw alice, bob, carol and dave produce; ghost did nothing in it.
SEEN = [(entity_id(e), "producer_byte_rate") for e in (ALICE, BOB, CAROL, {"user": "dave", "client-id": "z"})]


def in_force(origins=None):
    table = InForce(tuple(IN_FORCE), source="--proxy-config proxy.yaml", file="proxy.yaml")
    if origins is None:
        return from_file("proxy.yaml", IN_FORCE)
    return InForce(table.items, origins, table.source, table.file)


def lines(changes):
    return [(c.action, c.entity, c.key, c.before, c.after) for c in changes.changes]


def test_add_raise_lower_and_remove_and_nothing_else():
    """bob's 5,000 is left to the new default (2,000): removed; ghost was not in the log and keeps its 10; the
    planner's <default>/<default> producer default goes on the {user: <default>} entry in force for that key (a
    raise); the unchanged consumer default gets no line."""
    changes = changeset.plan(in_force(), RECOMMENDED, {entity_id(ALICE): {"producer_byte_rate": "p99 x 1.5"}}, SEEN)
    assert lines(changes) == [
        ("add", CAROL, "producer_byte_rate", None, 3000),
        ("raise", {"user": D}, "producer_byte_rate", 50, 2000),
        ("raise", ALICE, "producer_byte_rate", 1000, 4000),
        ("lower", {"ip": D}, "connection_creation_rate", 7, 0.5),
        ("remove", BOB, "producer_byte_rate", 5000, None),
    ]
    assert changes.counts() == "1 add, 2 raise, 1 lower, 1 remove"
    assert changes.changes[2].rests_on == "p99 x 1.5" and changes.changes[2].origin == FILE
    kept = {(tuple(e.items()), why.split(":")[0].split(" (")[0]) for e, _, _, why in changes.kept}
    assert kept == {(tuple(GHOST.items()), "not seen doing this traffic in the log")}
    after = {entity_id(it["entity"]): {k: v for k, v in it.items() if k != "entity"} for it in changes.after}
    assert after == {
        entity_id(ALICE): {"producer_byte_rate": 4000},
        entity_id(GHOST): {"producer_byte_rate": 10},
        entity_id(DEFAULTS): {"consumer_byte_rate": 100},
        entity_id({"user": D}): {"producer_byte_rate": 2000},
        entity_id({"ip": D}): {"connection_creation_rate": 0.5},
        entity_id(CAROL): {"producer_byte_rate": 3000},
    }  # bob's entry is gone: its only key was removed


def test_no_default_to_fall_back_to_means_no_removal():
    """Without a fleet default of bob's type in the recommended table, removing his quota would leave him unlimited:
    it is kept."""
    recommended = [it for it in RECOMMENDED if it["entity"] != DEFAULTS]
    changes = changeset.plan(in_force(), recommended, {}, SEEN)
    assert "remove" not in [c.action for c in changes.changes]
    assert (BOB, "producer_byte_rate", 5000, "no fleet default of its type in the recommended table") in changes.kept


def replay_row(user, client_id, today, after):
    return {"user": user, "client_id": client_id, "api": "Produce", "today_held_s": today, "candidate_held_s": after}


def test_held_seconds_beside_each_line_are_of_the_tenants_its_entry_governs():
    """Today dave resolves to {user: <default>} (50), after the change to the same entry raised (2,000); bob to his
    own entry today and that default after; carol to that default today and her own entry after. So the default's
    line counts bob, carol and dave (0 + 20 + 5 today, 3 + 0 + 2 after), bob's removal bob alone, alice's raise alice
    alone, carol's add carol alone (20 -> 0)."""
    changes = changeset.plan(in_force(), RECOMMENDED, {}, SEEN)
    rows = [
        replay_row("alice", "etl", 10.0, 1.0),
        replay_row("bob", "x", 0.0, 3.0),
        replay_row("carol", "y", 20.0, 0.0),
        replay_row("dave", "z", 5.0, 2.0),
        {**replay_row("alice", "etl", 99.0, 99.0), "api": "Fetch"},  # another key: counted nowhere here
    ]
    replayed = changeset.with_replay(changes, rows)
    held = {(c.action, tuple(c.entity.values())): (c.held_today_s, c.held_after_s, c.tenants) for c in replayed.changes}
    assert held == {
        ("raise", (D,)): (25.0, 5.0, 3),
        ("add", ("carol", "y")): (20.0, 0.0, 1),
        ("raise", ("alice", "etl")): (10.0, 1.0, 1),
        ("lower", (D,)): (None, None, 0),  # connection_creation_rate: not replayed
        ("remove", ("bob", "x")): (0.0, 3.0, 1),
    }
    assert replayed.changes[2].line() == (
        "raise user=alice client-id=etl producer_byte_rate 1,000 -> 4,000: held 10 s today, 1 s after the change "
        "(1 tenant in the log)"
    )
    assert replayed.changes[3].verdict() == "not replayed (the replay covers byte rates)"


def test_the_commands_apply_exactly_the_change_set():
    """One configs --alter per changed entity, parsed by the configs command's own parser; a key set through the
    config topic is deleted there, one set in the file is a line saying to edit the file."""
    origins = {(entity_id(it["entity"]), k): FILE for it in IN_FORCE for k in it if k != "entity"}
    changes = changeset.plan(in_force(origins), RECOMMENDED, {}, SEEN)
    text = changeset.to_commands(changes)
    commands = [line for line in text.splitlines() if not line.startswith("#")]
    parser = build_parser()
    parsed = [parser.parse_args(shlex.split(line)[2:]) for line in commands]
    altered = {tuple(entity_from_args(*entity_args(a)).items()): a for a in parsed}
    assert len(altered) == len(commands) == 4  # user default, carol, alice, ip default: nothing for bob, ghost
    default = altered[(("user", D),)]
    assert default.add_config == "producer_byte_rate=2000" and not default.delete_config
    assert altered[tuple(ALICE.items())].add_config == "producer_byte_rate=4000"
    assert altered[(("ip", D),)].add_config == "connection_creation_rate=0.5"
    assert "# edit proxy.yaml: remove producer_byte_rate from the entry of user=bob client-id=x" in text
    # the same removal, set through the config topic: a --delete-config
    origins[(entity_id(BOB), "producer_byte_rate")] = TOPIC
    text = changeset.to_commands(changeset.plan(in_force(origins), RECOMMENDED, {}, SEEN))
    [bob] = [parser.parse_args(shlex.split(line)[2:]) for line in text.splitlines() if "--entity-name bob" in line]
    assert bob.delete_config == "producer_byte_rate" and not bob.add_config


def test_the_proxys_answer_is_the_table_in_force_and_the_files_keys_are_the_files():
    described = [
        ({"client-id": "etl", "user": "alice"}, {"producer_byte_rate": 1000.0}),  # read in the planner's order
        (BOB, {"producer_byte_rate": 7000.0, "request_percentage": 50}),
    ]
    table = with_described(from_file("proxy.yaml", IN_FORCE), described, "proxy:9092")
    assert [list(it["entity"]) for it in table.items] == [["user", "client-id"]] * 2
    assert table.items == (
        {"entity": ALICE, "producer_byte_rate": 1000.0},
        {"entity": BOB, "producer_byte_rate": 7000.0},
    )
    assert table.origins == {
        (entity_id(ALICE), "producer_byte_rate"): FILE,  # the file's value
        (entity_id(BOB), "producer_byte_rate"): TOPIC,  # the file says 5,000: the config topic set 7,000
    }
    assert table.source == "DescribeClientQuotas through proxy:9092 (keys also in proxy.yaml read as set there)"


def test_the_files_quota_groups_are_in_force_beside_the_proxys_answer_which_lists_none():
    """DescribeClientQuotas lists Kafka's entities, never a quota group: the file's group is in force as the file
    sets it (with its members, so the replay resolves them to it), and the change set does not add it again."""
    group = {"entity": {"quota-group": "team"}, "users": ["alice", "bob"], "producer_byte_rate": 9000}
    file = from_file("proxy.yaml", [*IN_FORCE, group])
    table = with_described(file, [(ALICE, {"producer_byte_rate": 1000.0})], "proxy:9092")
    assert {"entity": {"quota-group": "team"}, "producer_byte_rate": 9000} in table.items
    assert table.origins[(entity_id({"quota-group": "team"}), "producer_byte_rate")] == FILE
    assert quota_table(table.replayed()).resolve("producer_byte_rate", "bob", "x").limit == 9000
    changes = changeset.plan(table, [group], {}, [])
    assert not [c for c in changes.changes if c.entity == {"quota-group": "team"}]


def test_the_window_settings_say_where_each_came_from():
    said = window_sources({"quota_window_s": "--quota-window-s"}, "p.yaml", ["quota.window.num", "max.connections"])
    assert said["quota.window.size.seconds"] == "--quota-window-s"
    assert said["quota.window.num"] == "--proxy-config p.yaml"
    assert said["controller.quota.window.num"] == "the proxy's default"
    assert window_sources({}, None, [])["quota.window.num"] == "the proxy's default"


def test_the_proxy_configs_quotas_are_read_by_the_proxys_parser(tmp_path):
    path = tmp_path / "proxy.yaml"
    config = {
        "upstream": {"bootstrap_servers": ["k:9092"], "tls": {"cafile": "/not/here.pem"}},
        "listeners": [{"name": "PLAIN", "bind": "0.0.0.0:9192"}],
        "settings": {"quota.window.num": 5},
        "quotas": [
            {"entity": ALICE, "producer_byte_rate": 1000, "mode": "shadow"},
            {"entity": {"topic": "t"}, "produce_byte_rate": 10},
            {"entity": {"ip": D}, "connection_creation_rate": 3},
        ],
    }
    path.write_text(yaml.safe_dump(config))
    settings, items = load_settings_and_quotas(str(path))
    assert settings.quota_window_num == 5
    assert [it["entity"] for it in items] == [ALICE, {"ip": D}]  # the topic entity is not the planner's
    assert from_file(str(path), items).items == (
        {"entity": ALICE, "producer_byte_rate": 1000},  # mode is not a quota
        {"entity": {"ip": D}, "connection_creation_rate": 3},
    )
    config["settings"] = {"quota.window.num": 0}
    config["quotas"] = [{"entity": ALICE, "producer_byte_rat": 1000}]
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(ConfigError) as raised:
        load_settings_and_quotas(str(path))
    said = str(raised.value)
    assert "settings.quota.window.num" in said and "quotas[0].producer_byte_rat" in said
    assert "did you mean producer_byte_rate?" in said


def test_an_offender_is_never_raised_above_what_it_has_today():
    """hog, an offender held to its fleet's figure 4,000, has 50 today through the {user: <default>} entry: it is
    pinned at 50 by a named entry (the new <default>/<default> of 2,000 would raise it); the churner's fleet figure
    0.5 is below its 0.9 in force: lowered as any other; carol, not an offender, keeps her raise to 3,000."""
    hog, churner = {"user": "hog", "client-id": "bulk"}, {"user": "churner"}
    table = [*IN_FORCE, {"entity": churner, "producer_ids_rate": 0.9}, {"entity": CAROL, "producer_byte_rate": 5}]
    recommended = [
        *RECOMMENDED,
        {"entity": hog, "producer_byte_rate": 4000},
        {"entity": churner, "producer_ids_rate": 0.5},
    ]
    offenders = [(entity_id(hog), "producer_byte_rate"), (entity_id(churner), "producer_ids_rate")]
    changes = changeset.plan(from_file("p.yaml", table), recommended, {}, SEEN, offenders)
    found = {(c.action, tuple(c.entity.values()), c.key): (c.before, c.after) for c in changes.changes}
    assert found[("add", ("hog", "bulk"), "producer_byte_rate")] == (None, 50)
    assert found[("lower", ("churner",), "producer_ids_rate")] == (0.9, 0.5)
    assert found[("raise", ("carol", "y"), "producer_byte_rate")] == (5, 3000)
    [pinned] = [c for c in changes.changes if c.entity == hog]
    assert pinned.rests_on == "offender: held at the 50 in force today, below its fleet's figure 4,000"
    # with its own entry at that value already, nothing changes for it
    pinned_today = [*table, {"entity": hog, "producer_byte_rate": 50}]
    again = changeset.plan(from_file("p.yaml", pinned_today), recommended, {}, SEEN, offenders)
    assert not [c for c in again.changes if c.entity == hog]


FLEET_SAID = "fleet default: p90 of the 6 user and client-id entities' recommendations (outliers left out)"


def test_the_fleet_default_goes_on_the_default_in_force_of_another_shape():
    """bench/planner_apply.py's case: the proxy's file holds {client-id: <default>} 400,000, the planner's fleet
    default is <default>/<default> 1,200,000. Added beside it, the planner's entry would come first for every tenant
    (Kafka's level 5 before 8), leave the one in force with no effect, and take over {client-id: legacy}'s 50,000
    (level 7) as well: the change raises the default in force instead, and legacy keeps its own entry."""
    hog, legacy = {"user": "ANONYMOUS", "client-id": "hog"}, {"client-id": "legacy"}
    table = [
        {"entity": {"client-id": D}, "producer_byte_rate": 400_000},
        {"entity": legacy, "producer_byte_rate": 50_000},
    ]
    recommended = [
        {"entity": DEFAULTS, "producer_byte_rate": 1_200_000},
        {"entity": hog, "producer_byte_rate": 1_600_000},
    ]
    changes = changeset.plan(
        from_file("proxy.yaml", table), recommended, {entity_id(DEFAULTS): {"producer_byte_rate": FLEET_SAID}}, []
    )
    assert lines(changes) == [
        ("add", hog, "producer_byte_rate", None, 1_600_000),
        ("raise", {"client-id": D}, "producer_byte_rate", 400_000, 1_200_000),
    ]
    assert changes.changes[1].rests_on == (
        f"{FLEET_SAID}; the fleet default, on the default in force (client-id=<default>) rather than a new "
        "user=<default> client-id=<default> beside it, which would leave one of the two with no effect"
    )
    after = quota_table(changes.after)
    for client, limit, entity in (
        (("app-1"), 1_200_000, {"client-id": D}),
        ("legacy", 50_000, legacy),
        ("hog", 1_600_000, hog),
    ):
        resolved = after.resolve("producer_byte_rate", "ANONYMOUS", client)
        assert (resolved.limit, resolved.entity) == (limit, QuotaEntity(entity.get("user"), entity.get("client-id")))
    # what the planner's own shape would have done to legacy
    assert quota_table([*table, *recommended]).resolve("producer_byte_rate", "ANONYMOUS", "legacy").limit == 1_200_000
    commands = [line for line in changeset.to_commands(changes).splitlines() if not line.startswith("#")]
    parsed = [build_parser().parse_args(shlex.split(line)[2:]) for line in commands]
    altered = {tuple(entity_from_args(*entity_args(a)).items()): a.add_config for a in parsed}
    assert altered == {
        (("client-id", D),): "producer_byte_rate=1200000",
        tuple(hog.items()): "producer_byte_rate=1600000",
    }


def test_a_default_in_force_before_the_planners_is_the_one_changed():
    """The planner's {client-id: <default>} would come after the <default>/<default> in force (level 8 after 5) and
    never be reached: the default in force is lowered instead; the consumer default, in the planner's own shape, is
    compared as it is."""
    table = [{"entity": DEFAULTS, "producer_byte_rate": 1_000_000, "consumer_byte_rate": 9}]
    recommended = [
        {"entity": {"client-id": D}, "producer_byte_rate": 300_000},
        {"entity": DEFAULTS, "consumer_byte_rate": 10},
    ]
    changes = changeset.plan(from_file("proxy.yaml", table), recommended, {}, [])
    assert lines(changes) == [
        ("raise", DEFAULTS, "consumer_byte_rate", 9, 10),
        ("lower", DEFAULTS, "producer_byte_rate", 1_000_000, 300_000),
    ]
    assert changes.after == ({"entity": DEFAULTS, "producer_byte_rate": 300_000, "consumer_byte_rate": 10},)


def test_a_default_no_tenant_can_reach_is_removed_and_said():
    """Two defaults in force for producer_byte_rate: {user: <default>} (50, set through the config topic) comes
    before {client-id: <default>} (70, in the file) for every tenant. The planner's default goes on the first, and
    the second, which no tenant resolves to, is removed with why (an edit of the file: the topic cannot undo it)."""
    table = [
        {"entity": {"user": D}, "producer_byte_rate": 50},
        {"entity": {"client-id": D}, "producer_byte_rate": 70},
    ]
    origins = {
        (entity_id({"user": D}), "producer_byte_rate"): TOPIC,
        (entity_id({"client-id": D}), "producer_byte_rate"): FILE,
    }
    in_force_table = InForce(tuple(table), origins, "--proxy-config proxy.yaml", "proxy.yaml")
    recommended = [{"entity": DEFAULTS, "producer_byte_rate": 2000}]
    changes = changeset.plan(in_force_table, recommended, {}, [])
    assert lines(changes) == [
        ("raise", {"user": D}, "producer_byte_rate", 50, 2000),
        ("remove", {"client-id": D}, "producer_byte_rate", 70, None),
    ]
    assert changes.changes[1].rests_on == "no effect: every tenant resolves to user=<default> first (Kafka's order)"
    assert not changes.kept and changes.after == ({"entity": {"user": D}, "producer_byte_rate": 2000},)
    text = changeset.to_commands(changes)
    assert "# edit proxy.yaml: remove producer_byte_rate from the entry of client-id=<default>" in text
    [command] = [line for line in text.splitlines() if not line.startswith("#")]
    assert "--entity-type users --entity-default --add-config producer_byte_rate=2000" in command


def stats_row(user, client_id, api, held_share, demand=None, quota=None):
    side = "request" if api == "Produce" else "response"
    return {
        "user": user,
        "client_id": client_id,
        "api": api,
        "held_share": held_share,
        "quota_rate": quota,
        f"{side}_demand": demand,
        f"{side}_rate_p99": quota,
    }


def test_a_tenant_held_nearly_all_the_time_makes_the_after_figure_a_lower_bound(tmp_path):
    """bench/planner_apply.py's hog: held 96% of the log, so free too little for its demand to show (an interval
    tells it only when the tenant was free for 10% of it): the replay ran its estimate, 1,550,000 B/s, against a
    true 3,000,000, and each line governing it says its demand is at least that and its after-figure a lower bound;
    app-2, held 99% with no estimate, is at least the quota it was held to; bulk, held 74%, the threshold's 90%
    exactly, and a Fetch held 95% (another key) add nothing to these lines but their own."""
    hog = {"user": "ANONYMOUS", "client-id": "hog"}
    table = [{"entity": {"client-id": D}, "producer_byte_rate": 400_000}]
    recommended = [
        {"entity": DEFAULTS, "producer_byte_rate": 1_200_000},
        {"entity": hog, "producer_byte_rate": 1_600_000},
    ]
    changes = changeset.plan(from_file("proxy.yaml", table), recommended, {}, [])
    rows = [
        replay_row("ANONYMOUS", "hog", 54.5, 45.6),
        replay_row("ANONYMOUS", "bulk", 44.8, 0.0),
        replay_row("ANONYMOUS", "app-1", 0.0, 0.0),
        replay_row("ANONYMOUS", "app-2", 20.0, 0.0),
        {**replay_row("ANONYMOUS", "app-1", 30.0, 30.0), "api": "Fetch"},
    ]
    stats = [
        stats_row("ANONYMOUS", "hog", "Produce", 0.96, demand=1_550_000, quota=400_000),
        stats_row("ANONYMOUS", "hog", "*", 0.99),  # the all-APIs row: not a byte rate
        stats_row("ANONYMOUS", "bulk", "Produce", 0.74, demand=560_000, quota=400_000),
        stats_row("ANONYMOUS", "app-1", "Produce", 0.9, demand=None, quota=400_000),
        stats_row("ANONYMOUS", "app-1", "Fetch", 0.95, demand=9_000_000, quota=1_000),
        stats_row("ANONYMOUS", "app-2", "Produce", 0.99, demand=None, quota=400_000),
    ]
    add_hog, raise_default = changeset.with_replay(changes, rows, stats).changes
    hog_said = (
        "user=ANONYMOUS client-id=hog held 96% of the log: its demand is at least 1,550,000 B/s, how much more the "
        "log cannot show; the after-figure is a lower bound"
    )
    at_least = "held {:.0%} of the log: its demand is at least 400,000 B/s"
    assert add_hog.line() == (
        "add user=ANONYMOUS client-id=hog producer_byte_rate 1,600,000 (not set today): held 54 s today, 46 s after "
        f"the change (1 tenant in the log); {hog_said}"
    )
    assert [u.entity["client-id"] for u in raise_default.unseen] == ["hog", "app-1", "app-2"]
    assert raise_default.verdict().startswith("held 119 s today, 46 s after the change (4 tenants in the log); ")
    assert hog_said in raise_default.verdict() and at_least.format(0.99) in raise_default.verdict()
    assert at_least.format(0.9) in raise_default.verdict() and "bulk" not in raise_default.verdict()
    # without the statistics, no tenant is said to be held nearly all the time
    assert not any(c.unseen for c in changeset.with_replay(changes, rows).changes)
    # the report's change set says it in its own column
    report.write_report(
        str(tmp_path / "report.html"), {}, {}, {}, [], changes=changeset.with_replay(changes, rows, stats)
    )
    text = (tmp_path / "report.html").read_text()
    assert "<th>demand the log cannot show</th>" in text and f"<td>{hog_said}</td>" in text


def test_a_shadow_entry_in_force_holds_nobody_today_and_is_enforced_as_its_own_change(tmp_path):
    """alice's 4,000 is in force in shadow mode and the planner recommends 4,000: not "unchanged" but enforce, its
    own kind of change, said as a comment (no configs option sets a mode); the replay holds nobody under it today,
    and holds alice (10 kB/s) under it after the change. The proxy-wide quota.mode: shadow makes every entry so."""
    from analytics import cli, replay

    table = [{"entity": ALICE, "producer_byte_rate": 4000, "mode": "shadow"}, {"entity": BOB, "producer_byte_rate": 1}]
    path = tmp_path / "proxy.yaml"
    config = {"upstream": {"bootstrap_servers": ["k:9092"]}, "listeners": [{"name": "P", "bind": "0.0.0.0:9192"}]}
    path.write_text(yaml.safe_dump({**config, "quotas": table}))
    args = cli.build_parser().parse_args(["analyze", "--input", "in", "--output", "out", "--proxy-config", str(path)])
    in_force_table = cli.in_force(args, cli.windows(args)[2])
    assert in_force_table.shadow == {entity_id(ALICE)}
    recommended = [{"entity": ALICE, "producer_byte_rate": 4000}, {"entity": BOB, "producer_byte_rate": 1}]
    changes = changeset.plan(in_force_table, recommended, {}, SEEN)
    assert lines(changes) == [("enforce", ALICE, "producer_byte_rate", 4000, 4000)]
    assert changes.after == ({"entity": ALICE, "producer_byte_rate": 4000}, {"entity": BOB, "producer_byte_rate": 1})
    text = changeset.to_commands(changes)
    assert "# enforce user=alice client-id=etl producer_byte_rate 4,000 (in shadow mode today: it holds nobody)" in text
    said = "".join(line.lstrip("# ") for line in text.splitlines())  # the comments wrapped, each line a "# "
    assert f"set mode: enforce on it in {path}".replace(" ", "") in said.replace(" ", "")
    series = [
        {"time": 10.0 * (k + 1), "interval_s": 10.0, "bytes": 100_000, "requests": 10, "held_requests": 0, "held_ms": 0}
        for k in range(30)
    ]
    rows = [{"user": "alice", "client_id": "etl", "api": "Produce", "quota_rate": None, "series": series}]
    (row,) = replay.replay_tenants(rows, list(changes.after), 11, 1, 5.0, in_force_table.replayed())
    got = dict(zip(replay.RESULT, row))
    assert got["quota_today"] is None and got["today_held_s"] == 0  # in shadow: holds nobody
    assert got["quota_candidate"] == 4000 and got["candidate_held_s"] > 200
    replayed = changeset.with_replay(changes, [got])
    assert replayed.changes[0].held_today_s == 0 and replayed.changes[0].held_after_s > 200
    path.write_text(yaml.safe_dump({**config, "settings": {"quota.mode": "shadow"}, "quotas": table[1:]}))
    assert cli.in_force(args, cli.windows(args)[2]).shadow == {entity_id(BOB)}


def test_a_partition_in_force_is_the_planners_entry_however_the_proxy_names_its_index():
    """DescribeClientQuotas gives a partition's index as a string ("3"), the planner writes the number: one entry,
    raised; a partition the log names beside its topic's partition: <default> entry is added, and that default
    (the log sums its partitions) kept as it is."""
    p3, p7, pd = ({"topic": "orders", "partition": p} for p in (3, 7, D))
    file = from_file("proxy.yaml", [{"entity": {"topic": "orders", "partition": "3"}, "producer_byte_rate": 2000}])
    described = [
        ({"partition": "3", "topic": "orders"}, {"producer_byte_rate": 2000.0}),
        (pd, {"producer_byte_rate": 900.0}),
    ]
    table = with_described(file, described, "proxy:9092")
    recommended = [{"entity": p3, "producer_byte_rate": 30_000}, {"entity": p7, "producer_byte_rate": 500}]
    seen = [(entity_id(p), "producer_byte_rate") for p in (p3, p7)]
    changes = changeset.plan(table, recommended, {}, seen)
    assert lines(changes) == [
        ("add", p7, "producer_byte_rate", None, 500),
        ("raise", p3, "producer_byte_rate", 2000, 30_000),
    ]
    assert [(e, why.split(" (")[0]) for e, _, _, why in changes.kept] == [(pd, "the planner sets no partition default")]
    assert changes.changes[1].origin == FILE
    assert (
        "--entity-type topics --entity-name orders --entity-type partitions --entity-name 3 --add-config producer_byte_rate=30000"
        in changeset.to_commands(changes)
    )
