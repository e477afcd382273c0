"""The internal-topic guard on bytes: which requests it looks at, what it forwards, what it answers, how it merges.

Tenants (principals not in admin_principals, connections that are not the proxy's own) get TOPIC_AUTHORIZATION_FAILED
for every item naming an internal topic; the other items of the same request go to the broker, and the broker's
answer comes back with the refusals merged in.
"""

from __future__ import annotations

import uuid

import pytest

from config.loader import parse_config
from proxy.apis import AnswerLocally, ConnectionScope, ForwardRequest, LookUp, Session
from proxy.cluster.own_clients import OwnConnections, track_aiokafka
from proxy.cluster.topics import Topics
from proxy.codec.apis import (
    ADD_PARTITIONS_TO_TXN,
    CREATE_TOPICS,
    DELETE_RECORDS,
    DELETE_TOPICS,
    INCREMENTAL_ALTER_CONFIGS,
    METADATA,
    PRODUCE,
)
from proxy.codec.error_codes import NONE, TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_ID
from proxy.codec.messages import decode_request, decode_response, encode_response, new_request, new_response
from proxy.enforcement.internal_topic_guard import InternalTopicGuard
from proxy.enforcement.proxy_quotas import ProxyQuotas
from tests.proxy.internal_topic_plans import TENANT, NobodyIsOwn, plan_and_body, produce

CONFIG_TOPIC = "__kafka_quota_proxy_configs"
VOLUME_TOPIC = "__kafka_quota_proxy_volume_usage"


def scope_for(admins=("User:admin",)) -> ConnectionScope:
    config = parse_config(
        {
            "upstream": {"bootstrap_servers": ["b:1"]},
            "listeners": [{"name": "L", "bind": "h:2"}],
            # OPEN: without it nothing is known yet and the fail-safe PAUSE holds every produce
            "volume_usage": {"missing_data_action": "OPEN"},
            "dynamic_config": {},
            "admin_principals": list(admins),
        }
    )
    quotas = ProxyQuotas(config)
    guard = InternalTopicGuard(quotas.internal_topics, config.admin_principals, own=NobodyIsOwn())
    return ConnectionScope(None, Topics(), quotas.home, guard=guard)


def test_a_mixed_produce_forwards_the_normal_topic_and_refuses_the_internal_one():
    scope = scope_for()
    header, plan, body = plan_and_body(scope, TENANT, PRODUCE, 9, produce("orders", CONFIG_TOPIC, "audit"))
    outcome = plan.decide(body)
    assert isinstance(outcome, ForwardRequest)
    forwarded = decode_request(PRODUCE, 9, outcome.body)
    assert [t.name for t in forwarded.topic_data] == ["orders", "audit"]
    broker = new_response(
        PRODUCE,
        9,
        responses=[
            {"name": n, "partition_responses": [{"index": i, "error_code": NONE, "base_offset": 42} for i in (0, 1)]}
            for n in ("orders", "audit")
        ],
    )
    merged = decode_response(PRODUCE, 9, outcome.leg.rewrite(memoryview(encode_response(PRODUCE, 9, broker))))
    codes = {(t.name, p.index): (p.error_code, p.base_offset) for t in merged.responses for p in t.partition_responses}
    assert codes == {
        ("orders", 0): (0, 42),
        ("orders", 1): (0, 42),
        ("audit", 0): (0, 42),
        ("audit", 1): (0, 42),
        (CONFIG_TOPIC, 0): (TOPIC_AUTHORIZATION_FAILED, -1),
        (CONFIG_TOPIC, 1): (TOPIC_AUTHORIZATION_FAILED, -1),
    }
    assert scope.guard.refused_total == {(CONFIG_TOPIC, "Produce"): 1}


def test_a_produce_of_an_internal_topic_alone_never_reaches_the_broker():
    scope = scope_for()
    header, plan, body = plan_and_body(scope, TENANT, PRODUCE, 9, produce(VOLUME_TOPIC))
    outcome = plan.decide(body)
    assert isinstance(outcome, AnswerLocally)
    response = decode_response(PRODUCE, 9, outcome.frame[9:])
    assert {p.error_code for t in response.responses for p in t.partition_responses} == {TOPIC_AUTHORIZATION_FAILED}
    assert "internal topic" in response.responses[0].partition_responses[0].error_message


def test_an_acks0_produce_of_an_internal_topic_closes_the_connection():
    scope = scope_for()
    header, plan, body = plan_and_body(scope, TENANT, PRODUCE, 9, produce(CONFIG_TOPIC, acks=0))
    with pytest.raises(ValueError, match="acks=0"):
        plan.decide(body)


