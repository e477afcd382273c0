"""The active producer-id quota (KIP-936): per user, a time-controlled bloom filter and a token bucket. Pure.

No Kafka release implements KIP-936; this follows its design, and states where its text is loose.

**The cache** (:class:`TimeControlledBloomFilter`, one per user). The KIP's four steps, with W =
``producer.id.quota.window.size.seconds``:

1. the user's first PID creates filter 1, which takes every new PID;
2. half a window after filter 1 was created, filter 2 is created and takes every new PID; both are read;
3. filter 1 is disposed when it is one window old;
4. steps 2 and 3 repeat with filter 2, and so on: at most two filters live, each for one window.

A PID found only in the older filter is written into the current one as well (not counted again), so a producer
that keeps producing stays known; a PID is counted again only after it was not seen for at least half a window
(at most a whole one). A user with no live filter is dropped by :meth:`ProducerIdQuotaManager.cleanup` (the
KIP's cleanup scheduler, every ``producer.id.quota.cache.cleanup.scheduler.interval.ms``) once its token bucket is
full again: the bucket outlives the filters, or a user exhausted and then idle for one window would come back to a
full burst (``rate x num`` new ids at once) instead of what its bucket refilled. Filters are sized
for ``producer.id.quota.bloom.expected.pids`` PIDs at ``producer.id.quota.bloom.false.positive.rate`` (our names:
the KIP leaves them open); a false positive means a new PID goes uncounted, never that a client is throttled
wrongly. Hashing: mmh3's 128-bit hash of the PID, split into two 64-bit halves for double hashing.

**The quota**. ``producer_ids_rate`` is, as the KIP's ``kafka-configs`` examples read, the number of new PIDs a
user may start per window W. It is enforced with KIP-599's token bucket (the KIP says "similar to
ControllerMutation quota"): tokens refill at ``producer_ids_rate / W`` per second up to a burst of
``producer_ids_rate * producer.id.quota.window.num``; each new PID takes one token; once that leaves the bucket
below zero, the Produce response carries ``throttle_time_ms = -tokens / refill rate`` and the connection is muted
for as long, both capped at ``max_mute_ms`` (``quota.mute.max.ms``) as the byte-rate throttles are: a client that
honours the reported time (KIP-219) must not be told to stop past its own timeouts (100 ids an hour, 5 short, is
180 s uncapped, past a producer's 120 s ``delivery.timeout.ms``). Quotas are on ``user`` entities only (and ``<default>``), as the KIP
says; a PID is counted on Produce, where the KIP counts it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from operator import attrgetter

import mmh3

from quota.decision import FORWARD, Decision, Throttle
from quota.entity import DEFAULT, PRODUCER_IDS_RATE, QuotaTable, QuotaTags
from quota.mutation import TokenBucket
from quota.throttle import INT32_MAX
from quota.top import OTHER, busiest, no_pause, others, release, snapshot, totals

_MASK64 = (1 << 64) - 1


class BloomFilter:
    """A fixed-size bloom filter of int64 keys: ``m`` bits, ``k`` hashes by double hashing of one mmh3 hash."""

    __slots__ = ("bits", "num_bits", "num_hashes", "count")

    def __init__(self, expected_items: int, false_positive_rate: float) -> None:
        if expected_items < 1 or not 0 < false_positive_rate < 1:
            raise ValueError(f"a bloom filter needs expected items >= 1 and 0 < rate < 1, got "
                             f"{expected_items}, {false_positive_rate}")
        self.num_bits = max(64, math.ceil(-expected_items * math.log(false_positive_rate) / math.log(2) ** 2))
        self.num_hashes = max(1, round(self.num_bits / expected_items * math.log(2)))
        self.bits = bytearray((self.num_bits + 7) // 8)
        self.count = 0  # keys added

    def positions(self, key: int) -> list[int]:
        """The bits of ``key`` (the same for every filter of one sizing: compute once, test several filters)."""
        h = mmh3.hash128((key & _MASK64).to_bytes(8, "big"), signed=False)
        h1, h2, m = h & _MASK64, (h >> 64) | 1, self.num_bits
        return [(h1 + i * h2) % m for i in range(self.num_hashes)]

    def add(self, key: int, positions: list[int] | None = None) -> None:
        bits = self.bits
        for p in positions if positions is not None else self.positions(key):
            bits[p >> 3] |= 1 << (p & 7)
        self.count += 1

    def has(self, positions: list[int]) -> bool:
        bits = self.bits
        for p in positions:
            if not bits[p >> 3] >> (p & 7) & 1:
                return False
        return True

    def __contains__(self, key: int) -> bool:
        return self.has(self.positions(key))

    @property
    def size_bytes(self) -> int:
        return len(self.bits)


MAX_FILTERS = 4
"""Filters one user may hold: two in the KIP's steps, more only while a flood fills them early (see below)."""


