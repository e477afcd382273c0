"""A connection core between a fake client and the test as the broker, with a controller mutation quota on the
client id admin (the mutation request and refund tests)."""

from __future__ import annotations

import struct

from config.loader import parse_config
from proxy.apis import ConnectionScope
from proxy.cluster.topics import Topics
from proxy.codec.apis import CREATE_PARTITIONS, CREATE_TOPICS, DELETE_TOPICS, STREAMS_GROUP_HEARTBEAT
from proxy.codec.header import encode_request_header, encode_response_header, frame, parse_request_header
from proxy.codec.messages import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    new_request,
    new_response,
)
from proxy.connection.core import ConnectionCore
from proxy.enforcement.proxy_quotas import ProxyQuotas
from proxy.ops.usage_table import UsageTable
from quota.primitives.clock import ManualClock
from tests.fakes import NULL_API_METRICS

THROTTLED = 89


class Wire:
    """A connection core between a fake client and this test as the broker."""

    def __init__(self, rate=5, num=100, counts=None, paused=False, claims=None):
        """``rate``: the client admin's controller_mutation_rate (None: none); ``paused``: a volume at PAUSE;
        ``claims``: a worker's created-topic claims (None: a single process's)."""
        self.clock = ManualClock(1_000_000)
        raw = {
            "upstream": {"bootstrap_servers": ["b:1"]},
            "listeners": [{"name": "L", "bind": "h:2"}],
            "quotas": [{"entity": {"client-id": "admin"}, "controller_mutation_rate": rate}] if rate else [],
            "settings": {"controller.quota.window.num": num},
        }
        if paused:
            raw["volume_usage"] = {"missing_data_action": "PAUSE"}
        quotas = ProxyQuotas(parse_config(raw), self.clock)
        if paused:
            quotas.volume.brokers({1})  # a broker without a snapshot: the fail-safe PAUSE
        more = {"counts": counts, "claims": claims}
        self.scope = ConnectionScope(None, Topics(), quotas.home, **{k: v for k, v in more.items() if v is not None})
        self.to_client = bytearray()
        self.to_broker = bytearray()
        self.usage = UsageTable()  # the usage log's table
        self.core = ConnectionCore(
            self.scope,
            session(),
            max_request_bytes=1 << 20,
            max_response_bytes=1 << 20,
            max_inflight=10,
            write_client=self.to_client.extend,
            write_broker=self.to_broker.extend,
            clock=lambda: self.clock.now_ms() * 1_000_000,
            api_metrics=lambda key: NULL_API_METRICS,
            usage=self.usage,
        )

    def logged(self, api_key=CREATE_TOPICS):
        """The usage log's partition_mutations of the client admin's ``api_key`` requests in this interval."""
        return self.usage.row("L", "127.0.0.1", "ANONYMOUS", "admin", api_key).partition_mutations

    def send(self, api_key, version, corr, **fields):
        body = encode_request(api_key, version, new_request(api_key, version, **fields))
        self.core.client_bytes(memoryview(frame(encode_request_header(api_key, version, corr, "admin") + body)))
        self.core.step(self.clock.now_ms() * 1_000_000)

    def broker_requests(self):
        """Requests the broker received since the last call: (header, decoded body)."""
        out = []
        buf = self.to_broker
        while len(buf) >= 4:
            size = struct.unpack_from(">i", buf)[0]
            header = parse_request_header(buf, 1 << 20)
            body = bytes(buf[header.header_length : size + 4])
            out.append((header, decode_request(header.api_key, header.api_version, body)))
            del buf[: size + 4]
        return out

    def answer(self, header, **fields):
        msg = new_response(header.api_key, header.api_version, **fields)
        data = frame(
            encode_response_header(header.api_key, header.api_version, header.correlation_id)
            + encode_response(header.api_key, header.api_version, msg)
        )
        self.core.broker_bytes(memoryview(data))
        self.core.step(self.clock.now_ms() * 1_000_000)

    def client_responses(self, api_key, version):
        """Responses the client received: (correlation id, decoded body)."""
        out = []
        buf = self.to_client
        while len(buf) >= 8:
            size, corr = struct.unpack_from(">ii", buf)
            header_length = 4 + 4 + (1 if version >= _flexible(api_key) else 0)
            out.append((corr, decode_response(api_key, version, bytes(buf[header_length : size + 4]))))
            del buf[: size + 4]
        return out


def _flexible(api_key):
    return {CREATE_TOPICS: 5, DELETE_TOPICS: 4, CREATE_PARTITIONS: 2, STREAMS_GROUP_HEARTBEAT: 0}[api_key]


class WantedCounts:
    """Stands in for proxy.cluster.created_counts.CreatedCounts: records what is wanted; the test answers."""

    def __init__(self):
        self.wanted = []

    def want(self, name, then):
        self.wanted.append((name, then))


def session():
    from proxy.apis import Session

    return Session("L", "127.0.0.1")