def test_a_single_normal_topic_streams_and_admins_are_not_checked():
    scope = scope_for()
    _, plan, _ = plan_and_body(scope, TENANT, PRODUCE, 9, produce("orders"))
    assert plan.decide is None  # streamed: the prefix shows one topic, not an internal one
    _, plan, _ = plan_and_body(scope, Session("L", "10.0.0.8", user="admin"), PRODUCE, 9, produce(CONFIG_TOPIC))
    assert plan.decide is None


def test_delete_topics_by_unknown_id_is_looked_up_then_refused():
    scope = scope_for()
    topic_id = uuid.uuid4()
    msg = new_request(DELETE_TOPICS, 6, topics=[{"name": None, "topic_id": topic_id}], timeout_ms=1000)
    _, plan, body = plan_and_body(scope, TENANT, DELETE_TOPICS, 6, msg)
    outcome = plan.decide(body)
    assert isinstance(outcome, LookUp) and outcome.api_key == METADATA
    version = (
        outcome.api_version
    )  # no ApiVersions seen: every topic, in v10 (tests/proxy/apis/test_metadata_lookups.py)
    answer = new_response(METADATA, version, topics=[{"name": VOLUME_TOPIC, "topic_id": topic_id, "partitions": []}])
    decided = outcome.then(memoryview(encode_response(METADATA, version, answer)))
    assert isinstance(decided, AnswerLocally)
    response = decode_response(DELETE_TOPICS, 6, decided.frame[9:])
    assert [(r.topic_id, r.error_code) for r in response.responses] == [(topic_id, TOPIC_AUTHORIZATION_FAILED)]


@pytest.mark.parametrize("version", [0, 3, 5])
def test_create_topics_delete_records_and_txn_partitions_name_internal_topics_per_item(version):
    scope = scope_for()
    create = new_request(
        CREATE_TOPICS,
        min(version, 7),
        topics=[
            {"name": CONFIG_TOPIC, "num_partitions": 1, "replication_factor": 1},
            {"name": "orders", "num_partitions": 1, "replication_factor": 1},
        ],
    )
    _, plan, body = plan_and_body(scope, TENANT, CREATE_TOPICS, min(version, 7), create)
    outcome = plan.decide(body)
    assert [t.name for t in decode_request(CREATE_TOPICS, min(version, 7), outcome.body).topics] == ["orders"]
    records = new_request(
        DELETE_RECORDS,
        min(version, 2),
        timeout_ms=1,
        topics=[{"name": VOLUME_TOPIC, "partitions": [{"partition_index": 0, "offset": -1}]}],
    )
    _, plan, body = plan_and_body(scope, TENANT, DELETE_RECORDS, min(version, 2), records)
    assert isinstance(plan.decide(body), AnswerLocally)
    if version < 4:
        txn = new_request(
            ADD_PARTITIONS_TO_TXN,
            version,
            v3_and_below_transactional_id="t",
            v3_and_below_topics=[{"name": CONFIG_TOPIC, "partitions": [0]}],
        )
    else:
        txn = new_request(
            ADD_PARTITIONS_TO_TXN,
            version,
            transactions=[
                {
                    "transactional_id": "t",
                    "topics": [{"name": CONFIG_TOPIC, "partitions": [0]}, {"name": "orders", "partitions": [0]}],
                }
            ],
        )
    _, plan, body = plan_and_body(scope, TENANT, ADD_PARTITIONS_TO_TXN, version, txn)
    outcome = plan.decide(body)
    if version < 4:
        assert isinstance(outcome, AnswerLocally)
    else:
        assert [
            t.name for t in decode_request(ADD_PARTITIONS_TO_TXN, version, outcome.body).transactions[0].topics
        ] == ["orders"]
        broker = new_response(
            ADD_PARTITIONS_TO_TXN,
            version,
            results_by_transaction=[
                {
                    "transactional_id": "t",
                    "topic_results": [
                        {"name": "orders", "results_by_partition": [{"partition_index": 0, "partition_error_code": 0}]}
                    ],
                }
            ],
        )
        merged = decode_response(
            ADD_PARTITIONS_TO_TXN,
            version,
            outcome.leg.rewrite(memoryview(encode_response(ADD_PARTITIONS_TO_TXN, version, broker))),
        )
        assert {
            (t.name, t.results_by_partition[0].partition_error_code)
            for t in merged.results_by_transaction[0].topic_results
        } == {("orders", 0), (CONFIG_TOPIC, TOPIC_AUTHORIZATION_FAILED)}


