"""What the quota stages decided for one request, gathered in one place.

A request may meet several quotas (a Produce: ``producer_byte_rate``, ``producer_ids_rate``, the volume-scaled
produce quota). Each stage adds its decision here: an applied throttle combines with the others (the longest wins,
:func:`quota.primitives.decision.combined`); a decision that is not applied is noted as a shadow throttle (metered and logged
by :meth:`proxy.enforcement.shadow_throttles.ShadowThrottles.note`) and the longest is kept for the usage log's
``shadow_throttle_ms``. Handlers then act on :attr:`Decisions.throttle` alone.
"""

from __future__ import annotations

from quota.primitives.decision import Decision, Throttle, combined, is_applied


class Decisions:
    __slots__ = ("_quotas", "_user", "throttle", "shadow_ms")

    def __init__(self, quotas, user: str) -> None:
        self._quotas = quotas  # what notes shadow decisions (proxy.enforcement.proxy_quotas.ProxyQuotas)
        self._user = user
        self.throttle: Throttle | None = None  # the applied throttles, combined
        self.shadow_ms = 0  # the longest throttle a shadow decision would have applied

    def add(self, quota: str, decision: Decision, client_id: str | None) -> None:
        """One stage's decision on the request (``quota``: its name in metrics and logs)."""
        if is_applied(decision):
            self.throttle = combined(self.throttle, decision)
        else:
            self.shadow_ms = max(self.shadow_ms, self._quotas.shadows.note(quota, decision, self._user, client_id))
