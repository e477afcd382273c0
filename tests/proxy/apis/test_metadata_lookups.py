"""The proxy's own Metadata lookups ask in a version the broker serves, and their answers are learnt where every
Metadata answer is (proxy.apis.metadata): one connection core, this test as a broker that checks requests as Kafka
does.

Kafka serves a lookup by topic id (a null name, a non-zero id) only from Metadata v12 (Kafka 3.1): for v10 and v11
MetadataRequest.json says "Versions 10 and 11 should not use the topicId field or set topic name to null", and
KafkaApis.handleTopicMetadataRequest answers INVALID_REQUEST for every topic of such a request. Before, the proxy
asked by id in v10, so against a real Kafka an unknown id stayed unknown: the internal-topic guard let a DeleteTopics
v6 of the config topic by id through. Tansu answers such a v10 request all the same, which hid it.
"""

from __future__ import annotations

import struct
import uuid

from config.loader import parse_config
from proxy.apis import ConnectionScope, Session
from proxy.cluster.own_clients import OwnConnections
from proxy.cluster.topics import Topics
from proxy.codec.apis import API_VERSIONS, DELETE_TOPICS, METADATA
from proxy.codec.error_codes import INVALID_REQUEST, NONE, TOPIC_AUTHORIZATION_FAILED
from proxy.codec.header import encode_request_header, encode_response_header, frame, parse_request_header
from proxy.codec.messages import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    new_request,
    new_response,
)
from proxy.codec.primitives import ZERO_UUID
from proxy.connection.core import ConnectionCore
from proxy.enforcement.internal_topic_guard import InternalTopicGuard
from proxy.enforcement.proxy_quotas import ProxyQuotas
from quota.primitives.clock import ManualClock
from tests.fakes import NULL_API_METRICS

CONFIG_TOPIC = "__kafka_quota_proxy_configs"


class NobodyIsOwn(OwnConnections):
    def is_own(self, peer, local) -> bool:
        return False


def kafka_answer_code(version: int, request) -> int:
    """What a Kafka broker answers for each topic of a Metadata request (KafkaApis: ids and null names from v12)."""
    if (
        request.topics is not None
        and version < 12
        and any(t.name is None or t.topic_id != ZERO_UUID for t in request.topics)
    ):
        return INVALID_REQUEST
    return NONE


class Wire:
    """A tenant's connection through one core; the test answers as the broker."""

    def __init__(self) -> None:
        self.clock = ManualClock(1_000_000)
        config = parse_config(
            {
                "upstream": {"bootstrap_servers": ["b:1"]},
                "listeners": [{"name": "L", "bind": "h:2"}],
                "dynamic_config": {},
                "admin_principals": ["User:admin"],
                "quotas": [{"entity": {"client-id": "tenant"}, "controller_mutation_rate": 100}],
            }
        )
        quotas = ProxyQuotas(config, self.clock)
        guard = InternalTopicGuard(quotas.internal_topics, config.admin_principals, own=NobodyIsOwn())
        self.scope = ConnectionScope(None, Topics(), quotas.home, guard=guard)
        self.session = Session("L", "10.0.0.7")
        self.to_client, self.to_broker = bytearray(), bytearray()
        self.core = ConnectionCore(
            self.scope,
            self.session,
            max_request_bytes=1 << 20,
            max_response_bytes=1 << 20,
            max_inflight=10,
            write_client=self.to_client.extend,
            write_broker=self.to_broker.extend,
            clock=lambda: self.clock.now_ms() * 1_000_000,
            api_metrics=lambda key: NULL_API_METRICS,
        )

    def send(self, api_key, version, corr, **fields) -> None:
        body = encode_request(api_key, version, new_request(api_key, version, **fields))
        self.core.client_bytes(memoryview(frame(encode_request_header(api_key, version, corr, "tenant") + body)))
        self.core.step(self.clock.now_ms() * 1_000_000)

    def broker_requests(self) -> list:
        out, buf = [], self.to_broker
        while len(buf) >= 4:
            size = struct.unpack_from(">i", buf)[0]
            header = parse_request_header(buf, 1 << 20)
            out.append(
                (
                    header,
                    decode_request(header.api_key, header.api_version, bytes(buf[header.header_length : size + 4])),
                )
            )
            del buf[: size + 4]
        return out

    def answer(self, header, **fields) -> None:
        msg = new_response(header.api_key, header.api_version, **fields)
        self.core.broker_bytes(
            memoryview(
                frame(
                    encode_response_header(header.api_key, header.api_version, header.correlation_id)
                    + encode_response(header.api_key, header.api_version, msg)
                )
            )
        )
        self.core.step(self.clock.now_ms() * 1_000_000)

    def api_versions(self, metadata_max: int) -> None:
        """The client's ApiVersions, answered by a broker serving Metadata up to ``metadata_max``."""
        self.send(API_VERSIONS, 3, 1, client_software_name="t", client_software_version="1")
        ((header, _),) = self.broker_requests()
        self.answer(
            header,
            error_code=NONE,
            api_keys=[
                {"api_key": METADATA, "min_version": 0, "max_version": metadata_max},
                {"api_key": DELETE_TOPICS, "min_version": 0, "max_version": 6},
                {"api_key": API_VERSIONS, "min_version": 0, "max_version": 4},
            ],
        )
        self.to_client.clear()

    def delete_by_id(self, topic_id: uuid.UUID):
        """A DeleteTopics v6 naming ``topic_id`` only: the proxy's lookup the broker received."""
        self.send(DELETE_TOPICS, 6, 9, topics=[{"name": None, "topic_id": topic_id}], timeout_ms=1000)
        ((lookup, asked),) = self.broker_requests()
        assert lookup.api_key == METADATA and lookup.correlation_id < 0
        assert kafka_answer_code(lookup.api_version, asked) == NONE, "a request Kafka answers INVALID_REQUEST"
        return lookup, asked

    def deleted_answer(self) -> list:
        """The DeleteTopics response codes the client got."""
        size, corr = struct.unpack_from(">ii", self.to_client)
        assert corr == 9
        response = decode_response(DELETE_TOPICS, 6, bytes(self.to_client[9 : size + 4]))
        return [(r.topic_id, r.error_code) for r in response.responses]


