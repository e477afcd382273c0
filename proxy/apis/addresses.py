"""Responses that carry broker addresses.

In cluster mode every host/port a broker hands out is replaced with the proxy's advertised host and the port
that serves that broker (:class:`proxy.cluster.broker_ports.BrokerPorts`), so clients only ever see proxy addresses:
Metadata brokers (:mod:`proxy.apis.metadata`, which also learns the topics from them), FindCoordinator (v0-3 single
coordinator, v4+ batched), DescribeCluster brokers, the NodeEndpoints tagged field of Produce v10+ and Fetch v16+
responses (KIP-951), and the NodeEndpoints of ShareFetch and ShareAcknowledge responses (KIP-932, every version: a
share consumer told of a new leader goes there next). On the admin listener the same responses name that listener
for every broker (:mod:`proxy.cluster.admin_address`), so its clients never leave it. On a sidecar's other listeners
the broker advertises the proxy itself and nothing is rewritten.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Protocol

from proxy.apis.guards import TagRewrite
from proxy.apis.plan import PASS, ConnectionScope, Plan
from proxy.apis.response_leg import ResponseLeg
from proxy.codec.apis import (
    DESCRIBE_CLUSTER,
    FETCH,
    FETCH_NODE_ENDPOINTS_SINCE,
    FIND_COORDINATOR,
    FIND_COORDINATOR_BATCHED_SINCE,
    PRODUCE,
    PRODUCE_NODE_ENDPOINTS_SINCE,
    SHARE_ACKNOWLEDGE,
    SHARE_FETCH,
    SHARE_NODE_ENDPOINTS_SINCE,
)
from proxy.codec.header import RequestHeader
from proxy.codec.messages import Message, decode_response, encode_response
from proxy.codec.node_endpoints import Unusual, rewrite_tagged_endpoints
from proxy.codec.skim import array_count, tag_of, tagged_fields
from proxy.session.session import Session


class Advertiser(Protocol):
    """Where a broker's address is rewritten to: :class:`~proxy.cluster.broker_ports.BrokerPorts` in cluster mode,
    :class:`~proxy.cluster.admin_address.AdminAddress` on the admin listener."""

    def advertise(self, node_id: int, host: str, port: int) -> tuple[str, int]: ...

    def __hash__(self) -> int: ...  # the plans made for its listener are kept by it (_node_endpoints_plan)


def advertiser(scope: ConnectionScope) -> Advertiser | None:
    """What this listener's broker addresses become; None: they pass as the broker gave them."""
    return scope.cluster if scope.cluster is not None else scope.admin_address


def plan_find_coordinator(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan:
    def nodes(msg: Message, version: int) -> list[tuple[Message, str]]:
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


def plan_share_fetch(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan:
    return _plan_node_endpoints(scope, header, SHARE_FETCH, SHARE_NODE_ENDPOINTS_SINCE)


def plan_share_acknowledge(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan:
    return _plan_node_endpoints(scope, header, SHARE_ACKNOWLEDGE, SHARE_NODE_ENDPOINTS_SINCE)


def _plan_node_endpoints(scope: ConnectionScope, header: RequestHeader, api_key: int, since: int) -> Plan:
    cluster = advertiser(scope)
    if cluster is None or header.api_version < since:
        return PASS
    return _node_endpoints_plan(cluster, api_key, header.api_version)


@lru_cache(maxsize=64)
def _node_endpoints_plan(cluster: Advertiser, api_key: int, version: int) -> Plan:
    """The plan of every Produce, Fetch, ShareFetch or ShareAcknowledge of ``version`` through the listener of
    ``cluster``, made once (every small request carries one). NodeEndpoints are there only when leadership moved:
    otherwise the broker's bytes go back as they are, found so by skimming the response (:mod:`proxy.codec.skim`), not
    decoding it."""

    def nodes(msg: Message, _v: int) -> list[tuple[Message, str]]:
        return [(n, "node_id") for n in msg.node_endpoints]

    try:
        tag = tag_of(api_key, "response", version, "node_endpoints")
    except ValueError:  # KIP-932 (ShareFetch, ShareAcknowledge): a plain array, empty unless a leader moved
        return _node_rewrite(
            cluster,
            api_key,
            version,
            nodes,
            lambda body: array_count(api_key, "response", version, "node_endpoints", body) > 0,
        )
    # KIP-951 (Produce, Fetch): a tagged field, absent unless a leader moved; looked for in the rewrite itself (a
    # response's one check, without a call of its own). When there, the field alone is rewritten, the rest of the
    # response copied undecoded (proxy.codec.node_endpoints); one not laid out the plain way is decoded whole.
    rewrite = _node_rewrite(cluster, api_key, version, nodes).leg.rewrite
    assert rewrite is not None
    advertise = cluster.advertise

    def rewrite_moved(body: memoryview, where: tuple[int, int]) -> bytes | None:
        rewritten = rewrite_tagged_endpoints(body, where[0], where[1], advertise)
        return rewrite(body) if isinstance(rewritten, Unusual) else rewritten

    return Plan(
        leg=ResponseLeg(rewrite=TagRewrite(tagged_fields, api_key, version, tag, rewrite_moved), unless_tagged=tag)
    )


def _plan_node_rewrite(
    scope: ConnectionScope,
    header: RequestHeader,
    api_key: int,
    nodes: Callable[[Message, int], list[tuple[Message, str]]],
) -> Plan:
    """Rewrite the (node, id field) pairs ``nodes`` finds in the response (cluster mode, the admin listener);
    elsewhere pass."""
    cluster = advertiser(scope)
    if cluster is None:
        return PASS
    return _node_rewrite(cluster, api_key, header.api_version, nodes)


def _node_rewrite(
    cluster: Advertiser,
    api_key: int,
    version: int,
    nodes: Callable[[Message, int], list[tuple[Message, str]]],
    present: Callable[[memoryview], bool] | None = None,
) -> Plan:
    """A plan whose leg rewrites the (node, id field) pairs ``nodes`` finds in the response. ``present``: whether a
    response has any such node, skimmed; one without passes as it is, undecoded."""

    def rewrite(body: memoryview) -> bytes | None:
        if present is not None and not present(body):
            return None
        msg = decode_response(api_key, version, body)
        found = nodes(msg, version)
        if not found:
            return None
        for node, id_field in found:
            rewrite_node(cluster, node, id_field)
        return encode_response(api_key, version, msg)

    return Plan(leg=ResponseLeg(rewrite=rewrite))


def rewrite_node(cluster: Advertiser, node: Message, id_field: str) -> None:
    """The node's host and port become the proxy's for that broker."""
    node_id = getattr(node, id_field)
    if node_id < 0:
        return  # "no node" (e.g. a FindCoordinator error): host "" and port -1 mean nothing to rewrite
    node.host, node.port = cluster.advertise(node_id, node.host, node.port)
