"""Connection creation rate per client IP (KIP-612) through the sidecar proxy in front of Apache Kafka (``kafka1``),
with Kafka's short windows (3 x 1 s): the twin of the per-IP test of tests/integration/test_connection_limits.py
(Tansu, Kafka's default 11 windows: its bounds are the other windows', so it is written there on its own; the count
limits (KIP-402) are one test there over both brokers).

The rate: two loopback source addresses (127.0.0.2 with ``connection_creation_rate`` 5/s, 127.0.0.3 with none) each open 20
connections a second, each sending ApiVersions v0 and counted as served when Kafka's answer comes back through the
proxy, closed when the proxy closes it first. Kafka behind the proxy sees every connection coming from the proxy's
own address, so the per-IP limit is the proxy's to keep; Kafka's own connection limits are left at their defaults
(unlimited), so nothing it does is counted here. Short windows (3 x 1 s) so the IP's allowance is used up and its
oldest sample expires within seconds. Kafka's sampled rate (the proxy's, as Kafka's ``Rate``) divides a fresh
rate's count by at least num - 1 windows plus the time since its first sample, so 127.0.0.2 is served until its
count passes 5/s x (2 s + t), about 13 connections in its first 0.7 s; then it is over its rate (each connection
held up to 1 s and closed) until that first sample leaves the window at 3 s, when it bursts again the same way. In
all it gets at least its allowance and the rate for the time after the first window span (10 + 5 x 3), and at most
the rate over the storm plus the allowance (5 x (6 + 2)).
"""

from __future__ import annotations

import asyncio
import time

import pytest

from demo.storms import connect_once
from tests.harness import connections_counted, wait_until
from tests.integration.kafka.quotas_common import configs

pytestmark = pytest.mark.integration

RATE, PER_S, SECONDS = 5, 20, 6


async def storm(port: int, source_ip: str) -> list[tuple[float, str]]:
    """PER_S connections a second from ``source_ip`` for SECONDS; each outcome with its start time."""
    start = time.monotonic()
    tasks = []
    for i in range(PER_S * SECONDS):
        await asyncio.sleep(max(0.0, start + i / PER_S - time.monotonic()))
        tasks.append((time.monotonic() - start, asyncio.ensure_future(connect_once("127.0.0.1", port, source_ip, 5.0))))
    return [(at, await task) for at, task in tasks]


def test_an_ip_over_its_connection_rate_is_throttled_while_another_ip_connects_at_full_speed(kafka1):
    cluster = kafka1
    quotas = [{"entity": {"ip": "127.0.0.2"}, "connection_creation_rate": RATE}]
    with cluster.sidecars(configs=configs(cluster, quotas, **{"quota.window.num": 3})) as (proxy,):

        async def both():
            return await asyncio.gather(storm(proxy.port, "127.0.0.2"), storm(proxy.port, "127.0.0.3"))

        limited, free = asyncio.run(both())
        served = [at for at, outcome in limited if outcome == "served"]
        closed = [at for at, outcome in limited if outcome == "closed"]
        assert len(served) + len(closed) == PER_S * SECONDS, limited  # none left pending: held at most 1 s
        assert 11 <= sum(1 for at in served if at < 1) <= 16, served  # the allowance: 5/s x (2 windows + 0.7 s)
        # over its rate until its first sample expires at 3 s (a connection held up to 1 s from 2 s on may be
        # served when it is checked again after that)
        assert not [at for at in served if 1 <= at < 1.9], served
        assert 10 + RATE * (SECONDS - 3) <= len(served) <= RATE * (SECONDS + 2), served
        assert [outcome for _, outcome in free] == ["served"] * PER_S * SECONDS
        assert proxy.metric(
            "kafka_quota_proxy_connections_closed_total", listener="PLAINTEXT", reason="connection_rate_ip"
        ) == len(closed)
        assert proxy.metric("kafka_quota_proxy_ip_connection_accept_throttles_total", listener="PLAINTEXT") >= len(
            closed
        )
        # every served connection released from the open counts once its client closed it
        wait_until(lambda: connections_counted(proxy) == 0, 5, "every connection released")
