"""Quota groups in the plan, as plain Python: the group's demand from its members' (a member held by the group's
quota hides what it wanted; the group's figure must not), its entry as the proxy loads it, and its members kept
out of entries of their own. The Spark statistics are compared with this in tests/analytics/test_named_stats.py."""

import pytest
import yaml

from analytics import demand, fleet, groups
from analytics.recommend import Rules, to_commands, to_yaml
from config.quota_groups import parse_client_quotas, quota_group_warnings

# (time, interval_s, bytes, requests, throttles, held_ms)
FREE = [(10.0 * k, 10.0, 2_000_000, 20, 0, 0.0) for k in range(1, 7)]  # 200 kB/s, never held
# held 5 s of every 10 by the group's quota: 10 requests of 100 kB, 5 throttled: 500 kB in 5 s free = 100 kB/s
HELD = [(10.0 * k, 10.0, 1_000_000, 10, 5, 5_000.0) for k in range(1, 7)]


def test_the_groups_demand_is_its_members_demand_added_up_per_interval():
    assert demand.summed_demand_rate([FREE, HELD], 250_000) == pytest.approx(300_000)
    assert demand.summed_demand_rate([FREE], 250_000) is None  # nobody held: the rates are the demand, none to estimate


def test_an_interval_a_member_was_held_through_does_not_tell_nor_the_one_after_it():
    through = list(HELD)
    through[2] = (30.0, 10.0, 0, 0, 0, 10_000.0)  # held through the third interval
    through[3] = (40.0, 10.0, 9_000_000, 10, 0, 1_000.0)  # its queue sent after it: 1 MB/s is no demand
    through[5] = (60.0, 10.0, 3_000_000, 10, 5, 5_000.0)  # 300 kB/s of its own
    assert demand.summed_demand_rate([FREE, through], 250_000) == pytest.approx((3 * 300_000 + 500_000) / 4)


def test_a_group_of_users_when_every_client_of_its_users_is_in_it_else_of_client_ids():
    tenants = [("alice", "etl", "team"), ("alice", "ui", "team"), ("bob", "etl-2", "team"), ("carol", "x", None)]
    assert groups.members("team", tenants) == {"users": ["alice", "bob"]}
    # a client id group: ANONYMOUS also runs clients outside it
    tenants = [("ANONYMOUS", "job-1", "jobs"), ("ANONYMOUS", "job-2", "jobs"), ("ANONYMOUS", "web", None)]
    assert groups.members("jobs", tenants) == {"client-ids": ["job-1", "job-2"]}


def group_row(name, p99, **held):
    return {"user": name, "client_id": None, "api": "Produce", "intervals": 60, "request_rate_p99": p99, **held}


def tenant_rows(names, rate):
    return [{"user": u, "client_id": c, "api": "Produce", "request_rate_p99": rate, "intervals": 60} for u, c in names]


def test_the_group_is_recommended_its_members_sum_and_the_proxy_loads_the_entry_with_its_members():
    """Two members at 400 kB/s each would be named above the fleet's default one by one; in their group they get no
    entry of their own (it would come before the group) and the group gets the sum's figure. The YAML loads, and
    the proxy resolves the members to the group's one budget."""
    fleet_names = [(f"user-{i}", f"app-{i}") for i in range(8)]
    members = [("alice", "etl"), ("bob", "loader")]
    rows = tenant_rows(fleet_names, 10_000.0) + tenant_rows(members, 400_000.0)
    tenants = [(u, c, None) for u, c in fleet_names] + [(u, c, "etl-team") for u, c in members]
    table = fleet.plan(rows, [], [], Rules(), group_rows=[group_row("etl-team", 800_000.0)], tenants=tenants)
    named = [it for it in table.items if it["entity"].get("user") in ("alice", "bob")]
    assert named == []
    entry = {"entity": {"quota-group": "etl-team"}, "users": ["alice", "bob"], "producer_byte_rate": 1_200_000}
    assert entry in table.items
    text = to_yaml(table.items, Rules(), basis=table.basis)
    assert "its members added up per interval: p99 800,000 B/s" in text
    client_table, _ = parse_client_quotas(yaml.safe_load(text)["quotas"], "quotas")
    resolved = client_table.resolve("producer_byte_rate", "bob", "loader")
    assert resolved.limit == 1_200_000 and resolved.entity.path == "/quota-groups/etl-team"
    assert client_table.resolve("producer_byte_rate", "user-3", "app-3").limit == 15_000
    assert "quota groups are set in the file only" in to_commands(table.items)


