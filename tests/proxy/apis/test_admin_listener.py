"""The admin listener on bytes: its connections are admins whatever their principal (the client-quota APIs, the
proxy-wide settings, the internal topics), nobody else's are, and every broker address it hands out is its own, so
Kafka's AdminClient never leaves it for another broker (or another sidecar's public listener)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from proxy.apis import AnswerLocally, Await, Session, plan_request
from proxy.cluster.admin_address import AdminAddress
from proxy.codec.apis import (
    ALTER_CLIENT_QUOTAS,
    DESCRIBE_CLUSTER,
    FIND_COORDINATOR,
    INCREMENTAL_ALTER_CONFIGS,
    METADATA,
)
from proxy.codec.error_codes import CLUSTER_AUTHORIZATION_FAILED
from proxy.codec.header import RequestHeader
from proxy.codec.messages import decode_response, encode_response, new_response
from proxy.enforcement.internal_topic_guard import InternalTopicGuard
from proxy.ops.audit import AUDIT_HEADER
from tests.proxy.apis import test_broker_configs as settings
from tests.proxy.apis import test_client_quotas as client_quotas

ADMIN_ADDRESS = AdminAddress("127.0.0.1", 19190)


def on_admin_listener(scope):
    return dataclasses.replace(scope, admin_address=ADMIN_ADDRESS)


def anonymous(admin_listener: bool) -> Session:
    session = Session("L", "127.0.0.1", admin_listener=admin_listener)  # PLAINTEXT: User:ANONYMOUS
    session.broker_lookup_versions = {}
    return session


def test_the_admin_decision():
    assert anonymous(True).is_admin(frozenset())
    assert not anonymous(False).is_admin(frozenset())
    assert Session("L", "10.0.0.1", user="admin").is_admin(frozenset({"User:admin"}))
    guard = InternalTopicGuard(["__kafka_quota_proxy_configs"])
    assert guard.allowed(anonymous(True))
    assert not guard.allowed(Session("L", "10.0.0.7", peer=("10.0.0.7", 5000), local=("10.0.0.1", 19092)))


@pytest.mark.parametrize("admin_listener", [True, False])
def test_a_quota_altered_on_the_admin_listener_is_written_and_refused_elsewhere(admin_listener):
    scope, dynamic = client_quotas.setup()
    scope = on_admin_listener(scope) if admin_listener else scope
    outcome = client_quotas.decide(
        scope,
        anonymous(admin_listener),
        ALTER_CLIENT_QUOTAS,
        1,
        validate_only=False,
        entries=[client_quotas.entry({"producer_byte_rate": 4096}, client_id="app")],
    )
    if admin_listener:
        assert isinstance(outcome, Await)
        client_quotas.run(outcome)
        assert [json.loads(value) for _, value in dynamic.written] == [{"producer_byte_rate": 4096}]
        (header,) = [json.loads(h[AUDIT_HEADER]) for h in dynamic.headers]  # the audit says which way it came
        assert (header["principal"], header["via"]) == ("User:ANONYMOUS", "AlterClientQuotas on admin listener L")
    else:
        assert isinstance(outcome, AnswerLocally) and dynamic.written == []
        (refused,) = client_quotas.local(ALTER_CLIENT_QUOTAS, 1, outcome).entries
        assert refused.error_code == CLUSTER_AUTHORIZATION_FAILED
        assert (
            "User:ANONYMOUS may not alter quotas" in refused.error_message and "admin listener" in refused.error_message
        )


@pytest.mark.parametrize("admin_listener", [True, False])
def test_proxy_wide_settings_on_the_admin_listener_only(admin_listener):
    scope, dynamic = settings.setup()
    scope = on_admin_listener(scope) if admin_listener else scope
    request = settings.alter((settings.BROKER, "", [("max.connections", settings.SET, "100")]))
    outcome = settings.run(settings.decide(scope, anonymous(admin_listener), INCREMENTAL_ALTER_CONFIGS, 1, **request))
    (code,) = [c for _, _, c in settings.codes(settings.local(INCREMENTAL_ALTER_CONFIGS, 1, outcome))]
    assert (code, bool(dynamic.written)) == ((0, True) if admin_listener else (CLUSTER_AUTHORIZATION_FAILED, False))


BROKERS = [(1, "kafka-1.svc", 19092), (2, "kafka-2.svc", 19092), (10, "kafka-10.svc", 19092)]
ANSWERS = {
    METADATA: (
        12,
        lambda: {"brokers": [{"node_id": n, "host": h, "port": p} for n, h, p in BROKERS]},
        lambda msg: msg.brokers,
    ),
    DESCRIBE_CLUSTER: (
        0,
        lambda: {"brokers": [{"broker_id": n, "host": h, "port": p} for n, h, p in BROKERS]},
        lambda msg: msg.brokers,
    ),
    FIND_COORDINATOR: (
        4,
        lambda: {"coordinators": [{"key": "g", "node_id": 2, "host": "kafka-2.svc", "port": 19092}]},
        lambda msg: msg.coordinators,
    ),
}


@pytest.mark.parametrize("api_key", sorted(ANSWERS))
@pytest.mark.parametrize("admin_listener", [True, False])
def test_every_broker_address_the_admin_listener_hands_out_is_its_own(api_key, admin_listener):
    version, fields, nodes = ANSWERS[api_key]
    scope, _ = client_quotas.setup()
    scope = on_admin_listener(scope) if admin_listener else scope
    plan = plan_request(scope, anonymous(admin_listener), RequestHeader(100, api_key, version, 1, "adminclient", 20))
    body = encode_response(api_key, version, new_response(api_key, version, **fields()))
    if plan.leg.observe is not None:
        plan.leg.observe(memoryview(body))
    if not admin_listener:  # a sidecar's public listener: the broker advertises the sidecars, nothing is rewritten
        assert plan.leg.rewrite is None
        return
    rewritten = nodes(decode_response(api_key, version, memoryview(plan.leg.rewrite(memoryview(body)))))
    assert {(n.host, n.port) for n in rewritten} == {("127.0.0.1", 19190)}
    assert len(rewritten) == (1 if api_key == FIND_COORDINATOR else len(BROKERS))  # every node id kept
