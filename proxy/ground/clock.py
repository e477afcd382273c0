"""The real clock handed to quota managers (``quota/`` never reads time itself)."""

from __future__ import annotations

import time

from quota.primitives.compiled import load_compiled


def monotonic_ms() -> int:
    """Monotonic milliseconds (the pure path's; the connection's C extension has its twin)."""
    return time.monotonic_ns() // 1_000_000


class SystemClock:
    """Monotonic milliseconds: quota windows must not jump when the wall clock is set. Where the connection's C
    extension runs, ``now_ms`` is its ``monotonic_ms``, the same reading of the same clock without a Python frame
    (a quota manager reads it at every record)."""

    __slots__ = ()

    now_ms = staticmethod(getattr(load_compiled("proxy.connection._native")[0], "monotonic_ms", monotonic_ms))


class WallClock:
    """Wall-clock milliseconds since the epoch: what volume-usage snapshots are dated with, so that dates written by
    one host mean the same on another (freshness, the clock-skew check). Never used for quota windows."""

    __slots__ = ()

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000
