"""Responses on their way to one client, in request order.

A response held for a throttle (Produce v0-5, KIP-13's original behaviour: the response itself is delayed) keeps
every later response behind it. Meanwhile the broker side of the connection is not read, so what waits here is
bounded by one read chunk.
"""

from __future__ import annotations

import asyncio
from typing import Callable

from proxy.flow import HELD, ReadGate


class Outbox:
    __slots__ = ("_transport", "_upstream_gate", "_on_throttle_released", "_on_empty", "_held")

    def __init__(self, transport: asyncio.Transport, upstream_gate: ReadGate,
                 on_throttle_released: Callable[[], None], on_empty: Callable[[], None]) -> None:
        self._transport = transport
        self._upstream_gate = upstream_gate
        self._on_throttle_released = on_throttle_released  # a held, throttled response has gone out
        self._on_empty = on_empty  # nothing is held any more
        self._held: list[tuple[float, bytes]] | None = None  # (release time or 0 for "behind a held one", bytes)

    @property
    def holding(self) -> bool:
        return self._held is not None

    def send(self, data) -> None:
        """Every response byte goes through here, so a held response keeps later ones behind it."""
        if self._held is not None:
            self._held.append((0.0, bytes(data)))
        else:
            self._transport.write(data)

    def hold(self, frame: bytes, delay_ms: int) -> None:
        """This response, and all after it, go out ``delay_ms`` from now."""
        loop = asyncio.get_running_loop()
        release_at = loop.time() + delay_ms / 1000.0
        if self._held is None:
            self._held = []
            self._upstream_gate.pause(HELD)
            loop.call_at(release_at, self._release)
        self._held.append((release_at, bytes(frame)))

    def _release(self) -> None:
        held = self._held
        if held is None or self._transport.is_closing():
            return
        loop = asyncio.get_running_loop()
        now = loop.time()
        while held and held[0][0] <= now:
            release_at, data = held.pop(0)
            self._transport.write(data)
            if release_at:
                self._on_throttle_released()
        if held:
            loop.call_at(held[0][0], self._release)
            return
        self._held = None
        self._upstream_gate.resume(HELD)
        self._on_empty()
