"""Kafka's throttle time (``QuotaUtils.throttleTime`` / ``boundedThrottleTime``) and the quota check.

From apache/kafka ``server-common/.../server/quota/QuotaUtils.java``: if ``O`` is the observed rate and ``T`` the
quota over a window ``W``, delaying by ``X`` such that ``O * W / (W + X) = T`` brings the rate back to the quota, so
``X = (O - T) / T * W``, with ``W`` the window the rate was just measured over (``Rate.windowSize(now)``), rounded
half-up as Java's ``Math.round`` does. The check itself is ``Quota.acceptable``: an upper bound holds while
``value <= bound``; ``Sensor.record(value, now, checkQuotas=true)`` records first and checks after.

KIP-13's worked example: 5 MB/s quota, 10 s window, a client at exactly 5 MB/s for 9 s sends 15 MB in the 10th
second: 60 MB in 10 s is 6 MB/s, and ``(6 - 5) / 5 * 10 s = 2 s``, i.e. "(60 - 50) / 5".
"""

from __future__ import annotations

import math

INT32_MAX = 2**31 - 1
"""``throttle_time_ms`` is an INT32 in every Kafka response."""


def java_round(value: float) -> int:
    """Java's ``Math.round``: half rounds up (Python's ``round`` would round half to even)."""
    return math.floor(value + 0.5)


def quota_acceptable(value: float, bound: float) -> bool:
    """``Quota.acceptable`` for an upper bound: ``value <= bound`` is within quota."""
    return value <= bound


def throttle_time_ms(observed_rate: float, quota_bound: float, window_size_ms: int) -> int:
    """``(observed - bound) / bound * window``, in ms, rounded half-up; negative when under quota.

    A bound of 0 (or less) means "nothing allowed": the result is :data:`INT32_MAX` whenever anything was observed,
    where Java would overflow.
    """
    if quota_bound <= 0:
        return INT32_MAX if observed_rate > quota_bound else 0
    throttle = (observed_rate - quota_bound) / quota_bound * window_size_ms
    if throttle >= INT32_MAX:
        return INT32_MAX
    return java_round(throttle)


def bounded_throttle_time_ms(
    observed_rate: float, quota_bound: float, window_size_ms: int, max_throttle_time_ms: int
) -> int:
    """:func:`throttle_time_ms` capped at ``max_throttle_time_ms`` (``QuotaUtils.boundedThrottleTime``)."""
    return min(throttle_time_ms(observed_rate, quota_bound, window_size_ms), max_throttle_time_ms)
