"""The proxy-wide settings through IncrementalAlterConfigs and DescribeConfigs (BROKER "", as kafka-configs.sh
--entity-type brokers --entity-default sends them), decided on bytes: who may alter, what is checked, what is
written, and how the proxy's answers merge with the broker's for the other resources of the same request."""

from __future__ import annotations

import json

import pytest

from config.dynamic import PROXY_KEY, DynamicEntries, effective, entity_key
from config.loader import parse_config
from proxy.apis import AnswerLocally, Await, ConnectionScope, ForwardRequest, Session, plan_request
from proxy.cluster.topics import Topics
from proxy.codec.apis import DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS
from proxy.codec.error_codes import (
    CLUSTER_AUTHORIZATION_FAILED,
    INVALID_CONFIG,
    INVALID_REQUEST,
    NONE,
    UNKNOWN_SERVER_ERROR,
)
from proxy.codec.header import encode_request_header, frame, response_header_length
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

BROKER, TOPIC = 4, 2
SET, DELETE, APPEND = 0, 1, 2
KEY = entity_key(PROXY_KEY)


class FakeDynamic:
    """What the handlers read of proxy.observers.dynamic_config.DynamicConfig, with the config topic replaced by a list."""

    def __init__(self, base, fail: BaseException | None = None) -> None:
        self.base, self.current, self.entries = base, base, DynamicEntries()
        self.written: list = []
        self.authors: list = []
        self.fail = fail

    def take(self, key: bytes, value: bytes | None) -> None:
        self.entries = self.entries.with_record(self.base, key, value)
        self.current = effective(self.base, self.entries)

    async def write(self, records, principal: str, address: str, via: str) -> None:
        if self.fail is not None:
            raise self.fail
        self.written += records
        self.authors.append((principal, address, via))  # whom the writer audits them as

    def write_failure(self, exc: BaseException) -> str:
        return f"the config topic could not be written: {exc}"


def setup(admins=("User:admin",), fail=None, settings=None):
    raw = {
        "upstream": {"bootstrap_servers": ["b:1"]},
        "listeners": [{"name": "L", "bind": "h:2"}],
        "dynamic_config": {},
        "admin_principals": list(admins),
    }
    if settings:
        raw["settings"] = settings
    config = parse_config(raw)
    dynamic = FakeDynamic(config, fail)
    return ConnectionScope(None, Topics(), ProxyQuotas(config).home, client_quotas=dynamic), dynamic


ADMIN, TENANT = Session("L", "10.0.0.1", user="admin"), Session("L", "10.0.0.7")


def decide(scope, session, api_key, version, **fields):
    msg = new_request(api_key, version, **fields)
    buf = bytearray(frame(encode_request_header(api_key, version, 7, "t") + encode_request(api_key, version, msg)))
    header = parse_request_prefix(buf, 1 << 30, scope.quotas.reads_produce_prefix)
    return plan_request(scope, session, header).decide(memoryview(buf)[header.header_length :])


def run(outcome):
    """An Await outcome's work, run to its end, then its answer (as the connection does)."""
    import asyncio

    if not isinstance(outcome, Await):
        return outcome
    try:
        result = asyncio.run(outcome.start())
    except Exception as exc:  # noqa: BLE001 - handed to then(), as the connection does
        result = exc
    return outcome.then(result)


def local(api_key: int, version: int, outcome: AnswerLocally):
    body = outcome.frame[4:]
    return decode_response(api_key, version, body[response_header_length(api_key, version, outcome.frame) - 4 :])


def alter(*resources, validate_only=False, version=1) -> dict:
    return {
        "resources": [
            {
                "resource_type": t,
                "resource_name": n,
                "configs": [{"name": k, "config_operation": op, "value": v} for k, op, v in configs],
            }
            for t, n, configs in resources
        ],
        "validate_only": validate_only,
    }


