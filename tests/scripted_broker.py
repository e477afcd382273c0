"""A scripted Kafka-protocol broker, for the few socket-level tests Tansu cannot serve.

Tansu is the broker of every integration test. It cannot be made to misbehave, and it closes the connection on
a request header carrying more than a few hundred bytes of tagged fields, so a handful of tests need a broker
that does exactly what they script: answer a huge header, stall in the middle of a response, declare a 2 GiB
response, stay silent for ``acks=0`` (Apache Kafka's behaviour, where Tansu answers). This one reads whole
request frames and hands each to ``answer(sock, header, frame)``; :func:`answer_normally` answers ApiVersions
v0-3, Metadata and Produce (``acks`` other than 0) with responses built by the codec, and nothing else.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable

from proxy.codec.apis import API_VERSIONS, METADATA, PRODUCE
from proxy.codec.header import RequestHeader, encode_response_header, frame
from proxy.codec.messages import decode_request, encode_response, new_response
from proxy.codec.produce_prefix import parse_request_prefix

Answer = Callable[[socket.socket, RequestHeader, bytes], None]


def recv_exactly(sock: socket.socket, n: int) -> bytes | None:
    """``n`` bytes, or None when the peer closes first."""
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def response(header: RequestHeader, body: bytes) -> bytes:
    """A whole response frame answering ``header``, in its version's response header."""
    return frame(encode_response_header(header.api_key, header.api_version, header.correlation_id) + body)


def api_versions_answer(header: RequestHeader) -> bytes:
    version = min(header.api_version, 3)
    msg = new_response(
        API_VERSIONS,
        version,
        error_code=0,
        api_keys=[
            {"api_key": PRODUCE, "min_version": 0, "max_version": 9},
            {"api_key": METADATA, "min_version": 0, "max_version": 12},
            {"api_key": API_VERSIONS, "min_version": 0, "max_version": 3},
        ],
    )
    return frame(
        encode_response_header(API_VERSIONS, version, header.correlation_id)
        + encode_response(API_VERSIONS, version, msg)
    )


def metadata_answer(header: RequestHeader) -> bytes:
    msg = new_response(
        METADATA,
        header.api_version,
        brokers=[{"node_id": 0, "host": "127.0.0.1", "port": 9092}],
        cluster_id="scripted",
        controller_id=0,
        topics=[],
    )
    return response(header, encode_response(METADATA, header.api_version, msg))


def produce_answer(header: RequestHeader, request: bytes, base_offset: int = 0) -> bytes:
    """Every partition of the Produce request accepted at ``base_offset``."""
    version = header.api_version
    msg = decode_request(PRODUCE, version, request[header.header_length :])
    msg = new_response(
        PRODUCE,
        version,
        responses=[
            {
                "name": topic.name,
                "partition_responses": [
                    {"index": p.index, "error_code": 0, "base_offset": base_offset} for p in topic.partition_data
                ],
            }
            for topic in msg.topic_data
        ],
    )
    return response(header, encode_response(PRODUCE, version, msg))


def answer_normally(sock: socket.socket, header: RequestHeader, request: bytes) -> None:
    if header.api_key == API_VERSIONS:
        sock.sendall(api_versions_answer(header))
    elif header.api_key == METADATA:
        sock.sendall(metadata_answer(header))
    elif header.api_key == PRODUCE and header.acks != 0:
        sock.sendall(produce_answer(header, request))


class ScriptedBroker:
    def __init__(self, answer: Answer = answer_normally) -> None:
        self.answer = answer
        self.requests: list[tuple[RequestHeader, bytes]] = []  # every request received, in order
        self._server = socket.create_server(("127.0.0.1", 0))
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()

    @property
    def port(self) -> int:
        return self._server.getsockname()[1]

    def start(self) -> ScriptedBroker:
        threading.Thread(target=self._accept, name="scripted-broker", daemon=True).start()
        return self

    def stop(self) -> None:
        self._server.close()
        with self._lock:
            for conn in self._conns:
                conn.close()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            with self._lock:
                self._conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            while (size := recv_exactly(conn, 4)) is not None:
                body = recv_exactly(conn, struct.unpack(">i", size)[0])
                if body is None:
                    return
                request = size + body
                header = parse_request_prefix(
                    request, max_size=2**31 - 1, max_header=2**31 - 1
                )  # a broker has no header bound
                with self._lock:
                    self.requests.append((header, request))
                self.answer(conn, header, request)
        except OSError:
            return
        finally:
            conn.close()