def test_a_held_group_is_recommended_on_its_estimated_demand():
    row = group_row(
        "etl-team", 1_000_000.0, held_intervals=50, quota_rate=1_000_000.0, held_share=0.6, request_demand=2_000_000.0
    )
    ((entity, key, value, text),) = groups.recommendations([row], Rules())
    assert (entity, key, value) == ({"quota-group": "etl-team"}, "producer_byte_rate", 3_000_000)
    assert "constrained by the current quota 1,000,000 B/s" in text and "estimated demand 2,000,000 B/s" in text


def test_a_group_of_client_ids_is_not_left_behind_a_default_with_a_user():
    """The planner's fleet default is {user: <default>, client-id: <default>}, which comes before a group of client
    ids: that key's default is written as {client-id: <default>}, so the group applies (check-config would warn)."""
    fleet_names = [("ANONYMOUS", f"app-{i}") for i in range(8)]
    members = [("ANONYMOUS", "job-1"), ("ANONYMOUS", "job-2")]
    rows = tenant_rows(fleet_names, 10_000.0) + tenant_rows(members, 400_000.0)
    tenants = [(u, c, None) for u, c in fleet_names] + [(u, c, "jobs") for u, c in members]
    table = fleet.plan(rows, [], [], Rules(), group_rows=[group_row("jobs", 800_000.0)], tenants=tenants)
    assert {"entity": {"client-id": "<default>"}, "producer_byte_rate": 15_000} in table.items
    assert not [it for it in table.items if it["entity"] == {"user": "<default>", "client-id": "<default>"}]
    client_table, _ = parse_client_quotas(yaml.safe_load(to_yaml(table.items, Rules()))["quotas"], "quotas")
    assert quota_group_warnings(client_table) == []
    assert client_table.resolve("producer_byte_rate", "ANONYMOUS", "job-2").limit == 1_200_000
    assert client_table.resolve("producer_byte_rate", "ANONYMOUS", "app-1").limit == 15_000
    assert any("{client-id: <default>}" in note for note in table.notes)


def test_the_change_set_takes_a_members_own_entry_away_and_says_the_group_goes_in_the_file():
    """alice has producer_byte_rate of her own in force, which comes before her group: the change set removes it
    (saying why), adds the group's entry as a file edit, and leaves her request_rate (the group does not set it)."""
    from analytics import changeset
    from analytics.in_force import from_file
    from analytics.recommend import entity_id

    alice = {"user": "alice"}
    in_force = from_file("proxy.yaml", [{"entity": alice, "producer_byte_rate": 500_000, "request_rate": 5.0}])
    group = {"entity": {"quota-group": "etl-team"}, "users": ["alice", "bob"], "producer_byte_rate": 1_200_000}
    seen = [(entity_id(alice), "producer_byte_rate"), (entity_id(alice), "request_rate")]
    changes = changeset.plan(in_force, [group], {}, seen)
    assert [(c.action, c.entity, c.key) for c in changes.changes] == [
        ("add", {"quota-group": "etl-team"}, "producer_byte_rate"),
        ("remove", alice, "producer_byte_rate"),
    ]
    assert "a member of {quota-group: etl-team}" in changes.changes[1].rests_on
    commands = changeset.to_commands(changes)
    assert "edit proxy.yaml: the entry of {quota-group: etl-team} to producer_byte_rate: 1200000" in commands
    assert "--entity-type users --entity-name alice" not in commands  # set in the file: edited there, too
    assert [kept[:2] for kept in changes.kept] == [(alice, "request_rate")]


def bucket_row(name, mutations=0, new_pids=0, pid_rate=0.0):
    """A group's ``*`` row: ``mutations`` partitions created in one interval, ``new_pids`` new producer ids in one."""
    return {
        "user": name,
        "client_id": None,
        "api": "*",
        "intervals": 60,
        "mutation_rate_p99": 0.0,
        "mutations_max_interval": mutations,
        "new_pid_rate_p99": pid_rate,
        "new_pids_max_interval": new_pids,
    }


