"""Small helpers for the proxy's background tasks."""

from __future__ import annotations

import asyncio


async def cancel_and_wait(task: asyncio.Task | None) -> None:
    """Cancel ``task`` (if any) and wait until it has finished."""
    if task is None:
        return
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass


STOP_TIMEOUT_S = 5.0  # stopping one of the proxy's own Kafka clients never holds shutdown longer


async def stop_client(client) -> None:
    """Stop one of the proxy's own aiokafka clients, within STOP_TIMEOUT_S; a failure to stop is not an error
    (it is already failing, or the proxy is stopping)."""
    try:
        await asyncio.wait_for(client.stop(), STOP_TIMEOUT_S)
    except Exception:  # noqa: BLE001
        pass
