"""DescribeClientQuotas and AlterClientQuotas with the keys the brokers enforce (request_percentage, KIP-124), decided
on bytes: what goes to the broker, what is written to the config topic, and how the answers merge."""

from __future__ import annotations

import asyncio
import json
import logging

from config.dynamic import DynamicEntries, effective
from config.loader import parse_config
from proxy.apis import PASS, AnswerLocally, Await, ConnectionScope, ForwardRequest, LookUp, Session, plan_request
from proxy.cluster.topics import Topics
from proxy.codec.apis import ALTER_CLIENT_QUOTAS, API_VERSIONS, DESCRIBE_CLIENT_QUOTAS, LIST_OFFSETS
from proxy.codec.error_codes import CLUSTER_AUTHORIZATION_FAILED, INVALID_REQUEST, NONE, UNSUPPORTED_VERSION
from proxy.codec.header import RequestHeader, encode_request_header, frame, response_header_length
from proxy.codec.messages import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    new_request,
    new_response,
)
from proxy.codec.produce_prefix import parse_request_prefix
from proxy.enforcement.proxy_quotas import ProxyQuotas
from proxy.ops.audit import audited
from quota.primitives.clock import ManualClock
from quota.primitives.decision import Throttle

BOTH = {DESCRIBE_CLIENT_QUOTAS: (0, 1), ALTER_CLIENT_QUOTAS: (0, 1)}


class FakeDynamic:
    """What the handlers read of proxy.observers.dynamic_config.DynamicConfig, the config topic a list."""

    def __init__(self, base) -> None:
        self.base, self.current, self.entries = base, base, DynamicEntries()
        self.written: list = []
        self.headers: list = []  # each record's audit header (proxy.ops.audit)

    async def write(self, records, principal: str, address: str, via: str) -> None:
        """As DynamicConfig.write: each record audited (logged, and given its header) with what it replaces."""
        records = audited(self.entries.entries, records, principal, address, via)
        self.written += [(key, value) for key, value, _ in records]
        self.headers += [dict(headers) for _, _, headers in records]
        for key, value, _ in records:
            self.entries = self.entries.with_record(self.base, key, value)
        self.current = effective(self.base, self.entries)

    def write_failure(self, exc: BaseException) -> str:
        return f"the config topic could not be written: {exc}"


def setup(quotas=()):
    config = parse_config(
        {
            "upstream": {"bootstrap_servers": ["b:1"]},
            "listeners": [{"name": "L", "bind": "h:2"}],
            "dynamic_config": {},
            "admin_principals": ["User:admin"],
            "quotas": list(quotas),
        }
    )
    dynamic = FakeDynamic(config)
    return ConnectionScope(None, Topics(), ProxyQuotas(config).home, client_quotas=dynamic), dynamic


def admin(versions=BOTH) -> Session:
    session = Session("L", "10.0.0.1", user="admin")
    session.broker_lookup_versions = versions
    return session


def decide(scope, session, api_key, version, **fields):
    msg = new_request(api_key, version, **fields)
    buf = bytearray(
        frame(encode_request_header(api_key, version, 7, "ops-tool") + encode_request(api_key, version, msg))
    )
    header = parse_request_prefix(buf, 1 << 30, scope.quotas.reads_produce_prefix)
    return plan_request(scope, session, header).decide(memoryview(buf)[header.header_length :])


def run(outcome):
    """An Await outcome's work, run to its end, then its answer (as the connection does)."""
    if not isinstance(outcome, Await):
        return outcome
    asyncio.run(outcome.start())
    return outcome.then(None)


def local(api_key: int, version: int, outcome: AnswerLocally):
    body = outcome.frame[4:]
    return decode_response(api_key, version, body[response_header_length(api_key, version, outcome.frame) - 4 :])


def entry(ops, **parts) -> dict:
    return {
        "entity": [{"entity_type": k.replace("_", "-"), "entity_name": v} for k, v in parts.items()],
        "ops": [{"key": k, "value": float(v or 0), "remove": v is None} for k, v in ops.items()],
    }


