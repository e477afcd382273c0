"""What a scrape reads of the producer-id quota (KIP-936): each user's as plain values, the busiest users' and the
rest summed as one (:mod:`quota.managers.producer_ids`). Reads, changes nothing."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from operator import attrgetter

from quota.managers.producer_id_user import COUNTERS, ProducerIdUser
from quota.primitives.entity import QuotaTags
from quota.primitives.top import OTHER, busiest, no_pause, others, release, totals


@dataclass(frozen=True, slots=True)
class ProducerIdStats:
    tags: QuotaTags
    limit: float  # new PIDs per window; inf when unlimited
    tokens: float
    new_pids_total: int
    throttle_time_ms_total: int  # applied (reported and muted for); shadow throttles are counted apart
    throttled_count: int
    cache_bytes: int
    shadow_throttle_time_ms_total: int = 0  # decided by a shadow quota, not applied
    shadow_throttled_count: int = 0
    held_count: int = 0  # Produce requests held before the broker saw their new PID (enforcement hold)
    hold_time_ms_total: int = 0  # and for how long, in all (as decided)
    refused_count: int = 0  # Produce requests refused (a hold past the bound); also in throttled_count
    abandoned_count: int = 0  # held PIDs whose every request's connection closed before the hold ended


def stats(user: ProducerIdUser, now_ms: int) -> ProducerIdStats:
    """``user``'s state as a scrape reads it (changes nothing)."""
    return ProducerIdStats(
        user.tags,
        user.limit,
        user.bucket.peek(now_ms),
        user.new_pids,
        user.throttle_ms_total,
        user.throttled,
        user.size_bytes,
        user.shadow_throttle_ms_total,
        user.shadow_throttled,
        user.held,
        user.hold_ms_total,
        user.refused,
        user.abandoned,
    )


def top_stats(
    users: list[ProducerIdUser], n: int, now_ms: int, pause: Callable[[], None] = no_pause
) -> tuple[list[ProducerIdStats], ProducerIdStats | None]:
    """The stats of the ``n - 1`` of ``users`` (a snapshot) with the most new producer ids and the rest summed as
    one (user ``__other__``, no limit or tokens; None when nothing is left over), in chunks with ``pause`` between
    (:mod:`quota.primitives.top`)."""
    top = busiest(users, n, attrgetter("new_pids"), pause)
    if top is None:
        return [stats(s, now_ms) for s in users], None
    sums = dict.fromkeys(COUNTERS + ("cache_bytes",), 0)
    for part in others(users, top, pause):
        for name, value in totals((part,), COUNTERS).items():
            sums[name] += int(value)
        sums["cache_bytes"] += sum(s.size_bytes for s in part)
    release(users, pause)
    other = ProducerIdStats(
        QuotaTags(OTHER, ""),
        math.inf,
        math.nan,
        sums["new_pids"],
        sums["throttle_ms_total"],
        sums["throttled"],
        sums["cache_bytes"],
        sums["shadow_throttle_ms_total"],
        sums["shadow_throttled"],
        sums["held"],
        sums["hold_ms_total"],
        sums["refused"],
        sums["abandoned"],
    )
    return [stats(s, now_ms) for s in top], other
