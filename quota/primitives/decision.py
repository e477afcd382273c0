"""What a quota manager decides; only ``proxy/`` acts on it.

A request quota decides one of two outcomes: pass the request on (:class:`Forward`), or pass it on but tell the
client to back off and stop reading from it for a while (:class:`Throttle`, KIP-13/KIP-219 byte rates, KIP-599,
KIP-936). Per-item rejections (KIP-599 ``THROTTLING_QUOTA_EXCEEDED``) are built by the handlers from a throttle,
and connection limits (KIP-612) have their own outcome in :mod:`quota.managers.connection`. Every decision carries
``shadow``: in shadow mode the decision is computed, metered and logged, but the proxy forwards as if it were
:class:`Forward`. Several quota stages on one request combine with :func:`combined` (the longest throttle wins).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TypeAlias


@dataclass(frozen=True, slots=True)
class Forward:
    """Within quota: forward unchanged."""

    shadow: bool = False


@dataclass(frozen=True, slots=True)
class Throttle:
    """Over quota: report ``throttle_time_ms`` in the response and stop reading from the client for ``mute_ms``.

    Kafka reports and mutes for the same time (``KafkaApis`` then ``ClientQuotaManager.throttle``); they are kept
    apart so the proxy can cap a mute without lying to the client, or vice versa.
    """

    throttle_time_ms: int
    mute_ms: int
    shadow: bool = False
    # A byte-rate quota's throttle (KIP-13) also says what decided it, for the usage log: the quota in force and the
    # rate measured over the sampled window when it was decided (0 when not a byte rate, or smoothing decided it).
    # Kafka's formula X = (O - Q) / Q x W gives O back only while X is not capped; these are O and Q themselves.
    bound: float = field(default=0.0, compare=False)
    observed_rate: float = field(default=0.0, compare=False)
    # Which quota decided it, for explain ("" when not said; the longer mute's when combined): the quota's name, and
    # for a topic quota the topic (proxy.apis.decisions names it)
    by: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if self.throttle_time_ms < 0 or self.mute_ms < 0:
            raise ValueError(f"negative throttle in {self!r}")


Decision: TypeAlias = Forward | Throttle

FORWARD = Forward()
"""The common case, shared so the hot path allocates nothing."""


def shadowed(decision: Decision) -> Decision:
    """The same decision marked as shadow (computed and metered, not applied)."""
    return decision if decision.shadow else dataclasses.replace(decision, shadow=True)


def is_applied(decision: Decision) -> bool:
    """True if the proxy must act on ``decision`` (anything but a forward, and not shadowed)."""
    return not decision.shadow and not isinstance(decision, Forward)


def longest(a: Throttle, b: Throttle) -> Throttle:
    """Two throttles on one request (several quota stages) combine: the longest report and the longest mute win;
    the result is shadow only when both are. The byte-rate figures (``bound``, ``observed_rate``) are the longer
    mute's, or the other's when it has none; so is ``by``."""
    figures = a if (a.mute_ms >= b.mute_ms and a.bound) or not b.bound else b
    return Throttle(
        max(a.throttle_time_ms, b.throttle_time_ms),
        max(a.mute_ms, b.mute_ms),
        a.shadow and b.shadow,
        figures.bound,
        figures.observed_rate,
        a.by if a.mute_ms >= b.mute_ms or not b.by else b.by,
    )


def combined(throttle: Throttle | None, decision: Decision) -> Throttle | None:
    """``throttle`` (None: none yet) with one more stage's ``decision``: an applied throttle combines with it (the
    longest wins); anything else (a forward, a shadow decision) leaves it as it was."""
    if isinstance(decision, Forward) or decision.shadow:  # not applied (is_applied, as the type checker reads it)
        return throttle
    return decision if throttle is None else longest(throttle, decision)
