"""The KIP-936 cache: per user, time-controlled bloom filters of the producer ids seen recently. Pure.

The KIP's four steps, with W = ``producer.id.quota.window.size.seconds``:

1. the user's first PID creates filter 1, which takes every new PID;
2. half a window after filter 1 was created, filter 2 is created and takes every new PID; both are read;
3. filter 1 is disposed when it is one window old;
4. steps 2 and 3 repeat with filter 2, and so on: at most two filters live, each for one window.

A PID found only in the older filter is written into the current one as well (not counted again), so a producer
that keeps producing stays known; a PID is counted again only after it was not seen for at least half a window
(at most a whole one). Filters are sized for ``producer.id.quota.bloom.expected.pids`` PIDs at
``producer.id.quota.bloom.false.positive.rate`` (our names: the KIP leaves them open); a false positive means a new
PID goes uncounted, never that a client is throttled wrongly. Hashing: mmh3's 128-bit hash of the PID, split into
two 64-bit halves for double hashing.

Looking a PID up (:meth:`TimeControlledBloomFilter.seen`) and writing it (:meth:`TimeControlledBloomFilter.add`)
are apart, so the quota can decide first: a PID it refuses (held past ``producer.id.quota.max.hold.ms``) is not
written, and the client's retry is judged as new again.
"""

from __future__ import annotations

import math

import mmh3

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

    def seen(self, pid: int, now_ms: int) -> bool:
        """True if ``pid`` was seen within the filters' lifetime (a PID found only in an older filter is written into
        the current one as well, so a producer that keeps producing stays known). Nothing is added for a new PID:
        :meth:`add` does that once the caller has decided to count it."""
        filters = self._rotated(now_ms)
        current = filters[-1][1]
        positions = current.positions(pid)
        if current.has(positions):
            return True
        if any(f.has(positions) for _, f in filters[:-1]):
            current.add(pid, positions)  # still active: keep it known in the filter that outlives the old one
            return True
        return False

    def add(self, pid: int, now_ms: int) -> None:
        """Write a new ``pid`` into the filter now taking writes."""
        self._rotated(now_ms)[-1][1].add(pid)

    def seen_or_add(self, pid: int, now_ms: int) -> bool:
        """True if ``pid`` was seen within the filters' lifetime; else it is added (and False is returned)."""
        if self.seen(pid, now_ms):
            return True
        self.add(pid, now_ms)
        return False

    def _rotated(self, now_ms: int) -> list[tuple[int, BloomFilter]]:
        """The live filters at ``now_ms``, a new one started when the current one is half a window old or full."""
        self.dispose_expired(now_ms)
        filters = self.filters
        if not filters or now_ms - filters[-1][0] >= self.window_ms // 2 or filters[-1][1].count >= self.expected:
            filters.append((now_ms, BloomFilter(self.expected, self.fp_rate)))  # steps 1, 2 and 4 (or full)
            if len(filters) > MAX_FILTERS:
                filters.pop(0)
        return filters

    @property
    def live(self) -> bool:
        return bool(self.filters)

    @property
    def size_bytes(self) -> int:
        return sum(f.size_bytes for _, f in self.filters)