def broker_answer(lookup: LookUp, entries, throttle_time_ms=0, version=1):
    """The broker's AlterClientQuotas answer to the proxy's request ``lookup``: ``entries`` [(entity, error)]."""
    response = new_response(
        ALTER_CLIENT_QUOTAS,
        version,
        throttle_time_ms=throttle_time_ms,
        entries=[
            {"error_code": code, "error_message": message, "entity": entity} for entity, (code, message) in entries
        ],
    )
    return lookup.then(memoryview(encode_response(ALTER_CLIENT_QUOTAS, version, response)))


def test_request_percentage_goes_to_the_broker_first_and_the_proxys_keys_are_written_once_it_accepted():
    """One entry with both kinds of key: the broker gets an AlterClientQuotas holding only request_percentage (with
    the client's client id, so its own request quota counts it as the client's), and the proxy writes only
    producer_byte_rate, once the broker accepted; the broker's throttle goes back in the answer."""
    scope, dynamic = setup()
    outcome = decide(
        scope,
        admin(),
        ALTER_CLIENT_QUOTAS,
        1,
        validate_only=False,
        entries=[
            entry({"producer_byte_rate": 1000, "request_percentage": 50}, client_id="etl"),
            entry({"consumer_byte_rate": 2000}, user="bob"),
        ],
    )
    assert isinstance(outcome, LookUp) and outcome.api_key == ALTER_CLIENT_QUOTAS and outcome.client_id == "ops-tool"
    sent = decode_request(ALTER_CLIENT_QUOTAS, 1, outcome.body)
    assert [[(e.entity_type, e.entity_name) for e in x.entity] for x in sent.entries] == [[("client-id", "etl")]]
    assert [(o.key, o.value, o.remove) for o in sent.entries[0].ops] == [("request_percentage", 50.0, False)]
    assert dynamic.written == []  # nothing before the broker answered
    answer = run(
        broker_answer(
            outcome, [([{"entity_type": "client-id", "entity_name": "etl"}], (NONE, None))], throttle_time_ms=120
        )
    )
    response = local(ALTER_CLIENT_QUOTAS, 1, answer)
    assert [e.error_code for e in response.entries] == [NONE, NONE]
    assert response.throttle_time_ms == 120
    written = {key: json.loads(value) for key, value in dynamic.written}
    assert list(written.values()) == [{"producer_byte_rate": 1000}, {"consumer_byte_rate": 2000}]


def test_an_entry_the_broker_refuses_keeps_its_error_and_none_of_its_keys_is_written():
    scope, dynamic = setup()
    outcome = decide(
        scope,
        admin(),
        ALTER_CLIENT_QUOTAS,
        1,
        validate_only=False,
        entries=[
            entry({"producer_byte_rate": 1000, "request_percentage": 50}, user="alice"),
            entry({"producer_byte_rate": 3000}, client_id="etl"),
        ],
    )
    alice = [{"entity_type": "user", "entity_name": "alice"}]
    answer = run(broker_answer(outcome, [(alice, (CLUSTER_AUTHORIZATION_FAILED, "denied by the broker"))]))
    response = local(ALTER_CLIENT_QUOTAS, 1, answer)
    assert [(e.error_code, e.error_message) for e in response.entries] == [
        (CLUSTER_AUTHORIZATION_FAILED, "denied by the broker"),
        (NONE, None),
    ]
    assert [json.loads(v) for _, v in dynamic.written] == [{"producer_byte_rate": 3000}]


def test_a_tenant_is_refused_before_anything_reaches_the_broker():
    scope, dynamic = setup()
    tenant = Session("L", "10.0.0.7")
    tenant.broker_lookup_versions = BOTH
    outcome = decide(
        scope,
        tenant,
        ALTER_CLIENT_QUOTAS,
        1,
        validate_only=False,
        entries=[entry({"request_percentage": 200}, client_id="me")],
    )
    assert isinstance(outcome, AnswerLocally)
    assert [e.error_code for e in local(ALTER_CLIENT_QUOTAS, 1, outcome).entries] == [CLUSTER_AUTHORIZATION_FAILED]
    assert dynamic.written == []


