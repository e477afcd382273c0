"""Small helpers for the proxy's background tasks."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def wait_for(aw: Awaitable[T], timeout: float | None) -> T:
    """``aw`` bounded by ``timeout`` seconds (``TimeoutError`` past it), as Python 3.12's ``asyncio.wait_for`` does
    it: awaited in the calling task under ``asyncio.timeout``. Python 3.11's own runs ``aw`` as a task of its own and,
    when the caller is cancelled just as that task finishes, returns the result and drops the cancellation, so a
    background task stopped at that moment runs on: the dynamic-config follower, cancelled by ``ProxyApp.stop`` while
    it read the topic's offsets, ran on until the 5 s stop bound in about one stop of three, and ``cancel_all`` waits
    without a bound."""
    if timeout is None:
        return await aw
    async with asyncio.timeout(timeout):
        return await aw


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
