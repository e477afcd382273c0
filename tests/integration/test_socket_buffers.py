"""``socket.send.buffer.bytes`` and ``socket.receive.buffer.bytes`` (Kafka's broker settings) size each client
connection's kernel buffers; -1, the default, leaves the kernel's own. Against Tansu, a plain TCP client."""

import socket
import sys

import pytest

from tests.harness import Tansu, free_port, proxy_config, proxy_in_front, wait_until
from tests.integration.os_sockets import tcp_socket

# Linux: the proxy's sockets are read through /proc (tests.integration.os_sockets), and it reports twice the size set
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the proxy's sockets in /proc"),
]


def proxy_side_buffers(proxy, client: socket.socket) -> tuple[int, int]:
    """SO_SNDBUF and SO_RCVBUF of the socket the proxy accepted for ``client``, read through the OS."""
    sock = tcp_socket(client.getsockname()[:2], ("127.0.0.1", proxy.port))
    with sock:
        return sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF), sock.getsockopt(
            socket.SOL_SOCKET, socket.SO_RCVBUF
        )


def connected(proxy) -> socket.socket:
    client = socket.create_connection(("127.0.0.1", proxy.port))
    wait_until(
        lambda: proxy.metric("kafka_quota_proxy_active_connections", listener="PLAINTEXT") == 1,
        10,
        "the proxy holding the client's connection",
    )
    return client


def test_the_configured_sizes_are_set_on_each_client_connection():
    broker_port, proxy_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    settings = {"socket.send.buffer.bytes": 65536, "socket.receive.buffer.bytes": 32768}
    with proxy_in_front(broker, proxy_config(proxy_port, broker_port, **settings)) as proxy:
        client = connected(proxy)
        try:
            assert proxy_side_buffers(proxy, client) == (2 * 65536, 2 * 32768)  # the kernel doubles what it is given
        finally:
            client.close()


def test_minus_one_leaves_the_kernels_own_sizes():
    broker_port, proxy_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    with proxy_in_front(broker, proxy_config(proxy_port, broker_port)) as proxy:
        client = connected(proxy)
        plain = socket.socket()
        try:
            # what the kernel gives a socket nobody sized (the same sysctls apply to the proxy's)
            assert proxy_side_buffers(proxy, client)[0] >= plain.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
        finally:
            plain.close()
            client.close()
