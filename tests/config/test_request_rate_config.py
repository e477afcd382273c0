"""Request-rate quotas' configuration: the APIs counted (and those never counted, refused by name), request_rate on
client entities, and group entities with the errors that name the entry."""

import pytest

from config.dynamic import RecordError, check_record, describe, effective, entity_key
from config.dynamic_state import Batch, DynamicState
from config.errors import ConfigError
from config.loader import load_config_text
from config.request_rate import COUNTABLE_APIS, DEFAULT_APIS, NEVER_COUNTED, api_keys
from config.settings import DEFAULT_SETTINGS, parse_settings
from proxy.codec.apis import API_NAMES
from proxy.ops.about import quota_counts
from quota.primitives.entity import DEFAULT, REQUEST_RATE

BASE = """
upstream:
  bootstrap_servers: ["127.0.0.1:9092"]
listeners:
  - name: PLAINTEXT
    bind: "127.0.0.1:19092"
"""
APIS = "quota.request.rate.apis"


def test_the_api_names_are_kafkas_and_the_default_is_the_safe_set():
    """config/ may not import the codec: its table of names is held to the codec's here."""
    assert all(API_NAMES[key] == name for name, key in COUNTABLE_APIS.items())
    never = {name: key for key, name in API_NAMES.items() if name in NEVER_COUNTED}
    assert set(never) == set(NEVER_COUNTED) and not set(never.values()) & set(COUNTABLE_APIS.values())
    assert DEFAULT_SETTINGS.quota_request_rate_apis == DEFAULT_APIS
    assert api_keys(DEFAULT_APIS) == {
        11,
        14,
        8,
        3,
        10,
        2,
    }  # JoinGroup SyncGroup OffsetCommit Metadata FindCoord. ListOffsets


@pytest.mark.parametrize("raw", ["JoinGroup, Metadata ,JoinGroup", ["JoinGroup", "Metadata"]])
def test_the_apis_are_a_comma_list_as_kafka_writes_it_or_a_yaml_list(raw):
    assert parse_settings({APIS: raw}, "settings").quota_request_rate_apis == ("JoinGroup", "Metadata")
    assert parse_settings({APIS: ""}, "settings").quota_request_rate_apis == ()  # nothing counted


@pytest.mark.parametrize("name", ["Heartbeat", "LeaveGroup", "ConsumerGroupHeartbeat", "ApiVersions"])
def test_the_apis_a_member_needs_to_stay_or_leave_can_never_be_listed(name):
    with pytest.raises(ConfigError) as err:
        parse_settings({APIS: f"JoinGroup,{name}"}, "settings")
    assert f"settings.{APIS}: {name} can never be counted by request_rate" in str(err.value)


def test_an_unknown_api_is_refused_with_the_known_ones():
    with pytest.raises(ConfigError, match=r"'JoinGroups' is not an API request_rate counts \(known: Produce, Fetch"):
        parse_settings({APIS: ["JoinGroups"]}, "settings")
    with pytest.raises(ConfigError, match="expected API names"):
        parse_settings({APIS: 11}, "settings")


def test_request_rate_on_client_entities_and_group_entities_load_side_by_side():
    config = load_config_text(
        BASE
        + """
quotas:
  - {entity: {user: "<default>"}, request_rate: 50}
  - {entity: {user: alice, client-id: etl}, request_rate: 5, producer_byte_rate: 1024}
  - {entity: {group: payments}, request_rate: 2}
  - {entity: {group: "<default>"}, request_rate: 10, mode: shadow}
"""
    )
    assert (
        config.quotas.limit(REQUEST_RATE, "bob", "x") == 50 and config.quotas.limit(REQUEST_RATE, "alice", "etl") == 5
    )
    groups = config.group_quotas
    assert groups.resolve(REQUEST_RATE, "", "payments").limit == 2
    default = groups.resolve(REQUEST_RATE, "", "other")
    assert (default.limit, default.shadow, default.entity.path) == (10, True, f"/groups/{DEFAULT}")
    assert quota_counts(config) == {"group request_rate": 2, "producer_byte_rate": 1, "request_rate": 2}


@pytest.mark.parametrize(
    "entry,message",
    [
        ("{entity: {group: g, user: alice}, request_rate: 1}", "quotas[0].entity.user: a group entity cannot be"),
        ("{entity: {group: ''}, request_rate: 1}", "quotas[0].entity.group: expected a group id"),
        ("{entity: {group: g}, producer_byte_rate: 1}", "quotas[0].producer_byte_rate: not a key of group entities"),
        ("{entity: {group: g}, request_rate: 0}", "quotas[0].request_rate: expected a rate in requests per second"),
        ("{entity: {group: g}, request_rate: yes}", "quotas[0].request_rate: expected a rate"),
        ("{entity: {group: g}, mode: loud, request_rate: 1}", "quotas[0].mode: expected enforce or shadow"),
        ("{entity: {group: g}}", "quotas[0]: no quota key given"),
        ("{entity: {user: u}, request_rate: -1}", "quotas[0].request_rate: expected a rate in requests per second"),
    ],
)
def test_bad_entries_name_the_entry(entry, message):
    with pytest.raises(ConfigError) as err:
        load_config_text(BASE + f"quotas:\n  - {entry}\n")
    assert message in str(err.value)


