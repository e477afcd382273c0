"""Quota groups in the ``quotas:`` section: what loads, the errors that name the item, and the config topic."""

import json

import pytest
import yaml

from config.dynamic import DynamicEntries, RecordError, check_record, effective
from config.errors import ConfigError
from config.loader import load_config_text
from quota.primitives.entity import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE
from quota.primitives.quota_groups import group_of_tags
from tests.harness import proxy_config

BASE = (
    yaml.safe_dump(proxy_config(19092, 9092))
    + """
quotas:
  - entity: {client-id: "<default>"}
    producer_byte_rate: 4096
"""
)
GROUPS = """
  - entity: {quota-group: etl}
    users: [alice, bob]
    producer_byte_rate: 1048576
  - entity: {quota-group: jobs}
    client-id-prefix: job-
    client-ids: [loader]
    consumer_byte_rate: 2097152
    mode: shadow
"""


def test_groups_load_into_the_client_table():
    table = load_config_text(BASE + GROUPS).quotas
    alice = table.resolve(PRODUCER_BYTE_RATE, "alice", "any")
    assert (alice.limit, group_of_tags(alice.tags), alice.shadow) == (1048576, "etl", False)
    for client_id in ("job-1", "job-2", "loader"):
        jobs = table.resolve(CONSUMER_BYTE_RATE, "u", client_id)
        assert (jobs.limit, group_of_tags(jobs.tags), jobs.shadow) == (2097152, "jobs", True)
    assert table.resolve(PRODUCER_BYTE_RATE, "carol", "job-1").limit == 4096


@pytest.mark.parametrize(
    "item, path, reason",
    [
        ("{quota-group: b}\n    users: [bob]", "quotas[3]", "user 'bob' is already in /quota-groups/etl"),
        ("{quota-group: b}\n    client-id-prefix: job-", "quotas[3]", "'job-' is already in /quota-groups/jobs"),
        ("{quota-group: etl}\n    users: [carol]", "quotas[3]", "configured more than once"),
        ("{quota-group: b, client-id: x}\n    users: [carol]", "quotas[3].entity.client-id", "cannot be combined"),
        ("{quota-group: b}\n    users: [carol]\n    client-ids: [x]", "quotas[3].users", "not both kinds"),
        ("{quota-group: b}\n    users: []", "quotas[3].users", "expected a list of names"),
        ("{quota-group: b}\n    users: [carol, carol]", "quotas[3].users[1]", "listed twice"),
        ('{quota-group: b}\n    users: ["<default>"]', "quotas[3].users[0]", "not <default>"),
        ('{quota-group: b}\n    client-id-prefix: ""', "quotas[3].client-id-prefix", "not empty"),
        ("{quota-group: b}\n    client-ids: [x]\n    producer_ids_rate: 5", "quotas[3].producer_ids_rate", "users"),
        (
            "{quota-group: b}\n    users: [carol]\n    producer_byte_rat: 5",
            "quotas[3].producer_byte_rat",
            "did you mean",
        ),
        ('{quota-group: "<default>"}\n    users: [carol]', "quotas[3].entity.quota-group", "a name for the group"),
        ("{quota-group: b}", "quotas[3]", "needs members"),
    ],
)
def test_a_bad_group_names_the_key_and_the_reason(item, path, reason):
    text = BASE + GROUPS + f"  - entity: {item}\n    consumer_byte_rate: 5\n"
    with pytest.raises(ConfigError) as caught:
        load_config_text(text)
    found = [(e.path, e.reason) for e in caught.value.each()]
    assert any(p == path and reason in r for p, r in found), found


def test_the_config_topic_keeps_the_groups_and_cannot_name_one():
    base = load_config_text(BASE + GROUPS)
    with pytest.raises(RecordError, match="YAML only"):
        check_record(base, json.dumps({"quota-group": "etl"}).encode(), b'{"producer_byte_rate": 5}')
    dynamic = DynamicEntries().with_record(base, json.dumps({"user": "alice"}).encode(), b'{"producer_byte_rate": 5}')
    table = effective(base, dynamic).quotas
    assert table.resolve(PRODUCER_BYTE_RATE, "alice", "x").limit == 5  # /users/alice beats the group
    assert group_of_tags(table.resolve(PRODUCER_BYTE_RATE, "bob", "x").tags) == "etl"


def test_a_group_of_client_ids_a_default_user_entry_overrides_is_warned_of():
    from config.quota_groups import quota_group_warnings

    assert quota_group_warnings(load_config_text(BASE + GROUPS).quotas) == []
    shadowed = BASE + GROUPS + '  - entity: {user: "<default>"}\n    consumer_byte_rate: 5\n    request_rate: 9\n'
    [warning] = quota_group_warnings(load_config_text(shadowed).quotas)
    assert warning.startswith("quotas: /quota-groups/jobs (client-ids: loader; client-id-prefix: job-): its ")
    assert "consumer_byte_rate never applies: /users/<default> sets it" in warning


def test_check_config_prints_the_groups_warning_and_exits_0(tmp_path, capsys):
    from proxy.cli.main import main

    path = tmp_path / "proxy.yaml"
    path.write_text(BASE + GROUPS + '  - entity: {user: "<default>"}\n    consumer_byte_rate: 5\n')
    assert main(["check-config", "--config", str(path)]) == 0
    out = capsys.readouterr()
    assert out.out == f"{path}: valid\n"
    assert f"kafka-quota-proxy: warning: {path}: quotas: /quota-groups/jobs" in out.err


def test_the_schema_takes_a_group_as_the_loader_does():
    import jsonschema

    from config.schema import config_schema

    validator = jsonschema.Draft202012Validator(config_schema())
    raw = yaml.safe_load(BASE + GROUPS)
    assert not list(validator.iter_errors(raw))
    raw["quotas"][1]["user"] = ["alice"]  # "users" misspelt: refused by both
    assert list(validator.iter_errors(raw))
