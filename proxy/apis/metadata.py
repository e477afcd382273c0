"""Metadata: where what the proxy knows about topics is learnt, and the proxy's own Metadata lookups.

A client's Metadata answer passes as the broker wrote it; in cluster mode (and on the admin listener, where every
broker is that listener) only its head (the brokers) is decoded and rewritten (:mod:`proxy.apis.addresses`), and its
topics go on as the broker's bytes. The proxy-wide :class:`~proxy.cluster.topics.Topics` learns each topic's id and
partition count from the answers to the proxy's own lookups (:func:`learn`), the only answers a decision waits for.
Handlers read ``scope.topics`` and never write it.

A handler that needs a fact the proxy does not have yet (the name behind a topic id, a partition count) asks with
:func:`look_up_topics`: a Metadata request of the proxy's own on the client's connection
(:class:`~proxy.apis.plan.LookUp`), whose answer is learnt by the same :func:`learn` before the handler decides. Its version is one the broker
serves (:func:`lookup_request`): topics known by name are asked for by name in OWN_METADATA_VERSION (v10, every
broker since Kafka 2.8); a topic known only by its id is asked for by id in OWN_METADATA_BY_ID_VERSION (v12, Kafka
3.1+: a v10 or v11 broker answers INVALID_REQUEST for such a request) when the broker listed v12 in the ApiVersions
answer seen on this connection (``Session.broker_metadata_versions``), and otherwise every topic is asked for in v10,
whose answer names each one with its id.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence

from proxy.apis.addresses import Advertiser, rewrite_node
from proxy.apis.plan import PASS, ConnectionScope, LookUp, Outcome, Plan
from proxy.apis.response_leg import ResponseLeg
from proxy.cluster.broker_ports import BrokerPorts
from proxy.codec.apis import METADATA, OWN_METADATA_BY_ID_VERSION, OWN_METADATA_VERSION
from proxy.codec.header import RequestHeader
from proxy.codec.messages import Message, decode_response, encode_request, new_request
from proxy.codec.metadata_prefix import decode_head, encode_head, topics_offset
from proxy.session.session import Session

TopicKey = tuple["str | None", "uuid.UUID | None"]  # (name, topic id) of a topic a request names; either may be unknown


def learn(scope: ConnectionScope, version: int, body: memoryview) -> Message:
    """A Metadata answer's body (``version``) to one of the proxy's own lookups: what it says of the topics goes into
    ``scope.topics``."""
    msg = decode_response(METADATA, version, body)
    scope.topics.learn_from_metadata(msg, scope.quotas.clock.now_ms())
    return msg


def plan_metadata(scope: ConnectionScope, session: Session, header: RequestHeader) -> Plan:
    """A client's Metadata: its answer passes as the broker wrote it (sidecar mode), or with its brokers rewritten and
    its topics untouched (cluster mode, :func:`rewrite_head`; the admin listener, uncached: its few requests).
    Nothing is learnt from it (issue 44, T7): decoding
    every answer to learn of every topic took a core under a storm of Metadata for every topic, and the facts a
    decision needs are looked up when it needs them."""
    cluster, version = scope.cluster, header.api_version
    if cluster is not None:
        return Plan(leg=ResponseLeg(rewrite=lambda body: rewrite_head(cluster, version, body)))
    admin = scope.admin_address
    if admin is not None:
        return Plan(
            leg=ResponseLeg(rewrite=lambda body: _rewritten(admin, version, body, topics_offset(version, body))[0])
        )
    return PASS


def rewrite_head(cluster: BrokerPorts, version: int, body: memoryview) -> bytes:
    """``body`` with the brokers of its head rewritten to the proxy's ports; the topics are the broker's own bytes.
    A head seen before with the same brokers is rewritten from the cache: no decode at all."""
    end = topics_offset(version, body)
    cached = cluster.metadata_heads.get(version)
    if cached is not None and cached[2] is cluster.brokers and body[:end] == cached[0]:
        return cached[1] + body[end:]
    rewritten, head, node_ids = _rewritten(cluster, version, body, end)
    if all(n < 0 or n in cluster.brokers for n in node_ids):  # else a port to open: not cached,
        cluster.metadata_heads[version] = (bytes(body[:end]), head, cluster.brokers)  # so the next answer tries again
    return rewritten


def _rewritten(advertiser: Advertiser, version: int, body: memoryview, end: int) -> tuple[bytes, bytes, list[int]]:
    """``body`` with every broker of its head (the ``end`` bytes before its topics) at the advertiser's address; the
    new head alone; the brokers' node ids."""
    msg = decode_head(version, bytes(body[:end]))
    for broker in msg.brokers:
        rewrite_node(advertiser, broker, "node_id")
    head = encode_head(version, msg)
    return head + body[end:], head, [b.node_id for b in msg.brokers]


def lookup_request(session: Session, keys: Sequence[TopicKey]) -> tuple[int, list[dict[str, object]] | None]:
    """The version and the topics (None: every topic) of a Metadata lookup for ``keys``, in a version the broker
    behind ``session`` serves."""
    if all(name for name, _ in keys):
        return OWN_METADATA_VERSION, [{"name": name} for name, _ in keys]
    served = session.broker_metadata_versions
    if served is not None and served[0] <= OWN_METADATA_BY_ID_VERSION <= served[1] and all(i for _, i in keys):
        # by id alone: a broker that is given ids answers for the ids and ignores the names
        return OWN_METADATA_BY_ID_VERSION, [{"name": None, "topic_id": topic_id} for _, topic_id in keys]
    return OWN_METADATA_VERSION, None


def look_up_topics(
    scope: ConnectionScope, session: Session, keys: Sequence[TopicKey], then: Callable[[], Outcome]
) -> LookUp:
    """Ask the broker about ``keys`` first (on the client's connection); its answer is learnt, then ``then``
    decides."""
    version, topics = lookup_request(session, keys)
    request = new_request(METADATA, version, topics=topics, allow_auto_topic_creation=False)

    def answered(body: memoryview) -> Outcome:
        learn(scope, version, body)
        return then()

    return LookUp(METADATA, version, encode_request(METADATA, version, request), answered)
