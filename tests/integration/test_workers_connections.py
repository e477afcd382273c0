"""``max.connections.per.ip`` across ``workers: N`` (issue 35): the open-connection counts are one count for the
proxy, however the kernel spreads an IP's connections over the workers (SO_REUSEPORT). Before the fix each worker
checked its own count plus the others' as last synced (every ``quota.workers.sync.ms``), so connections opened at
once passed the limit on every worker: 8 let 13 through with 2 workers and 24 with 4."""

from __future__ import annotations

import asyncio
import struct

import pytest

from proxy.codec.apis import API_VERSIONS
from proxy.codec.header import encode_request_header, frame
from tests.harness import wait_until
from tests.integration.workers import samples, scrape, workers_proxy

pytestmark = pytest.mark.integration

LIMIT = 8
ATTEMPTS = 40


async def open_many(port: int, source_ip: str, count: int, timeout_s: float = 15.0):
    """``count`` connections from ``source_ip`` opened at once, each sending an ApiVersions; returns the open
    (served) ones' writers and how many the proxy closed instead."""

    async def one(n: int):
        reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source_ip, 0))
        writer.write(frame(encode_request_header(API_VERSIONS, 0, n, "many")))
        try:
            _, corr = struct.unpack(">ii", await asyncio.wait_for(reader.readexactly(8), timeout_s))
            assert corr == n
            return writer
        except (asyncio.IncompleteReadError, ConnectionResetError):
            writer.close()
            return None

    results = await asyncio.gather(*(one(n) for n in range(count)))
    served = [w for w in results if w is not None]
    return served, count - len(served)


@pytest.mark.parametrize("workers", [2, 4])
def test_max_connections_per_ip_holds_across_workers(tmp_path, workers):
    """40 connections from one IP opened at once, max.connections.per.ip 8: exactly 8 are served, whichever
    workers they reached; once those close, 8 more are served."""
    with workers_proxy(tmp_path, workers, **{"max.connections.per.ip": LIMIT}) as (proc, bootstrap, metrics_port, _):
        port = int(bootstrap.rsplit(":", 1)[1])

        async def scenario():
            served, closed = await open_many(port, "127.0.0.7", ATTEMPTS)
            first = len(served), closed
            spread = samples(
                scrape(metrics_port), "kafka_quota_proxy_connections_closed_total", reason="max_connections_per_ip"
            )
            for writer in served:
                writer.close()
            await asyncio.sleep(0)
            return first, spread

        (served, closed), spread = asyncio.run(scenario())
        assert (served, closed) == (LIMIT, ATTEMPTS - LIMIT)
        assert len(spread) >= 2, f"the connections reached one worker only: {spread}"

        def again() -> bool:
            served, _ = asyncio.run(open_and_close(port))
            return served == LIMIT

        wait_until(again, 30, f"{LIMIT} served again once the first ones closed")


async def open_and_close(port: int):
    served, closed = await open_many(port, "127.0.0.7", ATTEMPTS)
    for writer in served:
        writer.close()
    return len(served), closed
