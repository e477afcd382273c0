"""What a quota manager decides; only ``proxy/`` acts on it.

Four outcomes cover every quota on the roadmap: pass the request on (:class:`Forward`), pass it on but tell the
client to back off and stop reading from it for a while (:class:`Throttle`, KIP-13/KIP-219 byte rates, KIP-936),
answer it ourselves with an error (:class:`Reject`, e.g. KIP-599 ``THROTTLING_QUOTA_EXCEEDED``), or drop the
connection (:class:`Close`, e.g. KIP-612 connection limits). Every decision carries ``shadow``: in shadow mode the
decision is computed, metered and logged, but the proxy forwards as if it were :class:`Forward`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
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

    def __post_init__(self) -> None:
        if self.throttle_time_ms < 0 or self.mute_ms < 0:
            raise ValueError(f"negative throttle in {self!r}")


@dataclass(frozen=True, slots=True)
class Reject:
    """Answer with ``error_code`` (a Kafka error code, e.g. 89 ``THROTTLING_QUOTA_EXCEEDED``) without forwarding."""

    error_code: int
    throttle_time_ms: int = 0
    shadow: bool = False


@dataclass(frozen=True, slots=True)
class Close:
    """Close the client connection; ``reason`` is for the log line."""

    reason: str
    shadow: bool = False


Decision: TypeAlias = Forward | Throttle | Reject | Close

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
    the result is shadow only when both are."""
    return Throttle(max(a.throttle_time_ms, b.throttle_time_ms), max(a.mute_ms, b.mute_ms), a.shadow and b.shadow)
