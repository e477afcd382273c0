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



async def cancel_all(tasks) -> None:
    """Cancel every task of ``tasks``, then wait until each has finished; what they end with (cancelled, or an error
    they stopped on) is not the stopper's business."""
    for task in tasks:
        task.cancel()
    for task in tasks:
        try:
            await task
        except (asyncio.CancelledError, Exception):  # noqa: BLE001
            pass
