"""The KIP-936 cache: per user, time-controlled filters of the producer ids seen recently. Pure.

The KIP's four steps, with W = ``producer.id.quota.window.size.seconds``:

1. the user's first PID creates filter 1, which takes every new PID;
2. half a window after filter 1 was created, filter 2 is created and takes every new PID; both are read;
3. filter 1 is disposed when it is one window old;
4. steps 2 and 3 repeat with filter 2, and so on: at most two filters live, each for one window.

A PID found only in the older filter is written into the current one as well (not counted again), so a producer
that keeps producing stays known; a PID is counted again only after it was not seen for at least half a window
(at most a whole one).

**Exact, then bits.** The KIP's filters are bloom filters. Here a filter holds its PIDs exactly (8 bytes each,
sorted, in one ``array('q')``) for as long as they take no more room than its bits would, and turns into the bloom
filter only once it would pass that size: a user with a handful of producers holds a few dozen bytes instead of a
filter sized for ``producer.id.quota.bloom.expected.pids``, and a lookup reads one small array instead of up to
``k`` scattered bytes. Bits are sized for ``producer.id.quota.bloom.expected.pids`` PIDs at
``producer.id.quota.bloom.false.positive.rate`` (our names: the KIP leaves them open): 1,798 bytes at the defaults
(1,000 at 0.001), so a filter is exact up to 224 PIDs. An exact filter has no false positive at all; a bloom
filter's false positive means a new PID goes uncounted, never that a client is throttled wrongly, so exact is the
documented behaviour or stricter. The bits a filter turns into are those it would have had as a bloom filter from
the start (its PIDs written with the same hashes), so from then on it answers as one. Hashing: mmh3's 128-bit hash
of the PID, split into two 64-bit halves for double hashing.

Looking a PID up (:meth:`TimeControlledBloomFilter.seen`) and writing it (:meth:`TimeControlledBloomFilter.add`)
are apart, so the quota can decide first: a PID it refuses (held past ``producer.id.quota.max.hold.ms``) is not
written, and the client's retry is judged as new again.
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left
from collections.abc import Sequence
from typing import Any, TypeAlias

import mmh3

_MASK64 = (1 << 64) - 1
_AT_ONCE = -math.inf  # a due time every clock reading has passed
Filter: TypeAlias = (
    "array[int] | bytearray"  # a filter: its PIDs, sorted, while exact; its bits once not (told apart by type)
)
_SCAN = 16  # an exact filter this small is scanned; a longer one is bisected (it is kept sorted)


def bloom_size(expected_items: int, false_positive_rate: float) -> tuple[int, int]:
    """``(m, k)``: the bits and the hashes of a bloom filter for ``expected_items`` at ``false_positive_rate``."""
    if expected_items < 1 or not 0 < false_positive_rate < 1:
        raise ValueError(
            f"a bloom filter needs expected items >= 1 and 0 < rate < 1, got {expected_items}, {false_positive_rate}"
        )
    num_bits = max(64, math.ceil(-expected_items * math.log(false_positive_rate) / math.log(2) ** 2))
    return num_bits, max(1, round(num_bits / expected_items * math.log(2)))


def bloom_positions(key: int, num_bits: int, num_hashes: int) -> list[int]:
    """The bits of ``key`` in a filter of ``num_bits`` bits and ``num_hashes`` hashes."""
    h = mmh3.hash128((key & _MASK64).to_bytes(8, "big"), signed=False)
    h1, h2 = h & _MASK64, (h >> 64) | 1
    return [(h1 + i * h2) % num_bits for i in range(num_hashes)]


def _has_bits(bits: bytearray, positions: list[int]) -> bool:
    for p in positions:
        if not bits[p >> 3] >> (p & 7) & 1:
            return False
    return True


def _set_bits(bits: bytearray, positions: list[int]) -> None:
    for p in positions:
        bits[p >> 3] |= 1 << (p & 7)


class BloomFilter:
    """A fixed-size bloom filter of int64 keys: ``m`` bits, ``k`` hashes by double hashing of one mmh3 hash (the
    bits a cache's filter turns into; for sizing and measuring them alone)."""

    __slots__ = ("bits", "num_bits", "num_hashes", "count")

    def __init__(self, expected_items: int, false_positive_rate: float) -> None:
        self.num_bits, self.num_hashes = bloom_size(expected_items, false_positive_rate)
        self.bits = bytearray((self.num_bits + 7) // 8)
        self.count = 0  # keys added

    def positions(self, key: int) -> list[int]:
        """The bits of ``key`` (the same for every filter of one sizing: compute once, test several filters)."""
        return bloom_positions(key, self.num_bits, self.num_hashes)

    def add(self, key: int, positions: list[int] | None = None) -> None:
        _set_bits(self.bits, positions if positions is not None else self.positions(key))
        self.count += 1

    def has(self, positions: list[int]) -> bool:
        return _has_bits(self.bits, positions)

    def __contains__(self, key: int) -> bool:
        return self.has(self.positions(key))

    @property
    def size_bytes(self) -> int:
        return len(self.bits)


MAX_FILTERS = 4
"""Filters one user may hold: two in the KIP's steps, more only while a flood fills them early (see below)."""


class CacheShape:
    """What every user's cache of one manager shares: the window, and the filters' sizing."""

    __slots__ = ("window_ms", "half_ms", "expected", "fp_rate", "num_bits", "num_hashes", "num_bytes", "exact_max")

    def __init__(self, window_ms: int, expected: int, fp_rate: float) -> None:
        self.window_ms, self.half_ms, self.expected, self.fp_rate = window_ms, window_ms // 2, expected, fp_rate
        self.num_bits, self.num_hashes = bloom_size(expected, fp_rate)
        self.num_bytes = (self.num_bits + 7) // 8
        self.exact_max = self.num_bytes // 8  # PIDs an exact filter holds before its bits would be smaller

    def positions(self, pid: int) -> list[int]:
        return bloom_positions(pid, self.num_bits, self.num_hashes)


def _exact_has(pids: array[int], pid: int) -> bool:
    if len(pids) <= _SCAN:
        return pid in pids
    i = bisect_left(pids, pid)
    return i < len(pids) and pids[i] == pid


def _has(data: Filter, pid: int, shape: CacheShape) -> bool:
    if isinstance(data, array):
        return _exact_has(data, pid)
    return _has_bits(data, shape.positions(pid))


class _FilterView:
    """One filter of a cache, for reading (tests, metrics): ``pid in view``."""

    __slots__ = ("data", "shape")

    def __init__(self, data: Filter, shape: CacheShape) -> None:
        self.data, self.shape = data, shape

    def __contains__(self, pid: int) -> bool:
        return _has(self.data, pid, self.shape)

    @property
    def exact(self) -> bool:
        return isinstance(self.data, array)

    @property
    def size_bytes(self) -> int:
        return _size_bytes(self.data)


def _size_bytes(data: Filter) -> int:
    return len(data) * 8 if isinstance(data, array) else len(data)


class TimeControlledBloomFilter:
    """The KIP's per-user cache: filters written for half a window (or until full) and read for a whole one.

    Beyond the KIP: a filter that has taken its expected number of PIDs stops taking writes early and a new one
    starts, so its false-positive rate stays at the configured one under a flood (a full filter would take every
    new PID for a known one and stop counting them); a user holds at most MAX_FILTERS, the oldest dropped first,
    so memory stays bounded and a PID of a dropped filter is counted again (never less).

    Kept inline, as few objects as a lookup has to touch (one per user holds 10^5 of them): the filter taking writes
    (``current``, created at ``current_ms``, ``count`` PIDs written), the older ones still read (``older``: created
    at, filter, ... oldest first) and ``due_ms``, when the next step is due (a filter to dispose or to start), so a
    lookup between steps reads one time and one filter. A filter is an ``array('q')`` of its PIDs while exact, a
    ``bytearray`` of bits once it is not."""

    __slots__ = ("shape", "due_ms", "current_ms", "current", "count", "older")

    def __init__(
        self, window_ms: int, expected: int = 1000, fp_rate: float = 0.001, *, shape: CacheShape | None = None
    ) -> None:
        self.shape = shape if shape is not None else CacheShape(window_ms, expected, fp_rate)
        self.due_ms: float = _AT_ONCE
        self.current_ms = 0
        self.current: Filter | None = None  # None: no live filter
        self.count = 0
        self.older: tuple[Any, ...] = ()  # created at ms, filter, created at ms, filter, ...

    def dispose_expired(self, now_ms: int) -> None:
        """Step 3: a filter is dropped once it is one window old."""
        window = self.shape.window_ms
        older = self.older
        if older and now_ms - older[0] >= window:
            i = 2
            while i < len(older) and now_ms - older[i] >= window:
                i += 2
            self.older = older = older[i:]
        if self.current is not None and now_ms - self.current_ms >= window:  # the newest: every older one is gone
            self.current = None
        self._set_due()

    def _set_due(self) -> None:
        shape = self.shape
        if self.current is None or self.count >= shape.expected:
            self.due_ms = _AT_ONCE
            return
        due = self.current_ms + shape.half_ms
        if self.older:
            due = min(due, self.older[0] + shape.window_ms)
        self.due_ms = due

    def _rotate(self, now_ms: int) -> None:
        """Steps 1-4 at ``now_ms``: dispose what is one window old; start a filter when none is live, or the current
        one is half a window old or full."""
        self.dispose_expired(now_ms)
        shape = self.shape
        current = self.current
        if current is None or now_ms - self.current_ms >= shape.half_ms or self.count >= shape.expected:
            if current is not None:
                older = self.older + (self.current_ms, current)
                self.older = older[2:] if len(older) >= 2 * MAX_FILTERS else older
            self.current, self.current_ms, self.count = array("q"), now_ms, 0
            self._set_due()

    def seen(self, pid: int, now_ms: int) -> bool:
        """True if ``pid`` was seen within the filters' lifetime (a PID found only in an older filter is written into
        the current one as well, so a producer that keeps producing stays known). Nothing is added for a new PID:
        :meth:`add` does that once the caller has decided to count it."""
        if now_ms >= self.due_ms:
            self._rotate(now_ms)
        current = self.current
        assert current is not None  # a live filter: the rotation makes one when there is none
        if isinstance(current, array):
            if len(current) <= _SCAN:
                if pid in current:
                    return True
            elif _exact_has(current, pid):
                return True
            if not self.older:
                return False
            positions = None
        else:
            positions = self.shape.positions(pid)
            if _has_bits(current, positions):
                return True
            if not self.older:
                return False
        older = self.older
        for i in range(1, len(older), 2):
            data = older[i]
            if isinstance(data, array):
                found = _exact_has(data, pid)
            else:
                if positions is None:
                    positions = self.shape.positions(pid)
                found = _has_bits(data, positions)
            if found:
                self._write(pid, positions)  # still active: keep it known in the filter that outlives the old one
                return True
        return False

    def add(self, pid: int, now_ms: int) -> None:
        """Write a new ``pid`` into the filter now taking writes."""
        if now_ms >= self.due_ms:
            self._rotate(now_ms)
        self._write(pid, None)

    def _write(self, pid: int, positions: list[int] | None) -> None:
        current, shape = self.current, self.shape
        assert current is not None  # written after a lookup or a rotation: a live filter
        if isinstance(current, array):
            if len(current) < shape.exact_max:
                current.insert(bisect_left(current, pid), pid)
            else:  # its bits are smaller now: the bloom filter it would have been from the start
                bits = bytearray(shape.num_bytes)
                for known in current:
                    _set_bits(bits, shape.positions(known))
                _set_bits(bits, positions if positions is not None else shape.positions(pid))
                self.current = bits
        else:
            _set_bits(current, positions if positions is not None else shape.positions(pid))
        self.count += 1
        if self.count >= shape.expected:
            self.due_ms = _AT_ONCE  # full: the next lookup starts a new filter

    def seen_or_add(self, pid: int, now_ms: int) -> bool:
        """True if ``pid`` was seen within the filters' lifetime; else it is added (and False is returned)."""
        if self.seen(pid, now_ms):
            return True
        self.add(pid, now_ms)
        return False

    def export(self) -> list[list[Any]]:
        """The live filters, oldest first, as ``[created at, PIDs or bits, PIDs written]``: the newest's count is
        its own, an older one's its expected (it takes no more writes). What :meth:`take` reads (a restarted
        worker's seed, :mod:`quota.sharing.producer_id_seed`)."""
        older, expected = self.older, self.shape.expected
        found = [[older[i], older[i + 1], expected] for i in range(0, len(older), 2)]
        if self.current is not None:
            found.append([self.current_ms, self.current, self.count])
        return found

    def take(self, filters: Sequence[Sequence[Any]], now_ms: int) -> None:
        """A peer's :meth:`export` for the same user: its PIDs are known here too. Into a cache with no live filter
        they are installed as they are (the same ages, so they expire when the peer's do); else an exact filter's
        PIDs are written into the current one and bits join the older filters (at most MAX_FILTERS kept)."""
        window = self.shape.window_ms
        live = [
            f
            for f in filters
            if now_ms - f[0] < window and (isinstance(f[1], array) or len(f[1]) == self.shape.num_bytes)
        ]  # bits of another sizing: not ours
        if not live:
            return
        self.dispose_expired(now_ms)
        if self.current is None:
            *earlier, (self.current_ms, self.current, self.count) = live
            self.older = tuple(x for created, data, _ in earlier for x in (created, data))[-2 * (MAX_FILTERS - 1) :]
            self._set_due()
            return
        bits: list[tuple[int, Filter]] = []
        for created, data, _ in live:
            if isinstance(data, array):
                for pid in data:
                    if not self.seen(pid, now_ms):
                        self.add(pid, now_ms)
            else:
                bits.append((created, data))
        if bits:
            older = self.older
            merged = sorted([(older[i], older[i + 1]) for i in range(0, len(older), 2)] + bits, key=lambda f: f[0])
            self.older = tuple(x for pair in merged[-(MAX_FILTERS - 1) :] for x in pair)
            self._set_due()

    @property
    def filters(self) -> list[tuple[int, _FilterView]]:
        """The live filters, oldest first, as (created at ms, filter): for reading."""
        older, shape = self.older, self.shape
        views = [(older[i], _FilterView(older[i + 1], shape)) for i in range(0, len(older), 2)]
        if self.current is not None:
            views.append((self.current_ms, _FilterView(self.current, shape)))
        return views

    @property
    def live(self) -> bool:
        return self.current is not None

    @property
    def size_bytes(self) -> int:
        """Bytes of PIDs (8 each, exact filters) and bits the filters hold."""
        older = self.older
        held = sum(_size_bytes(older[i]) for i in range(1, len(older), 2))
        return held + (_size_bytes(self.current) if self.current is not None else 0)