def test_alter_configs_refuses_internal_topic_resources_and_forwards_the_rest():
    scope = scope_for()
    msg = new_request(
        INCREMENTAL_ALTER_CONFIGS,
        1,
        validate_only=False,
        resources=[
            {
                "resource_type": 2,
                "resource_name": CONFIG_TOPIC,
                "configs": [{"name": "retention.ms", "config_operation": 0, "value": "1"}],
            },
            {
                "resource_type": 2,
                "resource_name": "orders",
                "configs": [{"name": "retention.ms", "config_operation": 0, "value": "1"}],
            },
        ],
    )
    _, plan, body = plan_and_body(scope, TENANT, INCREMENTAL_ALTER_CONFIGS, 1, msg)
    outcome = plan.decide(body)
    kept = decode_request(INCREMENTAL_ALTER_CONFIGS, 1, outcome.body).resources
    assert [(r.resource_type, r.resource_name) for r in kept] == [(2, "orders")]
    broker = new_response(
        INCREMENTAL_ALTER_CONFIGS, 1, responses=[{"error_code": 0, "resource_type": 2, "resource_name": "orders"}]
    )
    merged = decode_response(
        INCREMENTAL_ALTER_CONFIGS,
        1,
        outcome.leg.rewrite(memoryview(encode_response(INCREMENTAL_ALTER_CONFIGS, 1, broker))),
    )
    assert {(r.resource_name, r.error_code) for r in merged.responses} == {
        ("orders", 0),
        (CONFIG_TOPIC, TOPIC_AUTHORIZATION_FAILED),
    }


def test_own_connections_are_the_proxys_aiokafka_connections_not_anything_a_client_sends():
    """The addresses of a connection aiokafka opens are noted while it is open; a plain socket of this very process
    (as a tenant's client would be) is not the proxy's own."""
    import asyncio

    from aiokafka.conn import create_conn

    assert track_aiokafka()

    async def scenario():
        accepted = []
        server = await asyncio.start_server(lambda r, w: accepted.append(w), "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        conn = create_conn("127.0.0.1", port, request_timeout_ms=2000)
        try:
            await asyncio.wait_for(conn, 1)  # no broker behind it: the version lookup never completes
        except (TimeoutError, Exception):  # noqa: BLE001
            pass
        await asyncio.sleep(0.05)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)  # a plain client of this process
        await asyncio.sleep(0.05)
        own = OwnConnections()
        verdicts = [own.is_own(w.get_extra_info("peername"), w.get_extra_info("sockname")) for w in accepted]
        writer.close()
        server.close()
        return verdicts

    verdicts = asyncio.run(scenario())
    assert len(verdicts) == 2 and verdicts[1] is False


# -- topic ids (issue 35): an id is the topic, whatever name comes with it -------------------------------------------


def knowing(scope, **ids):
    """``scope`` whose Topics learnt ``name -> id`` from a Metadata answer, as the proxy learns them."""
    answer = new_response(
        METADATA, 12, topics=[{"name": name, "topic_id": i, "partitions": []} for name, i in ids.items()]
    )
    scope.topics.learn_from_metadata(answer, 0)
    return scope


def test_delete_topics_v6_with_an_innocent_name_and_an_internal_topics_id_is_refused():
    """Tansu deletes by the id whatever the name: the guard judges the id too, and nothing reaches the broker."""
    config_id, orders_id = uuid.uuid4(), uuid.uuid4()
    scope = knowing(scope_for(), **{CONFIG_TOPIC: config_id, "orders": orders_id})
    msg = new_request(DELETE_TOPICS, 6, timeout_ms=1000, topics=[{"name": "made-up", "topic_id": config_id}])
    _, plan, body = plan_and_body(scope, TENANT, DELETE_TOPICS, 6, msg)
    outcome = plan.decide(body)
    assert isinstance(outcome, AnswerLocally)
    response = decode_response(DELETE_TOPICS, 6, outcome.frame[9:])
    assert [(r.topic_id, r.error_code) for r in response.responses] == [(config_id, TOPIC_AUTHORIZATION_FAILED)]
    assert scope.guard.refused_total == {(CONFIG_TOPIC, "DeleteTopics"): 1}
    # beside another topic: that one goes to the broker, the internal id does not
    msg = new_request(
        DELETE_TOPICS,
        6,
        timeout_ms=1000,
        topics=[{"name": None, "topic_id": orders_id}, {"name": "innocent", "topic_id": config_id}],
    )
    _, plan, body = plan_and_body(scope, TENANT, DELETE_TOPICS, 6, msg)
    outcome = plan.decide(body)
    assert isinstance(outcome, ForwardRequest)
    assert [t.topic_id for t in decode_request(DELETE_TOPICS, 6, outcome.body).topics] == [orders_id]