def test_an_entry_with_an_invalid_proxy_key_is_refused_whole_and_its_brokers_keys_are_not_sent():
    scope, dynamic = setup()
    outcome = decide(
        scope,
        admin(),
        ALTER_CLIENT_QUOTAS,
        1,
        validate_only=False,
        entries=[entry({"colour": 1, "request_percentage": 50}, client_id="etl")],
    )
    assert isinstance(outcome, AnswerLocally)
    (refused,) = local(ALTER_CLIENT_QUOTAS, 1, outcome).entries
    assert refused.error_code == INVALID_REQUEST and "colour" in refused.error_message
    assert dynamic.written == []


def test_validate_only_is_passed_on_and_nothing_is_written():
    scope, dynamic = setup()
    outcome = decide(
        scope,
        admin(),
        ALTER_CLIENT_QUOTAS,
        0,
        validate_only=True,
        entries=[entry({"producer_byte_rate": 10, "request_percentage": 50}, client_id="etl")],
    )
    assert decode_request(ALTER_CLIENT_QUOTAS, 0, outcome.body).validate_only
    answer = run(
        broker_answer(outcome, [([{"entity_type": "client-id", "entity_name": "etl"}], (NONE, None))], version=0)
    )
    assert [e.error_code for e in local(ALTER_CLIENT_QUOTAS, 0, answer).entries] == [NONE]
    assert dynamic.written == []


def test_a_broker_without_client_quotas_gets_nothing_and_the_entry_says_why():
    """Tansu lists neither API: request_percentage is refused UNSUPPORTED_VERSION naming the key; the proxy's
    own entries of the same request are written."""
    scope, dynamic = setup()
    outcome = run(
        decide(
            scope,
            admin(versions={}),
            ALTER_CLIENT_QUOTAS,
            1,
            validate_only=False,
            entries=[
                entry({"request_percentage": 50}, client_id="etl"),
                entry({"producer_byte_rate": 5}, client_id="b"),
            ],
        )
    )
    response = local(ALTER_CLIENT_QUOTAS, 1, outcome)
    assert [e.error_code for e in response.entries] == [UNSUPPORTED_VERSION, NONE]
    assert "request_percentage: enforced by the brokers" in response.entries[0].error_message
    assert [json.loads(v) for _, v in dynamic.written] == [{"producer_byte_rate": 5}]


def test_without_an_api_versions_answer_seen_the_proxy_asks_the_broker_itself_first():
    scope, _ = setup()
    session = admin(versions=None)
    outcome = decide(
        scope,
        session,
        ALTER_CLIENT_QUOTAS,
        1,
        validate_only=False,
        entries=[entry({"request_percentage": 50}, client_id="etl")],
    )
    assert isinstance(outcome, LookUp) and (outcome.api_key, outcome.api_version, outcome.body) == (
        API_VERSIONS,
        0,
        b"",
    )
    versions = new_response(
        API_VERSIONS, 0, api_keys=[{"api_key": ALTER_CLIENT_QUOTAS, "min_version": 0, "max_version": 1}]
    )
    then = outcome.then(memoryview(encode_response(API_VERSIONS, 0, versions)))
    assert isinstance(then, LookUp) and then.api_key == ALTER_CLIENT_QUOTAS
    assert session.broker_lookup_versions == {ALTER_CLIENT_QUOTAS: (0, 1)}


