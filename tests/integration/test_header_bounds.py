"""request.header.max.bytes against Tansu: a 16 MiB request header (a million tagged fields) closes only its own
connection, after the proxy has read little more than the limit; a client on another connection keeps being
served, and a client id at the limit's edge still works."""

from __future__ import annotations

import socket
import struct
import threading

import pytest

from proxy.codec.apis import METADATA
from tests.harness import Tansu, free_port, proxy_config, start_proxy
from tests.integration import raw
from tests.proxy.codec.builders import uvarint

pytestmark = pytest.mark.integration


def test_a_huge_header_closes_its_own_connection_only():
    proxy_port, broker_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    proxy = start_proxy(
        proxy_config(
            proxy_port, broker_port, **{"request.header.max.bytes": 65536, "socket.request.max.bytes": 32 << 20}
        )
    )
    try:
        fields = b"".join(uvarint(i % 100) + uvarint(14) + b"x" * 14 for i in range(1_000_000))  # 16 MB
        head = struct.pack(">hhih", 3, 12, 7, 1) + b"c" + uvarint(1_000_000) + fields
        payload = head + b"\x00\x01\x00"
        attacker = socket.create_connection(("127.0.0.1", proxy_port))
        bystander = raw.connect(proxy_port)
        sent = [0]

        def send_all() -> None:
            data = struct.pack(">i", len(payload)) + payload
            try:
                for i in range(0, len(data), 65536):
                    sent[0] += attacker.send(data[i : i + 65536])
            except OSError:
                pass  # closed by the proxy

        sender = threading.Thread(target=send_all)
        sender.start()
        for _ in range(20):  # the bystander is answered meanwhile
            assert raw.exchange(bystander, METADATA, 12, topics=[]).brokers
        sender.join(30)
        attacker.settimeout(5)
        try:
            assert attacker.recv(1) == b""  # closed
        except ConnectionResetError:
            pass  # closed with unread bytes in the proxy's socket: a reset
        assert sent[0] < len(payload)  # long before the whole header was taken
        assert (
            proxy.metric("kafka_quota_proxy_connections_closed_total", listener="PLAINTEXT", reason="frame_error") == 1
        )
        ok_id = struct.pack(">hhih", 3, 12, 8, 30000) + b"i" * 30000 + uvarint(0) + b"\x01\x01\x00\x00"
        bystander.sendall(struct.pack(">i", len(ok_id)) + ok_id)
        assert raw.read_frame(bystander)  # a 30,000-byte client id is under the limit: answered
        attacker.close()
        bystander.close()
    finally:
        proxy.stop()
        broker.stop()
