"""Throttles computed but not applied (``quota.mode: shadow``, or a shadow entry): counted per quota for
``quota_shadow_throttles_total`` and its time, and logged ("would throttle"), rate-limited per entity."""

from __future__ import annotations

import logging

from proxy.ground.logs import LogLimiter
from quota.primitives.clock import Clock
from quota.primitives.decision import Decision

log = logging.getLogger(__name__)


class ShadowThrottles:
    """The proxy's one count of shadow throttles: quota -> [decisions, total ms]."""

    __slots__ = ("counts", "_clock", "_log")

    def __init__(self, clock: Clock) -> None:
        self.counts: dict[str, list[int]] = {}
        self._clock = clock
        self._log = LogLimiter()

    def note(self, quota: str, decision: Decision, user: str, client_id: str | None) -> int:
        """A decision computed but not applied: counted and logged; returns the throttle it would have applied (ms),
        0 when there is none."""
        ms = getattr(decision, "throttle_time_ms", 0)
        if not decision.shadow or ms <= 0:
            return 0
        counts = self.counts.setdefault(quota, [0, 0])
        counts[0] += 1
        counts[1] += ms
        who = f"{user or '-'}/{client_id or '-'}"
        suppressed = self._log.allow(who, quota, self._clock.now_ms() / 1000.0)
        if suppressed is not None:
            log.info(
                "shadow mode: would throttle %s %d ms (%s)%s",
                who,
                ms,
                quota,
                f"; {suppressed} more for it in the last 10 s" if suppressed else "",
            )
        return ms
