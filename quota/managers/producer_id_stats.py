"""What a scrape reads of one user's producer-id quota (KIP-936): plain values (:mod:`quota.managers.producer_ids`)."""

from __future__ import annotations

from dataclasses import dataclass

from quota.primitives.entity import QuotaTags


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
