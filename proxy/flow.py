"""Pausing a transport's reading for several independent reasons.

Reading from a socket stops while any reason holds: the other side's write buffer is full (back-pressure),
the connection is muted by a quota decision, or it is draining at shutdown. It resumes only when every reason
has been lifted. This is the one place that calls ``pause_reading`` / ``resume_reading``; quota code never
holds a transport, it returns how long to mute and the proxy calls :meth:`ReadGate.mute`.
"""

from __future__ import annotations

import asyncio

BACKPRESSURE = "backpressure"
MUTED = "muted"
DRAINING = "draining"
THROTTLED = "throttled"  # a throttled request's response is not out yet
HELD = "held"  # broker side: a response is held for a throttle, later ones wait in the socket


class ReadGate:
    __slots__ = ("_transport", "_reasons", "_unmute_handle", "_on_resume")

    def __init__(self, transport: asyncio.BaseTransport, on_resume=None) -> None:
        self._transport = transport
        self._reasons: set[str] = set()
        self._unmute_handle: asyncio.TimerHandle | None = None
        self._on_resume = on_resume  # called when the last reason is lifted, before reading resumes

    def pause(self, reason: str) -> None:
        if not self._reasons:
            self._transport.pause_reading()
        self._reasons.add(reason)

    def resume(self, reason: str) -> None:
        if reason not in self._reasons:
            return
        self._reasons.discard(reason)
        if self._reasons or self._transport.is_closing():
            return
        if self._on_resume is not None:
            self._on_resume()  # may pause again (a held request throttled anew)
        if not self._reasons and not self._transport.is_closing():
            self._transport.resume_reading()

    def mute(self, loop: asyncio.AbstractEventLoop, delay_ms: float) -> None:
        """Stop reading for ``delay_ms``; a longer mute already in place is kept, a shorter one extended."""
        if delay_ms <= 0:
            return
        when = loop.time() + delay_ms / 1000.0
        handle = self._unmute_handle
        if handle is not None:
            if handle.when() >= when:
                return
            handle.cancel()
        self.pause(MUTED)
        self._unmute_handle = loop.call_at(when, self._unmute)

    def _unmute(self) -> None:
        self._unmute_handle = None
        self.resume(MUTED)

    def close(self) -> None:
        if self._unmute_handle is not None:
            self._unmute_handle.cancel()
            self._unmute_handle = None
