"""What the producer-id quota (KIP-936) decides for a Produce beyond forward and throttle: hold it in the proxy, or
refuse it (:mod:`quota.managers.producer_id_holds`). Plain values; the proxy acts on them."""

from __future__ import annotations

from dataclasses import dataclass, field

from quota.primitives.decision import Decision, Throttle
from quota.primitives.entity import QuotaTags


@dataclass(frozen=True, slots=True)
class Hold:
    """A new producer id over quota (enforcement ``hold``): keep the Produce in the proxy, unread past, until
    ``until_ms`` (the quota's clock), then forward it as it is. Its PID is counted already: do not ask again."""

    until_ms: int
    shadow: bool = False  # never: a shadow quota decides as throttle
    tags: QuotaTags | None = field(default=None, compare=False)  # whose bucket holds it (for abandon)
    waits: tuple[tuple[int, int], ...] = field(default=(), compare=False)  # (PID, its hold's end) the request waits
    #                                                                        for (record_and_decide_all; abandon_all)


@dataclass(frozen=True, slots=True)
class Refuse:
    """A new producer id that would be held longer than the hold bound: answer the Produce locally with a retriable
    error carrying ``throttle.throttle_time_ms`` and mute for ``throttle.mute_ms``; it never reaches the broker,
    and its PID is not counted (the retry is judged again)."""

    throttle: Throttle
    shadow: bool = False
    no_room: bool = False  # the hold would have fit in time but not in the held-byte bounds (may_hold False)


ProducerIdDecision = Decision | Hold | Refuse
