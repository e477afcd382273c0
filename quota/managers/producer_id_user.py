"""One user's producer-id state (KIP-936): its cache of the ids it used, its token bucket and its counters, as one
object keyed by the user's name (:mod:`quota.managers.producer_ids`). Pure."""

from __future__ import annotations

from quota.managers.producer_id_cache import CacheShape, TimeControlledBloomFilter
from quota.primitives.entity import QuotaTags, ResolvedQuota
from quota.primitives.token_bucket import TokenBucket

COUNTERS = (
    "new_pids",
    "throttle_ms_total",
    "throttled",
    "shadow_throttle_ms_total",
    "shadow_throttled",
    "held",
    "hold_ms_total",
    "refused",
    "abandoned",
)
"""What a user's state counts (the scrape sums them over the users past the top ones)."""


class ProducerIdUser(TimeControlledBloomFilter):
    """One user's producer-id state: its cache (inherited, inline: no object of its own), its bucket, its counters.
    ``fast``: ``limit`` and ``shadow`` are what the quota table resolves for the user this state is keyed by, so a
    request of that user is decided without resolving (cleared, or set again, by every table change reaching it)."""

    __slots__ = ("user", "bucket", "limit", "shadow", "fast", *COUNTERS, "holding", "last_ms", "moved_ms")

    def __init__(self, user: str, shape: CacheShape, bucket: TokenBucket, resolved: ResolvedQuota, fast: bool) -> None:
        super().__init__(shape.window_ms, shape=shape)
        # When a request or a peer's record last asked about the user, and when it was made or last given a second
        # chance in a full table (quota.managers.producer_id_eviction): asked about since it was moved, it is in use.
        self.last_ms = self.moved_ms = 0
        self.user, self.bucket, self.limit = user, bucket, resolved.limit
        self.shadow, self.fast = resolved.shadow, fast
        self.new_pids = self.throttle_ms_total = self.throttled = 0
        self.shadow_throttle_ms_total = self.shadow_throttled = 0
        self.held = self.hold_ms_total = self.refused = self.abandoned = 0
        # PIDs held now -> [until when, requests waiting for it] (in the order they were held, so by time but for a
        # quota change): at most one per token below zero, and a PID leaves once its time is past or its requests
        # are abandoned, so this stays small. A held PID is not in the cache until its hold ends. None until the
        # user's first hold.
        self.holding: dict[int, list[int]] | None = None

    @property
    def tags(self) -> QuotaTags:
        return QuotaTags(self.user, "")