def test_describe_merges_the_brokers_keys_into_the_proxys_entries():
    """The broker's request_percentage values join the proxy's entries (the same entity, or one of their own); a
    byte rate the broker holds for an entity is not shown (the proxy's keys come from the proxy alone)."""
    scope, _ = setup([{"entity": {"client-id": "etl"}, "producer_byte_rate": 1000}])
    outcome = decide(scope, admin(), DESCRIBE_CLIENT_QUOTAS, 1, strict=False, components=[])
    assert isinstance(outcome, ForwardRequest) and outcome.body is None  # the client's request as it is
    broker = new_response(
        DESCRIBE_CLIENT_QUOTAS,
        1,
        throttle_time_ms=40,
        error_code=NONE,
        entries=[
            {
                "entity": [{"entity_type": "client-id", "entity_name": "etl"}],
                "values": [{"key": "request_percentage", "value": 50.0}, {"key": "producer_byte_rate", "value": 9.0}],
            },
            {
                "entity": [{"entity_type": "user", "entity_name": None}],
                "values": [{"key": "request_percentage", "value": 10.0}],
            },
        ],
    )
    merged = decode_response(
        DESCRIBE_CLIENT_QUOTAS, 1, outcome.leg.rewrite(memoryview(encode_response(DESCRIBE_CLIENT_QUOTAS, 1, broker)))
    )
    assert merged.throttle_time_ms == 40 and merged.error_code == NONE
    assert {
        tuple((e.entity_type, e.entity_name) for e in x.entity): {v.key: v.value for v in x.values}
        for x in merged.entries
    } == {
        (("client-id", "etl"),): {"producer_byte_rate": 1000.0, "request_percentage": 50.0},
        (("user", None),): {"request_percentage": 10.0},
    }
    refused = new_response(DESCRIBE_CLIENT_QUOTAS, 1, error_code=CLUSTER_AUTHORIZATION_FAILED, entries=None)
    alone = decode_response(
        DESCRIBE_CLIENT_QUOTAS, 1, outcome.leg.rewrite(memoryview(encode_response(DESCRIBE_CLIENT_QUOTAS, 1, refused)))
    )
    assert alone.error_code == NONE and len(alone.entries) == 1  # the proxy's own still answered


def test_describe_with_a_broker_without_client_quotas_answers_the_proxys_alone():
    scope, _ = setup([{"entity": {"client-id": "etl"}, "producer_byte_rate": 1000}])
    outcome = decide(scope, admin(versions={}), DESCRIBE_CLIENT_QUOTAS, 0, strict=False, components=[])
    assert isinstance(outcome, AnswerLocally)
    assert len(local(DESCRIBE_CLIENT_QUOTAS, 0, outcome).entries) == 1


def test_every_change_is_audited_in_the_log_and_in_a_header_on_its_record(caplog):
    """Issue 44: who changed a quota, from where, from what to what: a log line on kafka_quota_proxy.audit and the
    same as a JSON header on the config record."""
    scope, dynamic = setup()
    caplog.set_level(logging.INFO, logger="kafka_quota_proxy.audit")
    for rate in (1000, 2500, None):
        run(
            decide(
                scope,
                admin(),
                ALTER_CLIENT_QUOTAS,
                1,
                validate_only=False,
                entries=[entry({"producer_byte_rate": rate}, user="alice")],
            )
        )
    audits = [json.loads(h["kafka-quota-proxy-audit"]) for h in dynamic.headers]
    assert [(a["old"], a["new"]) for a in audits] == [
        (None, {"producer_byte_rate": 1000}),
        ({"producer_byte_rate": 1000}, {"producer_byte_rate": 2500}),
        ({"producer_byte_rate": 2500}, None),
    ]
    assert {(a["principal"], a["address"], a["via"]) for a in audits} == {
        ("User:admin", "10.0.0.1", "AlterClientQuotas")
    }
    lines = [r.getMessage() for r in caplog.records if r.name == "kafka_quota_proxy.audit"]
    assert lines[1] == (
        'AlterClientQuotas by User:admin from 10.0.0.1: {"user":"alice"}: {"producer_byte_rate": '
        '1000} -> {"producer_byte_rate": 2500}'
    )


def two_written_then_refused(outcome, dynamic, whys: list[str]) -> dict:
    """An AlterClientQuotas' answer: its first two entries written, the others INVALID_REQUEST each saying its
    ``whys``; what was written to the config topic, {key: value}."""
    response = local(ALTER_CLIENT_QUOTAS, 1, run(outcome))
    codes = [(e.error_code, e.error_message or "") for e in response.entries]
    assert [code for code, _ in codes] == [NONE, NONE] + [INVALID_REQUEST] * len(whys), codes
    for (_, message), why in zip(codes[2:], whys):
        assert why in message, message
    return {key: json.loads(value) for key, value in dynamic.written}


