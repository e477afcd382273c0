"""Smoothed byte-rate throttling (``quota.smoothing: on``): beyond Kafka, an option beside its exact algorithm.

Kafka's sampled rate lets a fresh or idle client burst ``quota x (num - 1)`` windows' worth, then throttles it for
about as long; a client that sends as fast as it is allowed then runs stop-and-go, bursting each time its oldest
sample leaves the window (about once per window span): several times its quota for a second, then a long mute.
With smoothing, each entity (the same tags, limit and shadow flag as the sampled rate) also has a token bucket:

* ``R`` = the quota (bytes per second), ``B`` = ``R x quota.window.size.seconds`` (one sample's worth: 1 s by
  default); tokens refill at ``R`` up to ``B``; a new bucket is full;
* every recorded byte takes a token (an unrecord gives it back, never above ``B``), so the bucket may go below 0;
* the throttle of a request or response is the time the bucket needs to be back at 0: ``-tokens / R`` (0 while it
  is not below 0), capped at the manager's ``max_throttle_time_ms`` (``quota.mute.max.ms``). The debt past the cap
  stays in the bucket, so the next request pays for it and the long-run rate is still ``R``;
* what may be recorded now without a throttle (a Fetch's ``max_bytes`` and trimming budget) is the bucket's tokens.

So a client sending as fast as it is allowed is held for ``size / R`` after each request: many short mutes
instead of one long one, and its rate per second stays near ``R`` once a second's worth of burst is spent. The
granularity is one request (one record batch for a trimmed fetch): a 1 MB produce request under a 256 KiB/s quota
is still a 4 s wait. The sampled rate is still recorded, so the rate reported in metrics is Kafka's measurement.

A shadow decision is never applied, so the client was not held: its debt is forgiven once the throttle it would
have had is computed (the bucket does not go below 0 for the next request). Each decision then says how long that
one request would have waited, and they add up to the time the client would have lost.
"""

from __future__ import annotations

import math

from quota.primitives.rate import QuotaWindow
from quota.primitives.token_bucket import TokenBucket


def burst(limit: float, window: QuotaWindow) -> float:
    """``B``: one sample's worth of the quota (``limit x quota.window.size.seconds``)."""
    return limit * window.size_seconds


def new_bucket(limit: float, window: QuotaWindow, now_ms: int) -> TokenBucket | None:
    """A full bucket for ``limit`` (None for an unlimited one: nothing to smooth)."""
    if math.isinf(limit):
        return None
    return TokenBucket(limit, burst(limit, window), now_ms)


def reshaped(bucket: TokenBucket | None, limit: float, window: QuotaWindow, now_ms: int) -> TokenBucket | None:
    """The bucket under a new ``limit``: tokens accrued at the old rate, capped by the new burst (a new one when
    there was none, none when the quota is gone)."""
    if bucket is None or math.isinf(limit):
        return new_bucket(limit, window, now_ms)
    bucket.reconfigure(limit, burst(limit, window), now_ms)
    return bucket


def take(bucket: TokenBucket, value: float, now_ms: int) -> None:
    """Record ``value`` bytes: take them (a negative value, an unrecord, gives them back up to the burst)."""
    if value >= 0:
        bucket.take(value, now_ms)
    else:
        bucket.give_back(-value, now_ms)


def throttle_time_ms(bucket: TokenBucket, max_throttle_time_ms: int, shadow: bool) -> int:
    """The throttle after the last take: ``-tokens / R`` in ms, capped; a shadow decision's debt is forgiven."""
    throttle = min(bucket.throttle_time_ms(), max_throttle_time_ms)
    if shadow and bucket.tokens < 0:
        bucket.tokens = 0.0
    return throttle


def headroom(bucket: TokenBucket | None, limit: float, window: QuotaWindow, now_ms: int) -> float:
    """What may be recorded at ``now_ms`` without a throttle (never negative), changing nothing."""
    if bucket is None:
        return burst(limit, window)
    return max(0.0, bucket.peek(now_ms))
