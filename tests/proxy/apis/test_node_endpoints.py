"""The node endpoints a Produce, Fetch, ShareFetch or ShareAcknowledge answer carries, in cluster mode (real frames).

A client told of a new leader in one of these answers connects to the address it names next. KIP-951 put them in
Produce v10+ and Fetch v16+ as a tagged field; KIP-932 in every ShareFetch and ShareAcknowledge as a plain array.
Each must name the proxy's port for that broker, never the broker itself, or the client leaves the proxy and every
quota behind; an answer without them goes back as the broker's bytes, undecoded.
"""

from __future__ import annotations

import dataclasses
import uuid

import pytest

from proxy.apis import CHAINS, Session, plan_request
from proxy.cluster.admin_address import AdminAddress
from proxy.cluster.broker_ports import BrokerPorts
from proxy.codec.apis import (
    FETCH,
    FETCH_NODE_ENDPOINTS_SINCE,
    PRODUCE,
    PRODUCE_NODE_ENDPOINTS_SINCE,
    SHARE_ACKNOWLEDGE,
    SHARE_FETCH,
    SHARE_NODE_ENDPOINTS_SINCE,
)
from proxy.codec.errors import ProtocolError
from proxy.codec.header import RequestHeader
from proxy.codec.messages import DECODED_APIS, decode_response, encode_response, new_response
from proxy.codec.skim import array_count
from quota.primitives.clock import ManualClock
from tests.proxy.byte_rate_scopes import batch, scope_with

TOPIC = uuid.UUID("6f1c1c5e-0000-4000-8000-000000000001")
LEADER = {"leader_id": 2, "leader_epoch": 7}


def _partition(api_key: int, version: int) -> dict:
    """A partition whose leader moved (NOT_LEADER_OR_FOLLOWER), with records where the answer carries them."""
    if api_key == PRODUCE:
        return {"index": 0, "error_code": 6, "current_leader": LEADER}
    if api_key == FETCH:
        return {"partition_index": 0, "error_code": 6, "current_leader": LEADER, "records": batch(2)}
    if api_key == SHARE_FETCH:
        return {
            "partition_index": 0,
            "error_code": 6,
            "current_leader": LEADER,
            "records": batch(2),
            "acquired_records": [{"first_offset": 0, "last_offset": 1, "delivery_count": 1}],
        }
    return {"partition_index": 0, "error_code": 6, "current_leader": LEADER}


def _answer(api_key: int, version: int, endpoints: list[tuple[int, str, int]]) -> bytes:
    if api_key == PRODUCE:
        topics = {"responses": [{"name": "t", "partition_responses": [_partition(api_key, version)]}]}
    else:
        topic = {"topic_id": TOPIC, "partitions": [_partition(api_key, version)]}
        topics = {"responses": [topic]}
    nodes = [{"node_id": n, "host": h, "port": p, "rack": "r1"} for n, h, p in endpoints]
    return encode_response(api_key, version, new_response(api_key, version, node_endpoints=nodes, **topics))


SINCE = {
    PRODUCE: PRODUCE_NODE_ENDPOINTS_SINCE,
    FETCH: FETCH_NODE_ENDPOINTS_SINCE,
    SHARE_FETCH: SHARE_NODE_ENDPOINTS_SINCE,
    SHARE_ACKNOWLEDGE: SHARE_NODE_ENDPOINTS_SINCE,
}
WITH_ENDPOINTS = [(k, v) for k, since in SINCE.items() for v in range(since, DECODED_APIS[k][1] + 1)]


def scope():
    return scope_with([], ManualClock(0))


def _cluster_scope():
    opened: list[int] = []
    ports = BrokerPorts("L", "proxy.example", 19100, lambda n: opened.append(n) or True)
    return dataclasses.replace(scope(), cluster=ports), opened


def _rewrite(the_scope, api_key: int, version: int, body: bytes) -> bytes | None:
    plan = plan_request(the_scope, Session("L", "10.0.0.1"), RequestHeader(100, api_key, version, 1, "c", 20))
    assert plan.leg.rewrite is not None
    return plan.leg.rewrite(memoryview(body))


@pytest.mark.parametrize(("api_key", "version"), WITH_ENDPOINTS)
def test_every_node_endpoint_names_the_proxys_port_for_that_broker(api_key, version):
    the_scope, opened = _cluster_scope()
    body = _answer(api_key, version, [(2, "kafka-2.internal", 9092), (5, "kafka-5.internal", 9093)])
    rewritten = _rewrite(the_scope, api_key, version, body)
    assert rewritten is not None, "the broker's own addresses went to the client"
    msg = decode_response(api_key, version, rewritten)
    assert [(n.node_id, n.host, n.port, n.rack) for n in msg.node_endpoints] == [
        (2, "proxy.example", 19102, "r1"),
        (5, "proxy.example", 19105, "r1"),
    ]
    assert opened == [2, 5]  # each broker named is served on its own port from now on
    assert [str(a) for a in the_scope.cluster.upstream_for(5)] == ["kafka-5.internal:9093"]
    before = decode_response(api_key, version, body)
    before.node_endpoints = msg.node_endpoints
    assert encode_response(api_key, version, before) == rewritten  # nothing else changed: records, leaders, acquired


@pytest.mark.parametrize(("api_key", "version"), WITH_ENDPOINTS)
def test_an_answer_without_node_endpoints_goes_back_as_the_brokers_bytes(api_key, version):
    the_scope, opened = _cluster_scope()
    assert _rewrite(the_scope, api_key, version, _answer(api_key, version, [])) is None
    assert opened == []


@pytest.mark.parametrize("api_key", [SHARE_FETCH, SHARE_ACKNOWLEDGE])
def test_share_answers_pass_untouched_where_the_broker_advertises_the_proxy(api_key):
    """Sidecar mode: the broker's advertised listener is the sidecar; the chain has the stage, which adds nothing."""
    assert CHAINS[api_key][0].name == "node endpoints"
    plan = plan_request(scope(), Session("L", "10.0.0.1"), RequestHeader(100, api_key, 1, 1, "c", 20))
    assert plan.leg.rewrite is None


@pytest.mark.parametrize("api_key", [SHARE_FETCH, SHARE_ACKNOWLEDGE])
def test_a_share_answer_cut_short_is_a_protocol_error_not_a_pass(api_key):
    body = _answer(api_key, 1, [(2, "kafka-2.internal", 9092)])
    assert array_count(api_key, "response", 1, "node_endpoints", body) == 1
    the_scope, _ = _cluster_scope()
    cut = body[: len(body) // 2]
    with pytest.raises(ProtocolError):
        _rewrite(the_scope, api_key, 1, cut)


@pytest.mark.parametrize("api_key", [SHARE_FETCH, SHARE_ACKNOWLEDGE])
def test_on_the_admin_listener_share_answers_name_that_listener_for_every_broker(api_key):
    admin_scope = dataclasses.replace(scope(), admin_address=AdminAddress("127.0.0.1", 19190))
    body = _answer(api_key, 2, [(2, "kafka-2.internal", 9092), (5, "kafka-5.internal", 9093)])
    rewritten = _rewrite(admin_scope, api_key, 2, body)
    assert rewritten is not None
    nodes = decode_response(api_key, 2, rewritten).node_endpoints
    assert [(n.node_id, n.host, n.port) for n in nodes] == [(2, "127.0.0.1", 19190), (5, "127.0.0.1", 19190)]