class TimeControlledBloomFilter:
    """The KIP's per-user cache: filters written for half a window (or until full) and read for a whole one.

    Beyond the KIP: a filter that has taken its expected number of PIDs stops taking writes early and a new one
    starts, so its false-positive rate stays at the configured one under a flood (a full filter would take every
    new PID for a known one and stop counting them); a user holds at most MAX_FILTERS, the oldest dropped first,
    so memory stays bounded and a PID of a dropped filter is counted again (never less)."""

    __slots__ = ("window_ms", "expected", "fp_rate", "filters")

    def __init__(self, window_ms: int, expected: int, fp_rate: float) -> None:
        self.window_ms, self.expected, self.fp_rate = window_ms, expected, fp_rate
        self.filters: list[tuple[int, BloomFilter]] = []  # (created at ms, filter), oldest first

    def dispose_expired(self, now_ms: int) -> None:
        """Step 3: a filter is dropped once it is one window old."""
        while self.filters and now_ms - self.filters[0][0] >= self.window_ms:
            self.filters.pop(0)

    def seen_or_add(self, pid: int, now_ms: int) -> bool:
        """True if ``pid`` was seen within the filters' lifetime; else it is added (and False is returned)."""
        self.dispose_expired(now_ms)
        filters = self.filters
        if not filters or now_ms - filters[-1][0] >= self.window_ms // 2 or filters[-1][1].count >= self.expected:
            filters.append((now_ms, BloomFilter(self.expected, self.fp_rate)))  # steps 1, 2 and 4 (or full)
            if len(filters) > MAX_FILTERS:
                filters.pop(0)
        current = filters[-1][1]
        positions = current.positions(pid)
        if current.has(positions):
            return True
        if any(f.has(positions) for _, f in filters[:-1]):
            current.add(pid, positions)  # still active: keep it known in the filter that outlives the old one
            return True
        current.add(pid, positions)
        return False

    @property
    def live(self) -> bool:
        return bool(self.filters)

    @property
    def size_bytes(self) -> int:
        return sum(f.size_bytes for _, f in self.filters)


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


class _UserState:
    __slots__ = ("tags", "cache", "bucket", "limit", "new_pids", "throttle_ms_total", "throttled",
                 "shadow_throttle_ms_total", "shadow_throttled")

    def __init__(self, tags: QuotaTags, cache: TimeControlledBloomFilter, bucket: TokenBucket, limit: float) -> None:
        self.tags, self.cache, self.bucket, self.limit = tags, cache, bucket, limit
        self.new_pids = self.throttle_ms_total = self.throttled = 0
        self.shadow_throttle_ms_total = self.shadow_throttled = 0


