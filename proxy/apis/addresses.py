"""Responses that carry broker addresses, and the topic ids Metadata responses reveal.

In cluster mode every host/port a broker hands out is replaced with the proxy's advertised host and the port
that serves that broker (:class:`proxy.cluster.broker_ports.BrokerPorts`), so clients only ever see proxy addresses:
Metadata brokers, FindCoordinator (v0-3 single coordinator, v4+ batched), DescribeCluster brokers, and the
NodeEndpoints tagged field of Produce v10+ and Fetch v16+ responses. In sidecar mode the broker advertises the
proxy itself and nothing is rewritten, but Metadata responses are still read to learn topic ids.
"""

from __future__ import annotations

from typing import Callable

from proxy.apis.plan import PASS, ConnectionScope, Plan
from proxy.session.session import Session
from proxy.cluster.broker_ports import BrokerPorts
from proxy.codec.apis import (DESCRIBE_CLUSTER, FETCH, FETCH_NODE_ENDPOINTS_SINCE, FIND_COORDINATOR,
                              FIND_COORDINATOR_BATCHED_SINCE, METADATA, PRODUCE, PRODUCE_NODE_ENDPOINTS_SINCE)
from proxy.codec.header import RequestHeader
from proxy.codec.messages import Message, decode_response, encode_response



def plan_metadata(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan:
    version, cluster, topic_ids = header.api_version, scope.cluster, scope.topic_ids
    learn_partitions = scope.quotas.mutations.enabled  # partition counts for the controller mutation quota

    def rewrite(body: memoryview) -> bytes | None:
        msg = decode_response(METADATA, version, body)
        topic_ids.learn_from_metadata(msg)
        if learn_partitions:
            scope.topics.learn_from_metadata(msg, scope.quotas.clock.now_ms())
        if cluster is None:
            return None
        for broker in msg.brokers:
            broker.host, broker.port = cluster.advertise(broker.node_id, broker.host, broker.port)
        return encode_response(METADATA, version, msg)

    return Plan(rewrite=rewrite)


def plan_find_coordinator(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan:
    def nodes(msg, version: int):
        if version >= FIND_COORDINATOR_BATCHED_SINCE:
            return [(c, "node_id") for c in msg.coordinators]
        return [(msg, "node_id")]

    return _plan_node_rewrite(scope, header, FIND_COORDINATOR, nodes)


def plan_describe_cluster(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan:
    return _plan_node_rewrite(scope, header, DESCRIBE_CLUSTER, lambda msg, _v: [(b, "broker_id") for b in msg.brokers])


def plan_produce(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan:
    return _plan_node_endpoints(scope, header, PRODUCE, PRODUCE_NODE_ENDPOINTS_SINCE)


def plan_fetch(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan:
    return _plan_node_endpoints(scope, header, FETCH, FETCH_NODE_ENDPOINTS_SINCE)


def _plan_node_endpoints(scope: ConnectionScope, header: RequestHeader, api_key: int, since: int) -> Plan:
    if scope.cluster is None or header.api_version < since:
        return PASS
    # present only when leadership moved; otherwise the broker's bytes go back as they are
    return _plan_node_rewrite(scope, header, api_key, lambda msg, _v: [(n, "node_id") for n in msg.node_endpoints])


def _plan_node_rewrite(scope: ConnectionScope, header: RequestHeader, api_key: int,
                       nodes: Callable[[Message, int], list[tuple[Message, str]]]) -> Plan:
    """Cluster mode: rewrite the (node, id field) pairs ``nodes`` finds in the response; sidecar mode: pass."""
    cluster, version = scope.cluster, header.api_version
    if cluster is None:
        return PASS

    def rewrite(body: memoryview) -> bytes | None:
        msg = decode_response(api_key, version, body)
        found = nodes(msg, version)
        if not found:
            return None
        for node, id_field in found:
            _rewrite_node(cluster, node, id_field)
        return encode_response(api_key, version, msg)

    return Plan(rewrite=rewrite)


def _rewrite_node(cluster: BrokerPorts, node, id_field: str) -> None:
    node_id = getattr(node, id_field)
    if node_id < 0:
        return  # "no node" (e.g. a FindCoordinator error): host "" and port -1 mean nothing to rewrite
    node.host, node.port = cluster.advertise(node_id, node.host, node.port)
