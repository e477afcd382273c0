"""Connection creation rates (KIP-612) and counts (KIP-402) on real sockets, through the proxy to Tansu (the counts
also to Apache Kafka, ``upstream``; the per-IP rate with Kafka's short windows is in
tests/integration/kafka/test_quotas_connections.py).

Clients connect from several loopback source addresses (127.0.0.2, 127.0.0.3, ... are all loopback on Linux), send
an ApiVersions request and count the connection as served when the broker's answer comes back, or as closed when
the proxy closes it first. Every loop is bounded in count and time.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from demo.storms import connect_once as demo_connect_once
from tests.harness import connections_counted, free_port, proxy_config, start_proxy, wait_until
from tests.integration import raw

pytestmark = pytest.mark.integration


async def connect_once(port: int, source_ip: str, answer_timeout_s: float = 5.0) -> str:
    """One connection from ``source_ip``: "served" (the broker answered), "closed" (the proxy closed it), or
    "pending" (no answer within the timeout: still in the backlog, or held). The demo's connection storm does the
    same."""
    return await demo_connect_once("127.0.0.1", port, source_ip, answer_timeout_s)


async def storm(port: int, source_ip: str, per_s: float, seconds: float) -> list[tuple[float, str]]:
    """``per_s`` connections a second from ``source_ip`` for ``seconds``; each outcome with its start time."""
    start = time.monotonic()
    tasks = []
    for i in range(int(per_s * seconds)):
        await asyncio.sleep(max(0.0, start + i / per_s - time.monotonic()))
        tasks.append((time.monotonic() - start, asyncio.ensure_future(connect_once(port, source_ip))))
    return [(at, await task) for at, task in tasks]


def start(broker_port: int, quotas=None, listeners=None, **settings):
    config = proxy_config(free_port(), broker_port, quotas=quotas, **settings)
    if listeners is not None:
        config["listeners"] = listeners
    return start_proxy(config)


def assert_all_released(proxy) -> None:
    """Every served connection is released from the open counts once its client has closed it: the proxy sees the
    last closes a moment after the clients make them (5 s at most)."""
    wait_until(lambda: connections_counted(proxy) == 0, 10, "every connection released")


@pytest.mark.measures_rate
def test_an_ip_over_its_connection_rate_is_throttled_while_another_ip_connects_at_full_speed(broker):
    """connection_creation_rate 5 for 127.0.0.2; 20 connects/s from it and from 127.0.0.3 for 12 s. 127.0.0.2 gets
    its start-up allowance (5 x 10 windows = 50, as Kafka's sampled rate allows) and then about 5 a second once its
    oldest sample expires (at 11 s); the rest are held up to 1 s and closed. 127.0.0.3 has no quota and is served
    every time."""
    proxy = start(broker, quotas=[{"entity": {"ip": "127.0.0.2"}, "connection_creation_rate": 5}])
    try:

        async def both():
            return await asyncio.gather(storm(proxy.port, "127.0.0.2", 20, 12), storm(proxy.port, "127.0.0.3", 20, 12))

        limited, free = asyncio.run(both())
        served = [at for at, outcome in limited if outcome == "served"]
        closed = [at for at, outcome in limited if outcome == "closed"]
        assert len(served) + len(closed) == 240, limited
        assert 48 <= sum(1 for at in served if at < 4) <= 56, served
        assert not [at for at in served if 4 <= at < 9.5], served  # over its rate until its first sample expires
        assert 50 <= len(served) <= 72, served
        assert [outcome for _, outcome in free] == ["served"] * 240
        assert proxy.metric(
            "kafka_quota_proxy_connections_closed_total", listener="PLAINTEXT", reason="connection_rate_ip"
        ) == len(closed)
        assert proxy.metric("kafka_quota_proxy_ip_connection_accept_throttles_total", listener="PLAINTEXT") >= len(
            closed
        )
        assert 2 < proxy.metric("kafka_quota_proxy_ip_connection_accept_rate", ip="127.0.0.2") <= 5.2
        assert_all_released(proxy)
    finally:
        proxy.stop()


@pytest.mark.measures_rate
def test_the_listener_rate_holds_under_a_burst_from_many_ips_and_the_internal_listener_is_exempt(broker):
    """max.connection.creation.rate 10: a burst of 200 connections from 20 IPs gets the allowance (about 100) at
    once, about 10 more in its first second, then about one a second (each accept waits at most one window), the rest waiting in the kernel's backlog
    (not closed). Meanwhile 30 connections on the internal listener are all served at once."""
    external, internal = free_port(), free_port()
    listeners = [
        {"name": "EXTERNAL", "bind": f"127.0.0.1:{external}"},
        {"name": "INTERNAL", "bind": f"127.0.0.1:{internal}", "internal": True},
    ]
    proxy = start(broker, listeners=listeners, **{"max.connection.creation.rate": 10})
    try:

        async def burst():
            started = time.monotonic()
            external_tasks = [
                asyncio.ensure_future(connect_once(external, f"127.0.0.{10 + i % 20}", 4.0)) for i in range(200)
            ]
            await asyncio.sleep(0.5)  # the external listener is past its allowance now
            internal_results = await asyncio.gather(*(connect_once(internal, "127.0.0.50", 4.0) for _ in range(30)))
            internal_s = time.monotonic() - started
            return await asyncio.gather(*external_tasks), internal_results, internal_s

        outcomes, internal_outcomes, internal_s = asyncio.run(burst())
        assert outcomes.count("closed") == 0
        # the allowance (10/s over the 10 windows a fresh rate divides by), the first second's growing elapsed time
        # (about 10 more), then one a second; 200 would be served without the limit
        assert 95 <= outcomes.count("served") <= 125, outcomes.count("served")
        assert internal_outcomes == ["served"] * 30 and internal_s < 3
        assert proxy.metric("kafka_quota_proxy_connection_accept_throttles_total", listener="EXTERNAL") >= 1
        assert proxy.metric("kafka_quota_proxy_connection_accept_throttles_total", listener="INTERNAL") == 0
    finally:
        proxy.stop()


# counts, not rates: no measures_rate mark, so it runs beside the rate groups
def test_connections_over_the_count_limits_are_closed_at_once(upstream):
    """KIP-402's counts: ``max.connections.per.ip`` 2 with an override of 3 for 127.0.0.5, ``max.connections`` 6.
    Each connection is kept open once the broker has answered its ApiVersions; one over a count is closed by the
    proxy before it reaches the broker (Kafka's own connection limits are left at their defaults, unlimited)."""
    settings = {"max.connections.per.ip": 2, "max.connections.per.ip.overrides": "127.0.0.5:3", "max.connections": 6}
    with upstream.sidecar(**settings) as proxy:
        a, b, c = raw.count_limit_outcomes(proxy.port)
        assert a == ["served", "served", "closed"]
        assert b == ["served", "served", "served", "closed"]
        assert c == ["served", "closed"]
        metric = "kafka_quota_proxy_connections_closed_total"
        assert proxy.metric(metric, listener="PLAINTEXT", reason="max_connections_per_ip") == 2
        assert proxy.metric(metric, listener="PLAINTEXT", reason="max_connections") == 1
        assert_all_released(proxy)


def test_a_connection_that_would_eat_into_the_proxys_own_descriptors_is_closed_at_once(broker):
    """connections.reserved.file.descriptors keeps all but 4 of the open-files limit for the proxy itself: room for
    two client connections (two descriptors each). The third is closed at once, counted
    (connections_closed reason fd_reserve); once one closes, the next is served."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    proxy = start(broker, **{"connections.reserved.file.descriptors": soft - 4})
    try:

        async def three():
            outcomes, (first, second) = await raw.hold_open(proxy.port, "127.0.0.3", 2)
            third = await connect_once(proxy.port, "127.0.0.2")
            first.close()
            await first.wait_closed()
            wait_until(
                lambda: proxy.metric("kafka_quota_proxy_active_connections", listener="PLAINTEXT") == 1,
                10,
                "the first connection released",
            )
            fourth = await connect_once(proxy.port, "127.0.0.2")
            second.close()
            await second.wait_closed()
            return outcomes, third, fourth

        assert asyncio.run(three()) == (["served", "served"], "closed", "served")
        assert (
            proxy.metric("kafka_quota_proxy_connections_closed_total", listener="PLAINTEXT", reason="fd_reserve") == 1
        )
    finally:
        proxy.stop()
