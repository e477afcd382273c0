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
