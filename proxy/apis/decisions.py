"""What the quota stages decided for one request, gathered in one place.

A request may meet several quotas (a Produce: ``producer_byte_rate``, ``producer_ids_rate``, the volume-scaled
produce quota). Each stage adds its decision here: an applied throttle combines with the others (the longest wins,
:func:`quota.primitives.decision.combined`); a decision that is not applied is a shadow throttle, noted in
:attr:`Decisions.usage` (the request path counts and logs it, and keeps the longest for the usage log's
``shadow_throttle_ms``). Handlers then act on :attr:`Decisions.throttle` alone.
"""

from __future__ import annotations

import dataclasses

from proxy.apis.plan import Plan
from proxy.apis.usage import NO_USAGE, ShadowNote, Usage
from quota.primitives.decision import Decision, Throttle, combined, is_applied


class Decisions:
    __slots__ = ("throttle", "usage")

    def __init__(self) -> None:
        self.throttle: Throttle | None = None  # the applied throttles, combined
        self.usage: Usage = NO_USAGE  # the shadow ones, as data for the request path to record

    def add(self, quota: str, decision: Decision, client_id: str | None) -> None:
        """One stage's decision on the request (``quota``: its name in metrics and logs, and the throttle's ``by``
        unless it says more)."""
        if is_applied(decision):
            if isinstance(decision, Throttle) and not decision.by:
                decision = dataclasses.replace(decision, by=quota)
            self.throttle = combined(self.throttle, decision)
        elif decision.shadow and getattr(decision, "throttle_time_ms", 0) > 0:
            ms = getattr(decision, "throttle_time_ms", 0)
            self.usage = self.usage + Usage(shadow_throttle_ms=ms, shadows=(ShadowNote(quota, decision, client_id),))

    def plan(self) -> Plan | None:
        """What the stage adds to the request's plan: its throttle and what it accounted for (None: nothing)."""
        if self.throttle is None and self.usage is NO_USAGE:
            return None
        return Plan(throttle=self.throttle, usage=self.usage)
