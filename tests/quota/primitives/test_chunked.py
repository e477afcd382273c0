"""ChunkedMap: an immutable mapping whose changes copy only the chunks they touch (the work is counted, not
timed)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quota.primitives.chunked import MAX_CHUNKS, REMOVED, TARGET_CHUNK, ChunkedMap

pytestmark = pytest.mark.long_running(seconds=10)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(st.integers(-50, 50), st.integers()),
    st.lists(st.dictionaries(st.integers(-60, 60), st.one_of(st.integers(), st.just(REMOVED)))),
)
def test_behaves_as_a_dict_and_never_changes_the_old_map(start, steps):
    m, expected = ChunkedMap(start), dict(start)
    for changes in steps:
        before, frozen = m, dict(m.items())
        m = m.updated(changes)
        for key, value in changes.items():
            if value is REMOVED:
                expected.pop(key, None)
            else:
                expected[key] = value
        assert dict(before.items()) == frozen  # the old map is untouched
        assert dict(m.items()) == expected and len(m) == len(expected)
        assert all(m[k] == v and k in m and m.get(k) == v for k, v in expected.items())
        assert m.get(1000) is None and 1000 not in m


def test_one_change_copies_one_chunk_whatever_the_size():
    for size in (10_000, 100_000, 1_000_000):
        m = ChunkedMap((str(i), i) for i in range(size))
        one = m.updated({"7": -7})
        assert one.copied_from(m) <= 4 * max(TARGET_CHUNK, size // MAX_CHUNKS)  # one chunk, not the map
        assert one["7"] == -7 and m["7"] == 7


def test_a_batch_copies_at_most_one_chunk_per_key():
    m = ChunkedMap((str(i), i) for i in range(200_000))
    batch = m.updated({str(i): REMOVED for i in range(0, 200_000, 20_000)})
    assert batch.copied_from(m) <= 10 * 4 * TARGET_CHUNK
    assert len(batch) == 200_000 - 10


def test_growing_one_key_at_a_time_lays_the_map_out_again_now_and_then():
    m = ChunkedMap()
    for i in range(20_000):
        m = m.updated({i: i})
    assert len(m) == 20_000 and m[19_999] == 19_999
    assert len(m._chunks) >= 20_000 // (4 * TARGET_CHUNK)  # not one chunk of 20,000


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 3000), st.integers(0, 5000), st.integers(0, 5000))
def test_a_change_laid_out_for_its_expected_size_is_the_same_map(start, added, expected):
    m = ChunkedMap((i, i) for i in range(start))
    changing = m.changing(expected)
    for i in range(start, start + added):
        changing[i] = -i
    new = changing.done()
    assert len(new) == start + added and all(new[i] == (i if i < start else -i) for i in range(start + added))
    assert len(m) == start and all(m[i] == i for i in range(start))
    assert len(new._chunks) * 4 * TARGET_CHUNK >= len(new) or len(new._chunks) == MAX_CHUNKS
