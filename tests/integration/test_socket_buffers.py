"""``socket.send.buffer.bytes`` and ``socket.receive.buffer.bytes`` (Kafka's broker settings) size each client
connection's kernel buffers; -1, the default, leaves the kernel's own. Against Tansu, a plain TCP client."""

import socket
import sys

import pytest

from tests.harness import Tansu, free_port, proxy_config, proxy_in_front, wait_until

pytestmark = pytest.mark.integration


def proxy_side_buffers(proxy) -> tuple[int, int]:
    async def read():
        conn = next(iter(proxy.app.connections))
        sock = conn.transport.get_extra_info("socket")
        return sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF), sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)

    return proxy.call(read())


def connected(proxy) -> socket.socket:
    client = socket.create_connection(("127.0.0.1", proxy.port))

    async def count():
        return len(proxy.app.connections)

    wait_until(lambda: proxy.call(count()) == 1, 10, "the proxy holding the client's connection")
    return client


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux reports twice the size set (socket(7))")
def test_the_configured_sizes_are_set_on_each_client_connection():
    broker_port, proxy_port = free_port(), free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
    settings = {"socket.send.buffer.bytes": 65536, "socket.receive.buffer.bytes": 32768}
    with proxy_in_front(broker, proxy_config(proxy_port, broker_port, **settings)) as proxy:
        client = connected(proxy)
        try:
            assert proxy_side_buffers(proxy) == (2 * 65536, 2 * 32768)  # the kernel doubles what it is given
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
            assert proxy_side_buffers(proxy)[0] >= plain.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
        finally:
            plain.close()
            client.close()