class ProducerIdQuotaManager:
    """``producer_ids_rate`` per user. Every method takes ``now_ms`` (the clock is the caller's). ``max_mute_ms``
    caps both the reported ``throttle_time_ms`` and the mute."""

    def __init__(self, quotas: QuotaTable, *, window_num: int = 11, window_size_s: int = 3600,
                 expected_pids: int = 1000, false_positive_rate: float = 0.001, max_mute_ms: int = INT32_MAX,
                 shadow: bool = False) -> None:
        self.window_num, self.window_size_s = window_num, window_size_s
        self.expected_pids, self.false_positive_rate = expected_pids, false_positive_rate
        self.max_mute_ms, self.shadow = max_mute_ms, shadow
        self.recheck_ms = window_size_s * 1000 // 4  # a caller may skip a PID it checked less than this ago
        self.new_pids_counted = 0  # new producer ids counted so far, all users (a caller's before/after says "new")
        self._users: dict[QuotaTags, _UserState] = {}
        self.issued = IssuedProducerIds()  # attribution of InitProducerId answers (metrics, not the quota)
        self._quotas = quotas
        self.update_quotas(quotas)

    def update_quotas(self, quotas: QuotaTable) -> None:
        """A new table: each user's limit is the one that now applies (``inf`` once no entry covers the user; its
        bucket keeps its shape until a limit applies again, and nothing is counted meanwhile)."""
        changed = quotas.changes_since(self._quotas)
        self._quotas = quotas
        self.enabled = PRODUCER_IDS_RATE in quotas.keys()
        reached = self._users.items() if changed is None or len(changed) >= len(self._users) \
            else self._reached_by(changed)
        for tags, state in reached:
            limit = quotas.limit(PRODUCER_IDS_RATE, tags.user, "")
            if limit != state.limit:
                state.limit = limit
                if not math.isinf(limit):
                    state.bucket.reconfigure(*self._bucket_shape(limit), state.bucket._last_ms)

    def _reached_by(self, changed) -> list[tuple[QuotaTags, "_UserState"]]:
        """The users whose limit a changed entity can change: a named user's own; every user for a default (an
        entity with a named client-id never matches, users are resolved with client-id "")."""
        reached = []
        for entity in changed:
            if entity.user is not None and entity.user != DEFAULT:
                tags = QuotaTags(entity.user, "")
                if tags in self._users:
                    reached.append((tags, self._users[tags]))
            elif entity.client_id is None or entity.client_id == DEFAULT:
                return list(self._users.items())
        return reached

    def _bucket_shape(self, limit: float) -> tuple[float, float]:
        return limit / self.window_size_s, limit * self.window_num

    def record_and_decide(self, user: str, pid: int, now_ms: int) -> Decision:
        """A Produce from ``user`` with producer id ``pid`` (>= 0): count it if new; throttle when over quota."""
        resolved = self._quotas.resolve(PRODUCER_IDS_RATE, user, "")  # user entities only: client-id is ignored
        if resolved.unlimited:
            return FORWARD
        tags = QuotaTags(resolved.tags.user, "")
        state = self._users.get(tags)
        if state is None:
            window_ms = self.window_size_s * 1000
            cache = TimeControlledBloomFilter(window_ms, self.expected_pids, self.false_positive_rate)
            state = self._users[tags] = _UserState(tags, cache,
                                                    TokenBucket(*self._bucket_shape(resolved.limit), now_ms),
                                                    resolved.limit)
        if state.cache.seen_or_add(pid, now_ms):
            return FORWARD
        state.new_pids += 1
        self.new_pids_counted += 1
        bucket = state.bucket
        bucket.take(1, now_ms)
        throttle_ms = min(bucket.throttle_time_ms(), self.max_mute_ms)  # reported and muted for: both capped
        if throttle_ms <= 0:
            return FORWARD
        shadow = self.shadow or resolved.shadow
        if shadow:
            state.shadow_throttle_ms_total += throttle_ms
            state.shadow_throttled += 1
        else:
            state.throttle_ms_total += throttle_ms
            state.throttled += 1
        return Throttle(throttle_ms, throttle_ms, shadow)

    def cleanup(self, now_ms: int) -> int:
        """The KIP's cleanup: dispose expired filters; drop users with none left whose bucket a fresh one would
        equal (full again, or of rate 0: never refilled, and a fresh bucket throttles every new id the same).
        Returns how many were dropped. Memory stays bounded: a user's bucket refills within ``num`` windows."""
        dropped = [tags for tags, state in self._users.items()
                   if (state.cache.dispose_expired(now_ms) or not state.cache.live) and _replaceable(state.bucket,
                                                                                                    now_ms)]
        for tags in dropped:
            del self._users[tags]
        return len(dropped)

    def stats(self, now_ms: int) -> list[ProducerIdStats]:
        return [_stats(s, now_ms) for s in snapshot(self._users)]

    def top_stats(self, n: int, now_ms: int, pause: Callable[[], None] = no_pause
                  ) -> tuple[list[ProducerIdStats], ProducerIdStats | None]:
        """The stats of the ``n - 1`` users with the most new producer ids and the rest summed as one (user
        ``__other__``, no limit or tokens; None when nothing is left over), as ``ClientQuotaManager.top_stats``.
        Changes nothing: a scrape may call it from a thread other than the one that records."""
        users = snapshot(self._users)
        top = busiest(users, n, attrgetter("new_pids"), pause)
        if top is None:
            return [_stats(s, now_ms) for s in users], None
        names = ("new_pids", "throttle_ms_total", "throttled", "shadow_throttle_ms_total", "shadow_throttled")
        sums = dict.fromkeys(names + ("cache_bytes",), 0)
        for part in others(users, top, pause):
            for name, value in totals((part,), names).items():
                sums[name] += value
            sums["cache_bytes"] += sum(s.cache.size_bytes for s in part)
        release(users, pause)
        other = ProducerIdStats(QuotaTags(OTHER, ""), math.inf, math.nan, sums["new_pids"], sums["throttle_ms_total"],
                                sums["throttled"], sums["cache_bytes"], sums["shadow_throttle_ms_total"],
                                sums["shadow_throttled"])
        return [_stats(s, now_ms) for s in top], other

    def __len__(self) -> int:
        return len(self._users)


def _replaceable(bucket: TokenBucket, now_ms: int) -> bool:
    """True when a new bucket would decide as this one does: it is full again, or it never refills."""
    return bucket.rate <= 0 or bucket.peek(now_ms) >= bucket.burst


def _stats(s: _UserState, now_ms: int) -> ProducerIdStats:
    return ProducerIdStats(s.tags, s.limit, s.bucket.peek(now_ms), s.new_pids, s.throttle_ms_total, s.throttled,
                           s.cache.size_bytes, s.shadow_throttle_ms_total, s.shadow_throttled)


class IssuedProducerIds:
    """Who is churning producers: producer ids the broker issued (InitProducerId answers), per (user, client-id,
    IP). Bounded: beyond ``max_entries`` keys the least recently issued one is folded into ``other``."""

    __slots__ = ("max_entries", "_counts", "other")

    def __init__(self, max_entries: int = 1000) -> None:
        self.max_entries = max_entries
        self._counts: dict[tuple[str, str, str], int] = {}  # insertion order = least recently issued first
        self.other = 0

    def record(self, user: str, client_id: str, ip: str) -> None:
        key = (user, client_id, ip)
        count = self._counts.pop(key, 0) + 1
        self._counts[key] = count  # moves to the end: most recently issued
        if len(self._counts) > self.max_entries:
            oldest = next(iter(self._counts))
            self.other += self._counts.pop(oldest)

    def counts(self) -> dict[tuple[str, str, str], int]:
        return dict(self._counts)