def codes(response) -> list:
    return [(r.resource_type, r.resource_name, r.error_code) for r in response.responses]


@pytest.mark.parametrize("version", [0, 1])
def test_an_admin_sets_and_deletes_proxy_settings_written_as_the_proxy_wide_record(version):
    scope, dynamic = setup()
    dynamic.take(KEY, b'{"quota.mode": "shadow"}')
    outcome = run(
        decide(
            scope,
            ADMIN,
            INCREMENTAL_ALTER_CONFIGS,
            version,
            **alter(
                (BROKER, "", [("max.connections", SET, "100"), ("max.connections.per.ip.overrides", SET, "10.0.0.9:0")])
            ),
        )
    )
    assert codes(local(INCREMENTAL_ALTER_CONFIGS, version, outcome)) == [(BROKER, "", NONE)]
    # merged with what the record already held
    assert dynamic.written == [
        (
            KEY,
            json.dumps(
                {"max.connections": 100, "max.connections.per.ip.overrides": "10.0.0.9:0", "quota.mode": "shadow"},
                sort_keys=True,
            ).encode(),
        )
    ]
    assert dynamic.authors == [("User:admin", "10.0.0.1", "IncrementalAlterConfigs")]
    dynamic.take(*dynamic.written[-1])
    run(
        decide(
            scope,
            ADMIN,
            INCREMENTAL_ALTER_CONFIGS,
            version,
            **alter(
                (
                    BROKER,
                    "",
                    [
                        ("quota.mode", DELETE, None),
                        ("max.connections.per.ip.overrides", DELETE, None),
                        ("max.connections", DELETE, None),
                    ],
                )
            ),
        )
    )
    assert dynamic.written[-1] == (KEY, None)  # nothing left: a tombstone


def test_a_principal_not_in_admin_principals_is_refused_and_nothing_is_written():
    scope, dynamic = setup()
    outcome = decide(
        scope, TENANT, INCREMENTAL_ALTER_CONFIGS, 1, **alter((BROKER, "", [("quota.mode", SET, "shadow")]))
    )
    response = local(INCREMENTAL_ALTER_CONFIGS, 1, outcome)
    assert codes(response) == [(BROKER, "", CLUSTER_AUTHORIZATION_FAILED)]
    assert "User:ANONYMOUS" in response.responses[0].error_message
    assert "admin_principals" in response.responses[0].error_message
    assert dynamic.written == []


@pytest.mark.parametrize(
    "configs,code,reason",
    [
        ([("max.connections", SET, "0")], INVALID_CONFIG, "max.connections"),
        ([("max.connections", SET, "many")], INVALID_CONFIG, "expected a number"),
        ([("quota.mode", SET, "maybe")], INVALID_CONFIG, "enforce or shadow"),
        ([("max.connections.per.ip.overrides", SET, "nope:1")], INVALID_CONFIG, "not an IP address"),
        ([("max.connections", APPEND, "1")], INVALID_REQUEST, "only SET (0) and DELETE (1)"),
        ([("max.connections", SET, "1"), ("max.connections", SET, "2")], INVALID_REQUEST, "more than once"),
        (
            [("max.connections", SET, "1"), ("log.retention.ms", SET, "5")],
            INVALID_REQUEST,
            "log.retention.ms: not proxy",
        ),
    ],
)
def test_bad_changes_are_refused_with_a_message_and_nothing_is_written(configs, code, reason):
    scope, dynamic = setup()
    response = local(
        INCREMENTAL_ALTER_CONFIGS,
        1,
        run(decide(scope, ADMIN, INCREMENTAL_ALTER_CONFIGS, 1, **alter((BROKER, "", configs)))),
    )
    assert codes(response) == [(BROKER, "", code)]
    assert reason in response.responses[0].error_message
    assert dynamic.written == []


