"""The producer-id cache holds a filter's PIDs exactly while they take less room than its bits: no false positive
then, the same decisions as the bloom filters otherwise. A differential run against the bloom-only cache as it was
before (``_BloomOnly`` below, a copy of 6a7cb16's ``quota/managers/producer_id_cache.py``, which also remembers what each of
its filters really holds so that its false positives can be told apart)."""

from __future__ import annotations

import random

import pytest

from quota.managers.producer_id_cache import BloomFilter, CacheShape, TimeControlledBloomFilter

HOUR_MS = 3_600_000


class _Bloom(BloomFilter):
    __slots__ = ("keys",)

    def __init__(self, expected: int, rate: float) -> None:
        super().__init__(expected, rate)
        self.keys: set[int] = set()

    def add(self, key, positions=None):
        super().add(key, positions)
        self.keys.add(key)


class _BloomOnly:
    """6a7cb16's TimeControlledBloomFilter; ``false_positive`` tells whether its last lookup found a PID that none
    of its filters was given."""

    def __init__(self, window_ms, expected, fp_rate):
        self.window_ms, self.expected, self.fp_rate = window_ms, expected, fp_rate
        self.filters = []
        self.false_positive = False

    def dispose_expired(self, now_ms):
        while self.filters and now_ms - self.filters[0][0] >= self.window_ms:
            self.filters.pop(0)

    def seen(self, pid, now_ms):
        filters = self._rotated(now_ms)
        current = filters[-1][1]
        positions = current.positions(pid)
        self.false_positive = False
        if current.has(positions):
            self.false_positive = pid not in current.keys
            return True
        for _, f in filters[:-1]:
            if f.has(positions):
                self.false_positive = pid not in f.keys
                current.add(pid, positions)
                return True
        return False

    def add(self, pid, now_ms):
        self._rotated(now_ms)[-1][1].add(pid)

    def _rotated(self, now_ms):
        self.dispose_expired(now_ms)
        filters = self.filters
        if not filters or now_ms - filters[-1][0] >= self.window_ms // 2 or filters[-1][1].count >= self.expected:
            filters.append((now_ms, _Bloom(self.expected, self.fp_rate)))
            if len(filters) > 4:
                filters.pop(0)
        return filters


def test_a_filter_is_exact_until_its_bits_are_smaller_and_then_holds_the_bits_it_would_have_had():
    shape = CacheShape(HOUR_MS, 1000, 0.001)
    assert (shape.num_bytes, shape.exact_max) == (1798, 224)  # the defaults: exact up to 224 PIDs
    cache = TimeControlledBloomFilter(HOUR_MS, 1000, 0.001)
    bloom = BloomFilter(1000, 0.001)
    for pid in range(224):
        assert not cache.seen_or_add(pid * 7919, 0)
        bloom.add(pid * 7919)
    ((_, exact),) = cache.filters
    assert exact.exact and cache.size_bytes == 224 * 8
    assert not cache.seen_or_add(10**12, 0)
    bloom.add(10**12)
    ((_, bits),) = cache.filters
    assert not bits.exact and bits.data == bloom.bits and cache.size_bytes == 1798
    assert all(pid * 7919 in bits for pid in range(224)) and 10**12 in bits


def test_an_exact_filter_has_no_false_positive():
    """At the defaults a filter holds up to 224 PIDs exactly: not one of 200,000 others is taken for a known one
    (its bloom filter would take about one in 10^8 for one, but an exact filter never does)."""
    cache = TimeControlledBloomFilter(HOUR_MS, 1000, 0.001)
    rng = random.Random(25)
    held = {rng.randrange(1 << 40) for _ in range(224)}
    for pid in held:
        cache.add(pid, 0)
    assert cache.filters[0][1].exact
    assert not any(cache.seen(pid, 0) for pid in range(1 << 41, (1 << 41) + 200_000))
    assert all(cache.seen(pid, 0) for pid in held)


@pytest.mark.parametrize("seed", range(40))
def test_the_same_answers_as_the_bloom_only_cache_wherever_it_had_no_false_positive(seed):
    rng = random.Random(seed)
    window = rng.choice([1_000, 10_000, HOUR_MS])
    expected, rate = rng.choice([(50, 0.01), (20, 0.001), (30, 0.2), (200, 0.01)])
    old, new = _BloomOnly(window, expected, rate), TimeControlledBloomFilter(window, expected, rate)
    pool = [rng.randrange(1 << 63) for _ in range(rng.choice([10, 60, 400]))]
    now, steps, exact_seen = 0, 0, False
    for _ in range(3_000):
        now += rng.choice([0, 0, 0, 1, window // 8, window // 2 - 1, window // 2, window])
        op, pid = rng.random(), rng.choice(pool)
        if op < 0.6:
            found = old.seen(pid, now)
            if new.seen(pid, now) != found:
                assert old.false_positive and found  # the old filter took a new PID for a known one: stop here
                return
            if not found:
                old.add(pid, now)
                new.add(pid, now)
        elif op < 0.95:
            found = old.seen(pid, now)
            if not found:
                old.add(pid, now)
            if new.seen_or_add(pid, now) != found:
                assert old.false_positive and found
                return
        else:
            old.dispose_expired(now)
            new.dispose_expired(now)
        views = new.filters
        assert [ms for ms, _ in views] == [ms for ms, _ in old.filters]
        for (_, view), (_, f) in zip(views, old.filters):
            if not view.exact:
                assert view.data == f.bits  # once bits, the very bits the bloom filter has
            else:
                exact_seen = True
                assert set(view.data) == f.keys
        steps += 1
    assert steps == 3_000 and exact_seen
