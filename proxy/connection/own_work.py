"""The proxy's own work for a request, run as a task beside the connection (an ``Await`` outcome of a plan: a lookup
the request's decision needs, such as KIP-599's partition counts).

The request path hands the work's ``start`` and its ``done`` to the connection's spawn; the work runs as an asyncio
task, and its result (or the exception it raised, which the request's answer then reports) goes to ``done`` on the
connection, unless the connection closed meanwhile. A request the result lets through may be malformed past its
header: that ends the connection as any frame error does. A task runs to its end even when nothing else refers to
it: the event loop keeps only a weak reference to a task, so each is kept here until it is done.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from proxy.codec.errors import ProtocolError

Start = Callable[[], Awaitable[object]]  # the work (an Await outcome's start)
Done = Callable[[object], None]  # takes its result, or the exception it raised
Spawn = Callable[[Start, Done], None]  # runs a start off the request path, then its done (a connection's)

_RUNNING: set[asyncio.Task[None]] = set()  # every task of this process's own work until it is done


def run_own_work(
    loop: asyncio.AbstractEventLoop,
    start: Start,
    done: Done,
    *,
    closed: Callable[[], bool],
    frame_error: Callable[[ProtocolError], None],
    then: Callable[[], None],
) -> asyncio.Task[None]:
    """Run ``start()`` as a task; then, the connection still open (``closed()`` false), ``done(result)`` and
    ``then()`` (the connection applies its flow's state); ``frame_error`` if ``done`` meets a malformed request."""

    async def run() -> None:
        try:
            result = await start()
        except Exception as exc:  # noqa: BLE001 - the request's answer says what failed
            result = exc
        if closed():
            return
        try:
            done(result)
        except ProtocolError as exc:
            frame_error(exc)
            return
        then()

    task = loop.create_task(run())
    _RUNNING.add(task)
    task.add_done_callback(_RUNNING.discard)
    return task