def described(scope, components, strict=True):
    """DescribeClientQuotas answered by the proxy alone (never forwarded, though the broker serves the API): its
    error code and {entity parts: {key: value}}."""
    answer = decide(scope, admin(), DESCRIBE_CLIENT_QUOTAS, 1, strict=strict, components=components)
    assert isinstance(answer, AnswerLocally), answer
    found = local(DESCRIBE_CLIENT_QUOTAS, 1, answer)
    return found.error_code, {
        tuple((e.entity_type, e.entity_name) for e in x.entity): {v.key: v.value for v in x.values}
        for x in found.entries or ()
    }


def test_topic_entities_are_altered_and_described_by_the_proxy_alone_and_put_in_force():
    """Entity type ``topic`` (a name, or null for ``<default>``): its byte rates are written to the config topic and
    described back from it, and the proxy's topic quotas take them; nothing of a topic entity reaches the broker,
    even where it serves the client-quota APIs (no broker knows the type): a broker key on a topic is refused, and a
    filter naming ``topic`` is answered locally. A bad entry is refused with the reason; the others are written."""
    scope, dynamic = setup([{"entity": {"topic": "orders"}, "consumer_byte_rate": 4000}])
    outcome = decide(
        scope,
        admin(),
        ALTER_CLIENT_QUOTAS,
        1,
        validate_only=False,
        entries=[
            entry({"producer_byte_rate": 1000}, topic="orders"),
            entry({"producer_byte_rate": 500}, topic=None),
            entry({"request_percentage": 50, "producer_byte_rate": 1}, topic="clicks"),
            entry({"producer_byte_rate": 1}, topic="no/slash"),
            entry({"controller_mutation_rate": 1}, topic="clicks"),
            entry({"producer_byte_rate": 1}, topic="clicks", user="bob"),
        ],
    )
    assert isinstance(outcome, Await)  # straight to the config topic: no LookUp, the broker is not asked
    whys = ["request_percentage: not a key of topic", "expected a topic name", "not a key", "cannot be"]
    assert two_written_then_refused(outcome, dynamic, whys) == {
        b'{"topic":"orders"}': {"producer_byte_rate": 1000},
        b'{"topic":"<default>"}': {"producer_byte_rate": 500},
    }
    quotas = ProxyQuotas(dynamic.base)
    quotas.apply(dynamic.current)
    assert quotas.topics.produce.resolve_topic("orders").limit == 1000
    assert quotas.topics.fetch.resolve_topic("orders").limit == 4000  # the YAML's key kept
    assert quotas.topics.produce.resolve_topic("clicks").limit == 500

    assert described(scope, [{"entity_type": "topic", "match_type": 0, "match": "orders"}]) == (
        NONE,
        {(("topic", "orders"),): {"producer_byte_rate": 1000.0, "consumer_byte_rate": 4000.0}},
    )
    assert described(scope, [{"entity_type": "topic", "match_type": 1, "match": None}]) == (
        NONE,
        {(("topic", None),): {"producer_byte_rate": 500.0}},
    )
    assert len(described(scope, [{"entity_type": "topic", "match_type": 2, "match": None}])[1]) == 2
    mixed = [{"entity_type": "topic", "match_type": 2, "match": None}, {"entity_type": "user", "match_type": 2}]
    assert described(scope, mixed, strict=False)[0] == INVALID_REQUEST


