"""The real clock handed to quota managers (``quota/`` never reads time itself)."""

from __future__ import annotations

import time


class SystemClock:
    """Monotonic milliseconds: quota windows must not jump when the wall clock is set."""

    __slots__ = ()

    def now_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000


class WallClock:
    """Wall-clock milliseconds since the epoch: what volume-usage snapshots are dated with, so that dates written by
    one host mean the same on another (freshness, the clock-skew check). Never used for quota windows."""

    __slots__ = ()

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000