def config_topic(topic_id: uuid.UUID) -> dict:
    return {"name": CONFIG_TOPIC, "topic_id": topic_id, "partitions": [{"partition_index": 0}]}


def test_a_topic_id_is_looked_up_by_id_in_v12_where_the_broker_lists_it():
    wire = Wire()
    wire.api_versions(metadata_max=12)
    assert wire.session.broker_metadata_versions == (0, 12)
    topic_id = uuid.uuid4()
    lookup, asked = wire.delete_by_id(topic_id)
    assert lookup.api_version == 12 and [(t.name, t.topic_id) for t in asked.topics] == [(None, topic_id)]
    wire.answer(lookup, topics=[config_topic(topic_id)])
    assert wire.deleted_answer() == [(topic_id, TOPIC_AUTHORIZATION_FAILED)]  # refused: it is the config topic
    assert wire.broker_requests() == []  # nothing else asked: the same answer gave the name and the count
    assert wire.scope.topics.name_for(topic_id) == CONFIG_TOPIC


def test_a_broker_without_v12_is_asked_for_every_topic_whose_answer_names_the_id():
    for seen in (11, None):  # a Kafka 3.0 broker; no ApiVersions seen on the connection
        wire = Wire()
        if seen is not None:
            wire.api_versions(metadata_max=seen)
        topic_id = uuid.uuid4()
        lookup, asked = wire.delete_by_id(topic_id)
        assert lookup.api_version == 10 and asked.topics is None  # every topic, each answered with its id
        wire.answer(lookup, topics=[{"name": "orders", "topic_id": uuid.uuid4()}, config_topic(topic_id)])
        assert wire.deleted_answer() == [(topic_id, TOPIC_AUTHORIZATION_FAILED)]
        assert len(wire.scope.topics) == 2


def test_topics_known_by_name_are_looked_up_by_name_in_v10():
    wire = Wire()
    wire.api_versions(metadata_max=12)
    wire.send(DELETE_TOPICS, 5, 9, topic_names=["orders"], timeout_ms=1000)  # its count is needed (KIP-599)
    ((lookup, asked),) = wire.broker_requests()
    assert lookup.api_version == 10 and [(t.name, t.topic_id) for t in asked.topics] == [("orders", ZERO_UUID)]
    assert not asked.allow_auto_topic_creation
