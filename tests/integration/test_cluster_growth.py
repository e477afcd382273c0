"""Cluster mode: a broker that appears later gets its proxy port without a restart.

Tansu runs as a single node, so this uses a small scripted broker in tests: two listening sockets playing
brokers 1 and 2 of one cluster, answering Metadata v1 with the brokers known "so far" (first only broker 1,
then both). The test checks the proxy opens ``broker_port_base + 2`` when broker 2 first shows up, and that a
connection to that port reaches broker 2.
"""

import asyncio
import socket
import struct
import threading

import pytest

from proxy.codec.apis import METADATA
from proxy.codec.header import encode_response_header, frame, parse_request_header
from proxy.codec.messages import encode_response, new_response
from tests.harness import cluster_ports, free_port, start_proxy
from tests.integration import raw

pytestmark = pytest.mark.integration


class ScriptedCluster:
    """Brokers 1 and 2 on loopback; each answers Metadata with the cluster as currently known."""

    def __init__(self) -> None:
        self.known = [1]
        self.ports = {1: free_port(), 2: free_port()}
        self.served_by: list[int] = []  # node id of the broker that answered each Metadata request
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.servers = []

    def start(self) -> "ScriptedCluster":
        self.thread.start()
        for node_id, port in self.ports.items():
            server = asyncio.run_coroutine_threadsafe(
                asyncio.start_server(lambda r, w, n=node_id: self._serve(n, r, w), "127.0.0.1", port), self.loop
            ).result(5)
            self.servers.append(server)
        return self

    async def _serve(self, node_id, reader, writer):
        try:
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                request = struct.pack(">i", size) + await reader.readexactly(size)
                header = parse_request_header(request, 1 << 20)
                assert header.api_key == METADATA and header.api_version == 1
                self.served_by.append(node_id)
                body = encode_response(
                    METADATA,
                    1,
                    new_response(
                        METADATA,
                        1,
                        controller_id=1,
                        brokers=[{"node_id": n, "host": "127.0.0.1", "port": self.ports[n]} for n in self.known],
                    ),
                )
                writer.write(frame(encode_response_header(METADATA, 1, header.correlation_id) + body))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    def stop(self):
        for server in self.servers:
            server.close()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


def metadata(port: int, correlation_id: int = 1):
    sock = raw.connect(port)
    try:
        return raw.exchange(sock, METADATA, 1, correlation_id, topics=[])
    finally:
        sock.close()


def test_a_broker_that_appears_later_gets_its_port():
    cluster = ScriptedCluster().start()
    bootstrap, base = cluster_ports()
    proxy = start_proxy(
        {
            "upstream": {"bootstrap_servers": [f"127.0.0.1:{cluster.ports[1]}"]},
            "listeners": [{"name": "PLAINTEXT", "bind": f"127.0.0.1:{bootstrap}", "broker_port_base": base}],
            "metrics": {"bind": "127.0.0.1:0"},
        }
    )
    try:
        first = metadata(bootstrap)
        assert [(b.node_id, b.host, b.port) for b in first.brokers] == [(1, "127.0.0.1", base + 1)]
        socket.create_connection(("127.0.0.1", base + 1), timeout=5).close()  # broker 1's port open, 2's not:
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", base + 2), timeout=1).close()

        cluster.known = [1, 2]
        second = metadata(base + 1)  # through broker 1's own proxy port
        assert [(b.node_id, b.port) for b in second.brokers] == [(1, base + 1), (2, base + 2)]
        metadata(base + 2)  # broker 2's port now exists and leads to broker 2
        assert cluster.served_by == [1, 1, 2]
    finally:
        proxy.stop()
        cluster.stop()
