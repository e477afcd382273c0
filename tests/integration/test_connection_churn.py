"""A hostile tenant's connection churn, through the proxy to Tansu (issue 35): connections opened, stuffed with
pipelined tiny requests and closed at once, over and over. A Kafka broker reads one request per connection at a
time (it mutes the channel until the response is sent), so a connection closed with 50 requests unread costs it one
request: the rest are discarded with the socket. The proxy reads at most ``connections.max.inflight.requests`` ahead
of its answers, so its cost per churned connection, and the queue other clients wait behind, stay bounded by that,
whatever the attacker pipelines.
"""

from __future__ import annotations

import asyncio
import socket
import struct

import pytest

from tests.harness import Tansu, free_port, proxy_config, start_proxy, wait_until

pytestmark = pytest.mark.integration

PIPELINED = 50  # tiny requests stuffed into each churned connection
CHURNED = 200  # connections opened and closed
AT_ONCE = 20


def api_versions_v0(corr: int) -> bytes:
    """ApiVersions v0 with a null client id: 14 bytes, forwarded to the broker."""
    return struct.pack(">ihhih", 10, 18, 0, corr, -1)


async def churn(port: int, source_ip: str, connections: int, pipelined: int) -> int:
    """``connections`` connections from ``source_ip``, ``AT_ONCE`` at a time: each sends ``pipelined`` requests in
    one write and closes without reading. Returns how many connected."""
    loop = asyncio.get_running_loop()
    payload = b"".join(api_versions_v0(n) for n in range(pipelined))
    left = iter(range(connections))
    done = 0

    async def one_after_another() -> None:
        nonlocal done
        for _ in left:
            sock = socket.socket()
            sock.setblocking(False)
            try:
                sock.bind((source_ip, 0))
                await asyncio.wait_for(loop.sock_connect(sock, ("127.0.0.1", port)), 30)
                await loop.sock_sendall(sock, payload)
                done += 1
            finally:
                sock.close()

    await asyncio.gather(*(one_after_another() for _ in range(AT_ONCE)))
    return done


@pytest.fixture
def tansu_proxy():
    broker_port = free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{broker_port}").start()
    try:
        proxy = start_proxy(proxy_config(free_port(), broker_port))  # the shipped defaults
        try:
            yield proxy
        finally:
            proxy.stop()
    finally:
        broker.stop()


def test_a_churned_connection_costs_the_proxy_a_bounded_number_of_requests(tansu_proxy):
    """200 connections, each with 50 pipelined ApiVersions sent in one write and then closed unread. Before the
    fix the proxy read all 50 of each (its in-flight bound was 200) and forwarded every one to the broker after the
    client had gone: 10,000 requests of work queued in front of every other client. With the default bound (5,
    the Java producer's max.in.flight.requests.per.connection) it reads 5 ahead of its answers; the answers meet a
    closed socket and the rest are dropped with it, as a Kafka broker drops them."""
    proxy = tansu_proxy
    bound = proxy.metric("kafka_quota_proxy_connection_inflight_max_requests")
    assert bound == 5  # the default
    connected = asyncio.run(churn(proxy.port, "127.0.0.9", CHURNED, PIPELINED))
    assert connected == CHURNED
    wait_until(
        lambda: proxy.metric("kafka_quota_proxy_active_connections", listener="PLAINTEXT") == 0,
        60,
        "every churned connection closed by the proxy",
    )
    read = proxy.metric("kafka_quota_proxy_requests_total", listener="PLAINTEXT", api="ApiVersions")
    # each connection: its bound's worth, and at most as many again read while its first answers were on their
    # way to the closed socket (the reset arrives a moment after the first answer is written)
    assert read <= CHURNED * 3 * bound, f"{read:.0f} requests read from {CHURNED} connections closed at once"
    assert read >= CHURNED, "every connection had its first request read"