def request_row(name, p99, **held):
    none = {"client_id": None, "topic": None, "partition": None, "group": None}
    return {"user": name, **none, "api": "request_rate", "key": "request_rate", "intervals": 60} | {
        "rate_p99": p99,
        "burst_max": p99,
        **held,
    }


def test_a_groups_buckets_and_request_rate_are_recommended_in_its_one_entry_and_taken_from_its_members():
    """Every key a group shares: 55 partitions created at once (KIP-599's bucket of 11 s holds them at 5/s), one new
    producer id in 10 s (p99 0.1/s x 3600 x 1.5 = 540 an hour) and 4 counted requests/s x 1.5; the members keep no
    entry of their own for those keys (alice's {user: alice} producer_ids_rate included), and the proxy resolves
    each key of each member to the group's one budget. A group of client ids gets no producer_ids_rate (KIP-936 keys
    it by user; the proxy refuses it there)."""
    members = [("alice", "etl"), ("bob", "loader")]
    tenants = [(u, c, "etl-team") for u, c in members] + [("ANONYMOUS", "job-1", "jobs")]
    rows = [
        bucket_row("etl-team", mutations=55, new_pids=1, pid_rate=0.1),
        request_row("etl-team", 4.0),
        bucket_row("jobs", mutations=11, new_pids=1, pid_rate=0.1),
    ]
    own = [{"user": u, "client_id": c, "api": "*", "mutation_rate_p99": 0.5, "intervals": 60} for u, c in members]
    users = [{"user": "alice", "new_pid_rate_p99": 0.1, "new_pids_max_interval": 1, "intervals": 60}]
    request_rows = [
        {"user": u, "client_id": c, "topic": None, "partition": None, "group": None, "key": "request_rate"}
        | {"intervals": 60, "rate_p99": 2.0, "burst_max": 2.0}
        for u, c in members
    ]
    table = fleet.plan(own, users, [], Rules(), None, (), request_rows, rows, tenants)
    assert not [it for it in table.items if it["entity"].get("user") in ("alice", "bob")]
    team = {"users": ["alice", "bob"], "controller_mutation_rate": 5.0, "producer_ids_rate": 540.0, "request_rate": 6.0}
    assert {"entity": {"quota-group": "etl-team"}, **team} in table.items
    assert {"entity": {"quota-group": "jobs"}, "client-ids": ["job-1"], "controller_mutation_rate": 1.0} in table.items
    text = to_yaml(table.items, Rules(), basis=table.basis)
    assert "its members added up per interval: p99 4 Metadata" not in text  # the APIs request_rate counts, in full
    assert "its members added up per interval: p99 4 JoinGroup, SyncGroup" in text
    client_table, _ = parse_client_quotas(yaml.safe_load(text)["quotas"], "quotas")
    for key in ("controller_mutation_rate", "producer_ids_rate", "request_rate"):
        resolved = client_table.resolve(key, "bob", "loader")
        assert resolved.limit == team[key] and resolved.entity.path == "/quota-groups/etl-team", key


def test_a_group_far_above_the_groups_is_an_offender_held_to_their_figure_unless_legitimate():
    """Six groups' request rates, one 50 x the others: named among the groups and held to their p99 (no
    <default> takes a group: the proxy has no quota-group default, so every group keeps its entry);
    --legitimate quota-groups=storm keeps its own figure."""
    names = [f"team-{i}" for i in range(5)] + ["storm"]
    tenants = [(f"u-{n}", "app", n) for n in names]
    rows = [request_row(n, 100.0 if n == "storm" else 2.0 + i / 10) for i, n in enumerate(names)]
    table = fleet.plan([], [], [], Rules(), group_rows=rows, tenants=tenants)
    (storm,) = table.outliers
    assert (storm.entity, storm.key, storm.figure, storm.limit) == ({"quota-group": "storm"}, "request_rate", 150, 3.5)
    entry = next(it for it in table.items if it["entity"] == {"quota-group": "storm"})
    assert entry["request_rate"] == 3.5 and len([it for it in table.items if "quota-group" in it["entity"]]) == 6
    assert table.basis[(("quota-group", "storm"),)]["request_rate"].startswith(
        "offender: 150 is 44 x its fleet's median 3.4 (6 quota-group"
    )
    from analytics.outliers import parse_entity

    kept = fleet.plan(
        [], [], [], Rules(), legitimate=[parse_entity("quota-groups=storm")], group_rows=rows, tenants=tenants
    )
    assert next(it for it in kept.items if it["entity"] == {"quota-group": "storm"})["request_rate"] == 150.0


