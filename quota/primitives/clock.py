"""Injected time for the quota core.

Kafka's quota code takes a ``Time`` and tests drive a ``MockTime``; strimzi's quotas plugin does the same with a
``TickableClock``. Here a :class:`Clock` is anything with ``now_ms()``. The real, monotonic clock lives in
``proxy/``: nothing under ``quota/`` reads the system time.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    """A source of the current time in milliseconds (monotonic; the epoch does not matter)."""

    def now_ms(self) -> int: ...


class ManualClock:
    """A clock that only moves when told to (Kafka's ``MockTime``). For tests and simulations."""

    __slots__ = ("_now_ms",)

    def __init__(self, start_ms: int = 0) -> None:
        self._now_ms = int(start_ms)

    def now_ms(self) -> int:
        return self._now_ms

    def advance(self, ms: int) -> int:
        """Move forward by ``ms`` (>= 0) and return the new time."""
        if ms < 0:
            raise ValueError(f"a clock cannot go backwards (advance by {ms} ms)")
        self._now_ms += int(ms)
        return self._now_ms

    def set(self, now_ms: int) -> None:
        """Jump to ``now_ms``, which must not be in the past."""
        if now_ms < self._now_ms:
            raise ValueError(f"a clock cannot go backwards ({now_ms} < {self._now_ms})")
        self._now_ms = int(now_ms)

    def __repr__(self) -> str:
        return f"ManualClock(now_ms={self._now_ms})"