def test_validate_only_checks_and_writes_nothing():
    scope, dynamic = setup()
    outcome = decide(
        scope,
        ADMIN,
        INCREMENTAL_ALTER_CONFIGS,
        1,
        validate_only=True,
        **{k: v for k, v in alter((BROKER, "", [("max.connections", SET, "5")])).items() if k != "validate_only"},
    )
    assert isinstance(outcome, AnswerLocally)
    assert codes(local(INCREMENTAL_ALTER_CONFIGS, 1, outcome)) == [(BROKER, "", NONE)]
    assert dynamic.written == []


def test_a_failed_write_is_unknown_server_error_with_the_reason():
    scope, dynamic = setup(fail=TimeoutError("no broker"))
    response = local(
        INCREMENTAL_ALTER_CONFIGS,
        1,
        run(decide(scope, ADMIN, INCREMENTAL_ALTER_CONFIGS, 1, **alter((BROKER, "", [("max.connections", SET, "5")])))),
    )
    assert codes(response) == [(BROKER, "", UNKNOWN_SERVER_ERROR)]
    assert "no broker" in response.responses[0].error_message


def test_the_other_resources_go_to_the_broker_and_the_answers_merge_in_request_order():
    scope, dynamic = setup()
    outcome = run(
        decide(
            scope,
            ADMIN,
            INCREMENTAL_ALTER_CONFIGS,
            1,
            **alter(
                (TOPIC, "orders", [("retention.ms", SET, "1000")]),
                (BROKER, "", [("max.connections", SET, "50")]),
                (BROKER, "1", [("log.cleaner.threads", SET, "2")]),
            ),
        )
    )
    assert isinstance(outcome, ForwardRequest)
    forwarded = decode_request(INCREMENTAL_ALTER_CONFIGS, 1, outcome.body)
    assert [(r.resource_type, r.resource_name) for r in forwarded.resources] == [(TOPIC, "orders"), (BROKER, "1")]
    broker = new_response(
        INCREMENTAL_ALTER_CONFIGS,
        1,
        throttle_time_ms=3,
        responses=[
            {"resource_type": TOPIC, "resource_name": "orders", "error_code": NONE},
            {"resource_type": BROKER, "resource_name": "1", "error_code": INVALID_REQUEST, "error_message": "no"},
        ],
    )
    merged = decode_response(
        INCREMENTAL_ALTER_CONFIGS,
        1,
        outcome.leg.rewrite(memoryview(encode_response(INCREMENTAL_ALTER_CONFIGS, 1, broker))),
    )
    assert codes(merged) == [(TOPIC, "orders", NONE), (BROKER, "", NONE), (BROKER, "1", INVALID_REQUEST)]
    assert merged.throttle_time_ms == 3
    assert [k for k, _ in dynamic.written] == [KEY]


def test_a_tenant_is_refused_its_proxy_resource_while_its_topic_resource_goes_to_the_broker():
    scope, dynamic = setup()
    outcome = decide(
        scope,
        TENANT,
        INCREMENTAL_ALTER_CONFIGS,
        0,
        **alter((BROKER, "", [("quota.mode", SET, "shadow")]), (TOPIC, "orders", [("retention.ms", SET, "1000")])),
    )
    assert isinstance(outcome, ForwardRequest)
    broker = new_response(
        INCREMENTAL_ALTER_CONFIGS,
        0,
        responses=[{"resource_type": TOPIC, "resource_name": "orders", "error_code": NONE}],
    )
    merged = decode_response(
        INCREMENTAL_ALTER_CONFIGS,
        0,
        outcome.leg.rewrite(memoryview(encode_response(INCREMENTAL_ALTER_CONFIGS, 0, broker))),
    )
    assert codes(merged) == [(BROKER, "", CLUSTER_AUTHORIZATION_FAILED), (TOPIC, "orders", NONE)]
    assert dynamic.written == []


