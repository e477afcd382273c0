"""One connection core on a fake clock, with what it wrote to each side, for tests that play the client and the
broker on bytes (no sockets)."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from proxy.apis import ConnectionScope, Session, plan_request
from proxy.codec.header import encode_request_header, encode_response_header, frame, parse_request_header
from proxy.codec.messages import encode_request, encode_response, new_request, new_response
from proxy.connection.core import ConnectionCore
from proxy.connection.request_frames import Planner
from proxy.ops.usage_table import UsageTable
from quota.primitives.clock import ManualClock
from tests.fakes import NULL_API_METRICS


class CoreWire:
    """``core`` between a client and the test as its broker: ``to_client`` and ``to_broker`` gather what it wrote;
    ``usage`` is the usage log's table it fills. Its APIs' metrics are ``api_metrics``' (none kept unless told), its
    requests planned by ``planner``."""

    def __init__(
        self,
        scope: ConnectionScope,
        clock: ManualClock,
        session: Session | None = None,
        *,
        api_metrics: Callable[[int], Any] = lambda key: NULL_API_METRICS,
        planner: Planner = plan_request,
    ) -> None:
        self.scope, self.clock, self.session = scope, clock, session or Session("L", "127.0.0.1")
        self.to_client, self.to_broker = bytearray(), bytearray()
        self.usage = UsageTable()
        self.core = ConnectionCore(
            scope,
            self.session,
            max_request_bytes=1 << 20,
            max_response_bytes=1 << 24,
            max_inflight=10,
            write_client=self.to_client.extend,
            write_broker=self.to_broker.extend,
            clock=self.now_ns,
            api_metrics=api_metrics,
            planner=planner,
            usage=self.usage,
        )

    def now_ns(self) -> int:
        return self.clock.now_ms() * 1_000_000

    def from_client(self, data: bytes) -> None:
        self.core.client_bytes(memoryview(data))
        self.core.step(self.now_ns())

    def from_broker(self, data: bytes) -> None:
        self.core.broker_bytes(memoryview(data))
        self.core.step(self.now_ns())

    def send(self, api_key: int, version: int, corr: int, client_id: str, **fields: Any) -> bytes:
        """The client sends a request of these fields, encoded by the codec; returns its frame."""
        body = encode_request(api_key, version, new_request(api_key, version, **fields))
        data = frame(encode_request_header(api_key, version, corr, client_id) + body)
        self.from_client(data)
        return data

    def answer(self, request: bytes, **fields: Any) -> bytes:
        """The broker answers ``request`` (a frame it received) with these fields; returns the answer's frame."""
        header = parse_request_header(request, 1 << 20)
        api_key, version = header.api_key, header.api_version
        body = encode_response(api_key, version, new_response(api_key, version, **fields))
        data = frame(encode_response_header(api_key, version, header.correlation_id) + body)
        self.from_broker(data)
        return data

    def broker_request(self) -> bytes:
        """The one request frame the broker received since the last call."""
        (size,) = struct.unpack_from(">i", self.to_broker)
        assert len(self.to_broker) == size + 4
        data = bytes(self.to_broker)
        self.to_broker.clear()
        return data

    def client_response(self) -> bytes:
        """The bytes the client received since the last call."""
        data = bytes(self.to_client)
        self.to_client.clear()
        return data

    def reading_client(self) -> bool:
        return self.core.step(self.now_ns()).reading_client