def test_partition_entities_are_altered_and_described_as_topic_and_partition_parts():
    """A partition entity is the entity types ``topic`` and ``partition`` together (KIP-546's types are open
    strings; the partition a name: its index, or null for ``<default>``), the proxy's alone as a topic is: written to
    the config topic, described back, put in force; a bad one refused saying why, the others written."""
    scope, dynamic = setup([{"entity": {"topic": "orders", "partition": 3}, "consumer_byte_rate": 4000}])
    outcome = decide(
        scope,
        admin(),
        ALTER_CLIENT_QUOTAS,
        1,
        validate_only=False,
        entries=[
            entry({"producer_byte_rate": 1000}, topic="orders", partition="3"),
            entry({"producer_byte_rate": 500}, topic="orders", partition=None),
            entry({"producer_byte_rate": 1}, partition="3"),
            entry({"producer_byte_rate": 1}, topic="orders", partition="x"),
            entry({"request_percentage": 5}, topic="orders", partition="1"),
            entry({"producer_byte_rate": 1}, topic=None, partition="1"),
        ],
    )
    whys = ["names its topic too", "expected a partition index", "not a key of topic", "names its topic"]
    assert two_written_then_refused(outcome, dynamic, whys) == {
        b'{"partition":"3","topic":"orders"}': {"producer_byte_rate": 1000},
        b'{"partition":"<default>","topic":"orders"}': {"producer_byte_rate": 500},
    }
    quotas = ProxyQuotas(dynamic.base)
    quotas.apply(dynamic.current)
    assert quotas.topics.partition_produce.resolve_topic(("orders", 3)).limit == 1000
    assert quotas.topics.partition_fetch.resolve_topic(("orders", 3)).limit == 4000  # the YAML's key kept
    assert quotas.topics.partition_produce.resolve_topic(("orders", 9)).limit == 500

    topic = {"entity_type": "topic", "match_type": 0, "match": "orders"}
    assert described(scope, [topic, {"entity_type": "partition", "match_type": 0, "match": "3"}]) == (
        NONE,
        {(("partition", "3"), ("topic", "orders")): {"producer_byte_rate": 1000.0, "consumer_byte_rate": 4000.0}},
    )
    assert described(scope, [topic, {"entity_type": "partition", "match_type": 1, "match": None}]) == (
        NONE,
        {(("partition", None), ("topic", "orders")): {"producer_byte_rate": 500.0}},
    )
    assert len(described(scope, [topic], strict=False)[1]) == 2  # a topic's partitions match a filter on the topic
    mixed = [topic, {"entity_type": "partition", "match_type": 2}, {"entity_type": "user", "match_type": 2}]
    assert described(scope, mixed, strict=False)[0] == INVALID_REQUEST


def test_request_rate_is_the_proxys_key_written_to_the_config_topic():
    """request_rate (the proxy's own, issue 47) is set as the byte rates are: written, not sent to the broker."""
    scope, dynamic = setup()
    outcome = run(
        decide(
            scope,
            admin(versions={}),
            ALTER_CLIENT_QUOTAS,
            1,
            validate_only=False,
            entries=[entry({"request_rate": 3}, user="alice")],
        )
    )
    assert [e.error_code for e in local(ALTER_CLIENT_QUOTAS, 1, outcome).entries] == [NONE]
    assert [json.loads(v) for _, v in dynamic.written] == [{"request_rate": 3}]
    assert dynamic.current.quotas.limit("request_rate", "alice", "any") == 3


def test_a_request_rate_altered_in_counts_at_once_and_altered_out_stops():
    """The config topic's new state applied as the proxy applies it (ProxyQuotas.apply): alice's ListOffsets leave
    the pass-through path for request rate's stage at her next request, and go back to it once the quota is removed."""
    scope, dynamic = setup()
    proxy_quotas = ProxyQuotas(dynamic.base, ManualClock(1_000_000))
    tenants = ConnectionScope(None, Topics(), proxy_quotas.home)
    alice, list_offsets = Session("L", "10.0.0.2", user="alice"), RequestHeader(1, LIST_OFFSETS, 5, 10, "c", 40)
    assert plan_request(tenants, alice, list_offsets) is PASS
    for rate in (2, None):
        ops = entry({"request_rate": rate}, user="alice")
        outcome = run(decide(scope, admin(versions={}), ALTER_CLIENT_QUOTAS, 1, validate_only=False, entries=[ops]))
        assert [e.error_code for e in local(ALTER_CLIENT_QUOTAS, 1, outcome).entries] == [NONE]
        proxy_quotas.apply(dynamic.current)
        plans = [plan_request(tenants, alice, list_offsets) for _ in range(21)]
        if rate is None:
            assert all(plan is PASS for plan in plans)
        else:  # 21 in 10 s at 2/s: (2.1 - 2) / 2 x 10 s
            assert plans[19].throttle is None and plans[20].throttle == Throttle(500, 500)