def test_broker_resources_without_proxy_settings_pass_untouched_and_without_a_dynamic_config_everything_does():
    scope, _ = setup()
    outcome = decide(
        scope, TENANT, INCREMENTAL_ALTER_CONFIGS, 1, **alter((BROKER, "", [("log.retention.ms", SET, "5")]))
    )
    assert isinstance(outcome, ForwardRequest) and outcome.body is None and outcome.leg.rewrite is None
    scope = ConnectionScope(None, Topics(), scope.quotas)  # no dynamic config: the broker's API, as before
    msg = new_request(INCREMENTAL_ALTER_CONFIGS, 1, **alter((BROKER, "", [("max.connections", SET, "5")])))
    buf = frame(
        encode_request_header(INCREMENTAL_ALTER_CONFIGS, 1, 7, "t") + encode_request(INCREMENTAL_ALTER_CONFIGS, 1, msg)
    )
    header = parse_request_prefix(bytearray(buf), 1 << 30, scope.quotas.reads_produce_prefix)
    assert plan_request(scope, TENANT, header).decide is None


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_describe_answers_proxy_settings_from_the_effective_configuration_with_their_source(version):
    scope, dynamic = setup(settings={"max.connections.per.ip": 20})
    dynamic.take(KEY, b'{"max.connections": 100, "max.connections.per.ip.overrides": "10.0.0.9:0"}')
    outcome = decide(
        scope,
        TENANT,
        DESCRIBE_CONFIGS,
        version,
        resources=[
            {
                "resource_type": BROKER,
                "resource_name": "",
                "configuration_keys": [
                    "max.connections",
                    "max.connections.per.ip",
                    "max.connections.per.ip.overrides",
                    "quota.mode",
                ],
            }
        ],
        **({"include_documentation": True} if version >= 3 else {}),
    )
    response = local(DESCRIBE_CONFIGS, version, outcome)
    [result] = response.results
    assert (result.resource_type, result.resource_name, result.error_code) == (BROKER, "", NONE)
    values = {c.name: c.value for c in result.configs}
    assert values == {
        "max.connections": "100",
        "max.connections.per.ip": "20",
        "max.connections.per.ip.overrides": "10.0.0.9:0",
        "quota.mode": "enforce",
    }
    if version >= 1:
        assert {c.name: c.config_source for c in result.configs} == {
            "max.connections": 3,
            "max.connections.per.ip": 4,
            "max.connections.per.ip.overrides": 3,
            "quota.mode": 5,
        }  # dynamic default, static (the YAML), default
    else:
        assert [c.is_default for c in result.configs] == [False, False, False, True]


def test_describe_of_every_broker_config_goes_to_the_broker_and_other_resources_merge():
    scope, _ = setup()
    everything = decide(
        scope,
        TENANT,
        DESCRIBE_CONFIGS,
        4,
        resources=[{"resource_type": BROKER, "resource_name": "", "configuration_keys": None}],
    )
    assert isinstance(everything, ForwardRequest) and everything.body is None
    outcome = decide(
        scope,
        TENANT,
        DESCRIBE_CONFIGS,
        4,
        resources=[
            {"resource_type": TOPIC, "resource_name": "orders", "configuration_keys": None},
            {"resource_type": BROKER, "resource_name": "", "configuration_keys": ["quota.mode"]},
        ],
    )
    broker = new_response(
        DESCRIBE_CONFIGS,
        4,
        results=[
            {
                "resource_type": TOPIC,
                "resource_name": "orders",
                "error_code": NONE,
                "configs": [{"name": "retention.ms", "value": "1000"}],
            }
        ],
    )
    merged = decode_response(
        DESCRIBE_CONFIGS, 4, outcome.leg.rewrite(memoryview(encode_response(DESCRIBE_CONFIGS, 4, broker)))
    )
    assert [(r.resource_name, [c.name for c in r.configs]) for r in merged.results] == [
        ("orders", ["retention.ms"]),
        ("", ["quota.mode"]),
    ]
