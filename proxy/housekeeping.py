"""The proxy's housekeeping, off the request path: quota sensors idle for an hour dropped (as Kafka does), so memory is
bounded by active clients, and KIP-936's producer-id cache cleanup. (Each connection ends its own timeouts on its one
timer: nothing here waits for a connection.)"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from proxy.enforcement.proxy_quotas import ProxyQuotas
    from quota.managers.connection import ConnectionQuotas

SENSOR_EXPIRY_INTERVAL_S = 60.0
HOUSEKEEPING_INTERVAL_S = 1.0
EXPIRY_BATCH = 500  # idle sensors dropped per manager between two turns of the loop (about 5 ms of work)
PID_CLEANUP_BATCH = 1_000  # producer-id users looked at per cleanup (~7 ms; a pass over 10^5 users: 100 cleanups)


async def housekeep(quotas: ProxyQuotas, connection_quotas: ConnectionQuotas, pid_cleanup_interval_ms: int) -> None:
    """Runs until cancelled. ``pid_cleanup_interval_ms``: producer.id.quota.cache.cleanup.scheduler.interval.ms (at
    most once a second here)."""
    loop = asyncio.get_running_loop()
    next_expiry = loop.time() + SENSOR_EXPIRY_INTERVAL_S
    pid_cleanup_s = max(pid_cleanup_interval_ms / 1000.0, HOUSEKEEPING_INTERVAL_S)
    next_pid_cleanup = loop.time() + pid_cleanup_s
    while True:
        await asyncio.sleep(HOUSEKEEPING_INTERVAL_S)
        if loop.time() >= next_pid_cleanup:  # KIP-936's cache cleanup, every set, a slice of the users at a time
            quotas.cleanup_producer_ids(quotas.clock.now_ms(), PID_CLEANUP_BATCH)
            next_pid_cleanup = loop.time() + pid_cleanup_s
        quotas.note_overflow()  # a warning a minute at most while full sensor tables overflow
        if loop.time() >= next_expiry:
            while quotas.expire_idle(EXPIRY_BATCH):  # a batch, then the loop's other work, until done
                await asyncio.sleep(0)
            connection_quotas.expire_idle(quotas.clock.now_ms())
            next_expiry = loop.time() + SENSOR_EXPIRY_INTERVAL_S