def test_delete_topics_v6_with_a_name_and_an_unknown_id_looks_the_id_up_first():
    scope = scope_for()
    volume_id = uuid.uuid4()
    msg = new_request(DELETE_TOPICS, 6, timeout_ms=1000, topics=[{"name": "made-up", "topic_id": volume_id}])
    _, plan, body = plan_and_body(scope, TENANT, DELETE_TOPICS, 6, msg)
    outcome = plan.decide(body)
    assert isinstance(outcome, LookUp) and outcome.api_key == METADATA
    version = outcome.api_version
    answer = new_response(METADATA, version, topics=[{"name": VOLUME_TOPIC, "topic_id": volume_id, "partitions": []}])
    decided = outcome.then(memoryview(encode_response(METADATA, version, answer)))
    assert isinstance(decided, AnswerLocally)
    response = decode_response(DELETE_TOPICS, 6, decided.frame[9:])
    assert [r.error_code for r in response.responses] == [TOPIC_AUTHORIZATION_FAILED]


def test_an_id_the_broker_cannot_name_either_is_answered_unknown_topic_id_never_forwarded():
    """The proxy never forwards an id it cannot name: it answers what the broker answered the lookup."""
    scope = scope_for()
    orders_id, ghost_id = uuid.uuid4(), uuid.uuid4()
    knowing(scope, orders=orders_id)
    msg = new_request(
        DELETE_TOPICS,
        6,
        timeout_ms=1000,
        topics=[{"name": None, "topic_id": orders_id}, {"name": "x", "topic_id": ghost_id}],
    )
    _, plan, body = plan_and_body(scope, TENANT, DELETE_TOPICS, 6, msg)
    outcome = plan.decide(body)
    assert isinstance(outcome, LookUp)
    version = outcome.api_version
    empty = encode_response(METADATA, version, new_response(METADATA, version, topics=[]))
    decided = outcome.then(memoryview(empty))
    assert isinstance(decided, ForwardRequest)
    assert [t.topic_id for t in decode_request(DELETE_TOPICS, 6, decided.body).topics] == [orders_id]
    broker = new_response(DELETE_TOPICS, 6, responses=[{"name": "orders", "topic_id": orders_id, "error_code": NONE}])
    merged = decode_response(
        DELETE_TOPICS, 6, decided.leg.rewrite(memoryview(encode_response(DELETE_TOPICS, 6, broker)))
    )
    assert [(r.topic_id, r.error_code) for r in merged.responses] == [(orders_id, NONE), (ghost_id, UNKNOWN_TOPIC_ID)]
    assert scope.guard.refused_total == {}  # not an internal topic: no refusal counted


def produce_by_id(*ids, acks=1):
    return new_request(
        PRODUCE,
        13,
        acks=acks,
        timeout_ms=1000,
        topic_data=[{"topic_id": i, "partition_data": [{"index": 0, "records": b""}]} for i in ids],
    )


def test_produce_v13_to_an_internal_topics_id_is_refused_and_the_other_ids_forwarded():
    config_id, orders_id = uuid.uuid4(), uuid.uuid4()
    scope = knowing(scope_for(), **{CONFIG_TOPIC: config_id, "orders": orders_id})
    _, plan, body = plan_and_body(scope, TENANT, PRODUCE, 13, produce_by_id(config_id))
    assert plan.decide is not None  # not streamed: the prefix's one id is an internal topic's
    outcome = plan.decide(body)
    assert isinstance(outcome, AnswerLocally)
    response = decode_response(PRODUCE, 13, outcome.frame[9:])
    assert [(t.topic_id, t.partition_responses[0].error_code) for t in response.responses] == [
        (config_id, TOPIC_AUTHORIZATION_FAILED)
    ]
    _, plan, body = plan_and_body(scope, TENANT, PRODUCE, 13, produce_by_id(orders_id, config_id))
    outcome = plan.decide(body)
    assert isinstance(outcome, ForwardRequest)
    assert [t.topic_id for t in decode_request(PRODUCE, 13, outcome.body).topic_data] == [orders_id]
    _, plan, body = plan_and_body(scope, TENANT, PRODUCE, 13, produce_by_id(config_id, acks=0))
    with pytest.raises(ValueError, match="acks=0"):
        plan.decide(body)


def test_produce_v13_to_an_unknown_id_is_looked_up_then_refused_or_answered_unknown():
    scope = scope_for()
    volume_id, ghost_id = uuid.uuid4(), uuid.uuid4()
    _, plan, body = plan_and_body(scope, TENANT, PRODUCE, 13, produce_by_id(volume_id, ghost_id))
    outcome = plan.decide(body)
    assert isinstance(outcome, LookUp)
    version = outcome.api_version
    answer = new_response(METADATA, version, topics=[{"name": VOLUME_TOPIC, "topic_id": volume_id, "partitions": []}])
    decided = outcome.then(memoryview(encode_response(METADATA, version, answer)))
    assert isinstance(decided, AnswerLocally)
    response = decode_response(PRODUCE, 13, decided.frame[9:])
    assert {(t.topic_id, t.partition_responses[0].error_code) for t in response.responses} == {
        (volume_id, TOPIC_AUTHORIZATION_FAILED),
        (ghost_id, UNKNOWN_TOPIC_ID),
    }
