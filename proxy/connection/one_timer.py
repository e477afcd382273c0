"""A connection's one timer (STYLE 20: one mechanism ends every time-bound state).

The flow says when something next changes by itself (a mute's or a hold's end, the timeouts' next check); the socket
code arms this timer for it after every event. Armed earlier already, it stays: the callback looks at the flow again
and arms the next. Times are the connection's clock (monotonic ns); the event loop schedules in its own seconds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class OneTimer:
    __slots__ = ("_loop", "_callback", "_handle", "_at")

    def __init__(self, loop: asyncio.AbstractEventLoop, callback: Callable[[], None]) -> None:
        self._loop = loop
        self._callback = callback  # called once the deadline comes (the timer is then unarmed)
        self._handle: asyncio.TimerHandle | None = None
        self._at = 0  # the armed deadline (ns)

    def arm(self, deadline: int | None, now: int) -> None:
        """Call back at ``deadline`` (ns; None: no deadline), or earlier if already armed for earlier."""
        if deadline is not None and (self._handle is None or deadline < self._at):
            if self._handle is not None:
                self._handle.cancel()
            self._at = deadline
            self._handle = self._loop.call_later(max(deadline - now, 0) / 1e9, self._fired)

    def _fired(self) -> None:
        self._handle = None
        self._callback()

    def close(self) -> None:
        """Never call back again; the callback is dropped, so a closed connection is freed without the cycle
        collector (the callback is the connection's own method)."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._callback = _nothing


def _nothing() -> None:
    pass
