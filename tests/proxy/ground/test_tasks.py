"""proxy.ground.tasks.wait_for: a cancellation that arrives as the awaited call finishes is not lost (Python 3.11's
``asyncio.wait_for`` returns the call's result then, and the cancelled task runs on), and the bound still holds."""

from __future__ import annotations

import asyncio
import sys

import pytest

from proxy.ground.tasks import cancel_and_wait, wait_for


async def cancelled_as_it_finishes(bounded) -> tuple[bool, list[str]]:
    """A task awaiting ``bounded(call, 10)``; the call finishes and the task is cancelled in the same loop
    iteration, before the task wakes. Whether the task ended cancelled, and what it did after the call."""
    call = asyncio.get_running_loop().create_future()
    after: list[str] = []

    async def follower() -> None:
        await bounded(call, 10)
        after.append("ran on after its cancellation")
        await asyncio.sleep(0)

    task = asyncio.create_task(follower())
    await asyncio.sleep(0)  # the follower now waits for the call
    call.set_result(None)
    task.cancel()
    await asyncio.wait({task}, timeout=5)
    return task.cancelled(), after


def test_a_cancellation_as_the_call_finishes_is_kept():
    assert asyncio.run(cancelled_as_it_finishes(wait_for)) == (True, [])


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="the loss is Python 3.11's asyncio.wait_for")
def test_the_standard_wait_for_of_3_11_loses_it():
    """What the test above guards against, shown on the interpreter the proxy runs on."""
    assert asyncio.run(cancelled_as_it_finishes(asyncio.wait_for)) == (False, ["ran on after its cancellation"])


def test_the_bound_still_raises_timeout_and_cancels_the_call():
    async def scenario():
        call = asyncio.create_task(asyncio.sleep(10))
        with pytest.raises(TimeoutError):
            await wait_for(call, 0.01)
        await asyncio.sleep(0)
        return (
            call.cancelled(),
            await wait_for(asyncio.sleep(0, "result"), 1),
            await wait_for(asyncio.sleep(0, 7), None),
        )

    assert asyncio.run(scenario()) == (True, "result", 7)


def test_cancel_and_wait_ends_a_follower_cancelled_as_its_call_finishes():
    async def scenario():
        call = asyncio.get_running_loop().create_future()

        async def follower() -> None:
            while True:
                await wait_for(call, 10)
                await asyncio.sleep(0.01)

        task = asyncio.create_task(follower())
        await asyncio.sleep(0)
        call.set_result(None)
        await asyncio.wait_for(cancel_and_wait(task), 5)  # the standard one here: a hang fails, it does not hang
        return task.cancelled()

    assert asyncio.run(scenario())
