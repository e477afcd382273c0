"""Planning a request from a tenant on a proxy that guards internal topics (the internal-topic and cluster-usage
tests)."""

from __future__ import annotations

from proxy.apis import Session, plan_request
from proxy.cluster.own_clients import OwnConnections
from proxy.codec.apis import PRODUCE
from proxy.codec.header import encode_request_header, frame
from proxy.codec.messages import encode_request, new_request
from proxy.codec.produce_prefix import parse_request_prefix

TENANT = Session("L", "10.0.0.7")


class NobodyIsOwn(OwnConnections):
    def is_own(self, peer, local) -> bool:
        return False


def plan_and_body(scope, session, api_key, version, msg):
    buf = request_frame(api_key, version, msg)
    header = parse_request_prefix(buf, 1 << 30, scope.quotas.reads_produce_prefix)
    return header, plan_request(scope, session, header), memoryview(buf)[header.header_length :]


def produce(*topics, acks=1):
    return new_request(
        PRODUCE,
        9,
        acks=acks,
        timeout_ms=1000,
        topic_data=[
            {"name": t, "partition_data": [{"index": 0, "records": b""}, {"index": 1, "records": b""}]} for t in topics
        ],
    )


def request_frame(api_key: int, version: int, msg, correlation_id: int = 7) -> bytearray:
    return bytearray(
        frame(encode_request_header(api_key, version, correlation_id, "tenant") + encode_request(api_key, version, msg))
    )