def test_a_group_given_twice_is_refused_and_request_rates_go_with_workers():
    twice = BASE + "quotas:\n  - {entity: {group: a}, request_rate: 1}\n  - {entity: {group: a}, request_rate: 2}\n"
    with pytest.raises(ConfigError, match=r"quotas\[1\].entity.group: a is configured more than once"):
        load_config_text(twice)
    workers = load_config_text(  # shared by the workers (proxy.workers.link)
        BASE
        + "settings:\n  workers: 2\nquotas:\n  - {entity: {user: u}, request_rate: 1}\n"
        + "  - {entity: {group: g}, request_rate: 2}\n"
    )
    assert workers.quotas.resolve(REQUEST_RATE, "u", "any").limit == 1
    assert workers.group_quotas.resolve(REQUEST_RATE, "", "g").limit == 2


def test_the_config_topic_takes_request_rate_for_clients_and_groups():
    base = load_config_text(BASE + "quotas:\n  - {entity: {group: payments}, request_rate: 2, mode: shadow}\n")
    assert check_record(base, entity_key({"client-id": "etl"}), b'{"request_rate": 3}').quota.quotas == {
        REQUEST_RATE: 3
    }
    record = check_record(base, entity_key({"group": "payments"}), b'{"request_rate": 5}')
    assert record.group == "payments" and record.group_quota.quotas == {REQUEST_RATE: 5}
    assert record.group_quota.shadow  # the YAML's mode stays: the record's keys are laid over its entry
    assert check_record(base, entity_key({"group": "payments"}), None).group_quota.quotas == {REQUEST_RATE: 2}
    assert check_record(base, entity_key({"group": "other"}), None).group_quota is None  # nothing configures it


@pytest.mark.parametrize(
    "entity,value,message",
    [
        ({"group": "g", "user": "u"}, b'{"request_rate": 1}', "a group entity cannot be combined with user"),
        ({"group": "g", "client-id": "c"}, b'{"request_rate": 1}', "a group entity cannot be combined"),
        ({"group": "g"}, b'{"producer_byte_rate": 1}', "producer_byte_rate: not a key of group entities"),
        ({"group": "g"}, b'{"request_rate": 0}', "expected a rate in requests per second > 0"),
        ({"group": "g"}, b'{"request_rate": "5"}', "expected a rate in requests per second > 0"),
        ({"group": "g"}, b'{"request_rate": 1, "mode": "loud"}', "expected enforce or shadow"),
        ({"group": "g"}, b"{}", "no quota key given"),
        ({"group": ""}, b'{"request_rate": 1}', 'group must be a name or "<default>"'),
    ],
)
def test_a_bad_group_record_names_the_reason_and_keeps_the_last_good_configuration(entity, value, message):
    base = load_config_text(BASE)
    good = Batch(DynamicState.initial(base))
    good.add(entity_key({"group": "g"}), b'{"request_rate": 4}')
    state = good.built()
    batch = Batch(state)
    with pytest.raises(RecordError, match=message):
        batch.add(entity_key(entity), value)
    assert batch.built() is state and state.config.group_quotas.resolve(REQUEST_RATE, "", "g").limit == 4


def test_group_records_change_the_group_table_by_what_they_change():
    """A batch of group records gives what building the configuration whole gives; a record for another entity
    keeps the group table itself (the request-rate sensors are not looked at again)."""
    base = load_config_text(BASE + "quotas:\n  - {entity: {group: payments}, request_rate: 2}\n")
    state = DynamicState.initial(base)
    batch = Batch(state)
    for group, values in (
        ("payments", b'{"request_rate": 6}'),
        (DEFAULT, b'{"request_rate": 1}'),
        ("gone", b'{"request_rate": 9}'),
        ("gone", None),
    ):
        batch.add(entity_key({"group": group}), values)
    new = batch.built()
    whole = effective(base, new.entries)
    for group, limit in (("payments", 6), ("gone", 1), ("any", 1)):
        assert new.config.group_quotas.resolve(REQUEST_RATE, "", group).limit == limit
        assert whole.group_quotas.resolve(REQUEST_RATE, "", group).limit == limit
    assert base.group_quotas.resolve(REQUEST_RATE, "", "payments").limit == 2  # the state in force is untouched
    assert ({"group": "payments"}, {REQUEST_RATE: 6}) in describe(new.config)
    other = Batch(new)
    other.add(entity_key({"user": "u"}), b'{"request_rate": 3}')
    assert other.built().config.group_quotas is new.config.group_quotas
    tombstones = Batch(new)
    tombstones.add(entity_key({"group": "payments"}), None)
    tombstones.add(entity_key({"group": DEFAULT}), None)
    assert tombstones.built().config.group_quotas.resolve(REQUEST_RATE, "", "payments").limit == 2  # the YAML's
