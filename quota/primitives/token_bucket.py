"""Kafka's ``TokenBucket`` stat, as a pure object: tokens refilled at a rate up to a burst, allowed below 0.

Used by the controller mutation quota (KIP-599, :mod:`quota.managers.mutation`), the producer-id quota (KIP-936,
:mod:`quota.managers.producer_ids`) and smoothed byte-rate throttling (``quota.smoothing: on``, :mod:`quota.primitives.smoothing`).
"""

from __future__ import annotations

from quota.primitives.throttle import INT32_MAX, java_round


class TokenBucket:
    """Kafka's ``TokenBucket`` stat: ``tokens`` refilled at ``rate`` per second up to ``burst``, allowed below 0."""

    __slots__ = ("rate", "burst", "tokens", "_last_ms")

    def __init__(self, rate: float, burst: float, now_ms: int) -> None:
        self.rate = rate
        self.burst = burst
        self.tokens = burst  # Kafka's bucket starts at 0 with its last update at 0 ms: full at the first refill
        self._last_ms = now_ms

    def refill(self, now_ms: int) -> float:
        """Add what accrued since the last update (never above the burst); returns the tokens now."""
        if now_ms > self._last_ms:
            self.tokens = min(self.burst, self.tokens + self.rate * (now_ms - self._last_ms) / 1000.0)
            self._last_ms = now_ms
        return self.tokens

    def peek(self, now_ms: int) -> float:
        """The tokens :meth:`refill` would return at ``now_ms``, changing nothing (for metrics, which may read it
        from another thread)."""
        tokens, last_ms = self.tokens, self._last_ms
        if now_ms > last_ms:
            return min(self.burst, tokens + self.rate * (now_ms - last_ms) / 1000.0)
        return tokens

    def take(self, n: float, now_ms: int) -> None:
        self.refill(now_ms)
        self.tokens -= n

    def give_back(self, n: float, now_ms: int) -> None:
        """Return ``n`` tokens taken for a mutation that did not happen: never above the burst, so the bucket is at
        most where it would be had they never been taken."""
        self.refill(now_ms)
        self.tokens = min(self.burst, self.tokens + n)

    def at_most(self, tokens: float, now_ms: int) -> None:
        """A peer's bucket for the same entity holds ``tokens`` now (a restarted worker's seed): this one keeps the
        fewer, so neither lets through what the other would not."""
        self.refill(now_ms)
        self.tokens = min(self.tokens, tokens)

    def reconfigure(self, rate: float, burst: float, now_ms: int) -> None:
        """A new quota: tokens accrued so far at the old rate, then capped by the new burst."""
        self.refill(now_ms)
        self.rate, self.burst = rate, burst
        self.tokens = min(self.tokens, burst)

    def throttle_time_ms_at(self, now_ms: int) -> int:
        """What :meth:`throttle_time_ms` would say after a refill at ``now_ms``, changing nothing (for reading)."""
        tokens = self.peek(now_ms)
        if tokens >= 0:
            return 0
        return INT32_MAX if self.rate <= 0 else min(INT32_MAX, java_round(-tokens / self.rate * 1000.0))

    def throttle_time_ms(self) -> int:
        """``-K / R`` in ms (0 when ``K >= 0``), rounded as Java's ``Math.round``; INT32_MAX for a zero quota."""
        if self.tokens >= 0:
            return 0
        if self.rate <= 0:
            return INT32_MAX
        return min(INT32_MAX, java_round(-self.tokens / self.rate * 1000.0))