def test_a_held_groups_request_rate_rests_on_its_members_summed_demand():
    """Its members were held sending the requests request_rate counts: the group's figure rests on the demand their
    holds hid (analytics.summed_demand, the Python twin demand.summed_demand_rate), not on what they were let
    through."""
    row = request_row("etl-team", 5.0, held_intervals=30, demand=12.0)
    ((entity, key, value, text),) = groups.recommendations([row], Rules())
    assert (entity, key, value) == ({"quota-group": "etl-team"}, "request_rate", 18.0)
    assert "held by a quota in 30 of 60 intervals" in text and "estimated demand 12 requests/s" in text


def member_row(user, client_id, rate, log_group=None, quota_rate=None, intervals=30):
    """A replay unit's member: ``rate`` B/s of Produce in 10 s intervals, never held."""
    series = [
        {"time": 10.0 * k, "interval_s": 10.0, "bytes": rate * 10.0, "requests": 10, "held_requests": 0, "held_ms": 0.0}
        for k in range(1, intervals + 1)
    ]
    return {"user": user, "client_id": client_id, "quota_rate": quota_rate, "log_group": log_group, "series": series}


def test_the_replay_holds_a_groups_members_to_its_one_budget():
    """Two members at 250,000 B/s each: under today's own entries of 400,000 each neither is held; under the
    candidate's group of 400,000 their 500,000 together are, as the proxy's one sensor holds them; a member outside
    the group (carol) is replayed alone, as before."""
    from analytics import replay

    today = [{"entity": {"user": u}, "producer_byte_rate": 400_000} for u in ("alice", "bob", "carol")]
    group = {"entity": {"quota-group": "team"}, "users": ["alice", "bob"], "producer_byte_rate": 400_000}
    candidate = [group, {"entity": {"user": "carol"}, "producer_byte_rate": 400_000}]
    tenants = [("alice", "etl", None), ("bob", "etl", None), ("carol", "x", None)]
    assert replay.unit_rows(candidate, today, tenants) == [  # the group sets no consumer_byte_rate
        ("alice", "etl", "Produce", "team", None),
        ("bob", "etl", "Produce", "team", None),
    ]
    units = [
        {
            "api": "Produce",
            "quota_group": "team",
            "members": [member_row("alice", "etl", 2.5e5), member_row("bob", "etl", 2.5e5)],
        },
        {"api": "Produce", "quota_group": None, "members": [member_row("carol", "x", 2.5e5)]},
    ]
    rows = [dict(zip(replay.RESULT, r)) for r in replay.replay_tenants(units, candidate, 11, 1, 5.0, today)]
    team, carol = rows
    assert (team["quota_group"], replay.members(team)) == ("team", [("alice", "etl"), ("bob", "etl")])
    assert (team["quota_today"], team["quota_candidate"], team["today_held_s"]) == (400_000, 400_000, 0)
    assert team["candidate_held_s"] > 0.9 * 300  # over its quota a queueing client has a queue: held nearly always
    assert (carol["user"], carol["quota_group"], carol["today_held_s"], carol["candidate_held_s"]) == (
        "carol",
        None,
        0,
        0,
    )


def test_without_a_table_in_force_today_is_the_group_the_log_names_at_the_quota_it_logged():
    """The log names the members' group and the group's quota it held them to: today they are one budget at it."""
    from analytics import replay

    members = [member_row("alice", "etl", 2.5e5, "team", 400_000.0), member_row("bob", "etl", 2.5e5, "team")]
    unit = {"api": "Produce", "quota_group": "team", "members": members}
    assert replay.unit_rows([], None, [("alice", "etl", "team")])[0] == ("alice", "etl", "Produce", "team", "team")
    (row,) = [dict(zip(replay.RESULT, r)) for r in replay.replay_tenants([unit], [], 11, 1, 5.0)]
    assert (row["quota_today"], row["quota_candidate"], row["candidate_held_s"]) == (400_000, None, 0)
    assert row["today_held_s"] > 0.9 * 300
