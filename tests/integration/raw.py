"""One request at a time over a plain socket, encoded and decoded with the proxy's codec."""

from __future__ import annotations

import socket
import struct

from proxy.codec.header import encode_request_header, frame, response_header_length
from proxy.codec.messages import decode_response, encode_request, new_request


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed")
        buf += chunk
    return buf


def read_frame(sock: socket.socket) -> bytes:
    """One response frame, without its size prefix."""
    size = struct.unpack(">i", recv_exactly(sock, 4))[0]
    return recv_exactly(sock, size)


def exchange(sock: socket.socket, api_key: int, version: int, correlation_id: int = 1, **fields):
    body = encode_request(api_key, version, new_request(api_key, version, **fields))
    sock.sendall(frame(encode_request_header(api_key, version, correlation_id, "raw-test") + body))
    size = struct.unpack(">i", recv_exactly(sock, 4))[0]
    response = struct.pack(">i", size) + recv_exactly(sock, size)
    assert struct.unpack_from(">i", response, 4)[0] == correlation_id
    return decode_response(api_key, version, response[response_header_length(api_key, version, response):])


def connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    return sock


__all__ = ["connect", "exchange", "read_frame", "recv_exactly"]