def test_group_entities_are_altered_and_described_by_the_proxy_alone_and_put_in_force():
    """Entity type ``group`` (a group id, or null for ``<default>``; Kafka's client-quota entities are user,
    client-id and ip, its groups' own configs a ConfigResource of another API): request_rate is written to the config
    topic and described back, and the proxy's group quotas take it; nothing of a group entity reaches the broker.
    A bad entry is refused with the reason, the others written; a tombstone gives the YAML's entry back."""
    scope, dynamic = setup([{"entity": {"group": "payments"}, "request_rate": 1}])
    outcome = decide(
        scope,
        admin(),
        ALTER_CLIENT_QUOTAS,
        1,
        validate_only=False,
        entries=[
            entry({"request_rate": 5}, group="payments"),
            entry({"request_rate": 2}, group=None),
            entry({"request_percentage": 50, "request_rate": 1}, group="storm"),
            entry({"producer_byte_rate": 1}, group="storm"),
            entry({"request_rate": 0}, group="storm"),
            entry({"request_rate": 1}, group="storm", client_id="etl"),
        ],
    )
    assert isinstance(outcome, Await)  # straight to the config topic: the broker is not asked
    codes = [(e.error_code, e.error_message or "") for e in local(ALTER_CLIENT_QUOTAS, 1, run(outcome)).entries]
    assert [code for code, _ in codes] == [NONE, NONE] + [INVALID_REQUEST] * 4, codes
    for (_, message), why in zip(
        codes[2:], ["request_percentage: not a key of group", "not a key of group", "> 0", "cannot be combined"]
    ):
        assert why in message, message
    written = {key: json.loads(value) for key, value in dynamic.written}
    assert written == {b'{"group":"payments"}': {"request_rate": 5}, b'{"group":"<default>"}': {"request_rate": 2}}
    clock = ManualClock(1_000_000)
    quotas = ProxyQuotas(dynamic.base, clock)
    quotas.apply(dynamic.current)
    groups = quotas.requests.groups
    assert (groups.resolve("", "payments").limit, groups.resolve("", "storm").limit) == (5, 2)
    decisions = [quotas.requests.record_group("storm") for _ in range(21)]  # 21 in 10 s at 2/s
    assert decisions[19] == decisions[0] and isinstance(decisions[20], Throttle)
    answer = decide(
        scope,
        admin(),
        DESCRIBE_CLIENT_QUOTAS,
        1,
        strict=True,
        components=[{"entity_type": "group", "match_type": 2, "match": None}],
    )
    assert isinstance(answer, AnswerLocally)  # never forwarded, though the broker serves the API
    described = {
        tuple((e.entity_type, e.entity_name) for e in x.entity): {v.key: v.value for v in x.values}
        for x in local(DESCRIBE_CLIENT_QUOTAS, 1, answer).entries
    }
    assert described == {(("group", "payments"),): {"request_rate": 5.0}, (("group", None),): {"request_rate": 2.0}}
    removed = run(
        decide(
            scope,
            admin(),
            ALTER_CLIENT_QUOTAS,
            1,
            validate_only=False,
            entries=[entry({"request_rate": None}, group="payments")],
        )
    )
    assert [e.error_code for e in local(ALTER_CLIENT_QUOTAS, 1, removed).entries] == [NONE]
    quotas.apply(dynamic.current)
    assert groups.resolve("", "payments").limit == 1  # the YAML's


def test_a_quota_group_is_refused_by_alter_client_quotas_and_a_members_own_entry_beats_it():
    """Kafka's entity model has no list of members: a quota group is YAML's; a member's own entry may be set."""
    group = {"entity": {"quota-group": "etl"}, "users": ["alice", "bob"], "producer_byte_rate": 1000}
    scope, dynamic = setup([group])
    entries = [entry({"producer_byte_rate": 5}, quota_group="etl"), entry({"producer_byte_rate": 7}, user="alice")]
    outcome = run(decide(scope, admin(versions={}), ALTER_CLIENT_QUOTAS, 1, validate_only=False, entries=entries))
    refused, accepted = local(ALTER_CLIENT_QUOTAS, 1, outcome).entries
    assert refused.error_code == INVALID_REQUEST and "YAML only" in refused.error_message
    assert accepted.error_code == NONE and len(dynamic.written) == 1
    assert dynamic.current.quotas.limit("producer_byte_rate", "alice", "x") == 7
    assert dynamic.current.quotas.limit("producer_byte_rate", "bob", "x") == 1000
