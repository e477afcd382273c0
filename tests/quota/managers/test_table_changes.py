"""QuotaTable.with_changes: the next table from this one, in work linear in the entities changed (counted as the
entries copied, not timed), resolving exactly as a table built whole from the same entries."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quota.primitives.entity import CONSUMER_BYTE_RATE, DEFAULT, PRODUCER_BYTE_RATE, QuotaEntity, QuotaEntry
from quota.primitives.quota_table import QuotaTable

pytestmark = pytest.mark.long_running(seconds=10)

P, C = PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE
NAMES = ["alice", "bob", DEFAULT]
ENTITIES = [QuotaEntity(u, c) for u in NAMES + [None] for c in NAMES + [None] if (u, c) != (None, None)]
entries = st.builds(
    lambda e, p, c, shadow: QuotaEntry(e, {k: v for k, v in ((P, p), (C, c)) if v}, shadow),
    st.sampled_from(ENTITIES),
    st.one_of(st.none(), st.integers(1, 9)),
    st.one_of(st.none(), st.integers(1, 9)),
    st.booleans(),
)
change = st.one_of(entries.map(lambda e: (e.entity, e)), st.sampled_from(ENTITIES).map(lambda e: (e, None)))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(change, max_size=4), max_size=6))
def test_resolves_as_a_table_built_whole(batches):
    table, now = QuotaTable(), {}
    for batch in batches:
        changes = dict(batch)
        table = table.with_changes(changes)
        for entity, entry in changes.items():
            if entry is None:
                now.pop(entity, None)
            else:
                now[entity] = entry
        whole = QuotaTable(now.values())
        assert table.keys() == whole.keys() and len(table) == len(whole)
        assert sorted(map(repr, table.entries)) == sorted(map(repr, whole.entries))
        for key in (P, C):
            for user in ("alice", "bob", "carol"):
                for client in ("alice", "bob", "x"):
                    assert table.resolve(key, user, client) == whole.resolve(key, user, client)


def big_table(n: int) -> QuotaTable:
    return QuotaTable(QuotaEntry(QuotaEntity(f"user-{i}"), {P: 1000 + i, C: 2000 + i}) for i in range(n))


def entries_copied(new: QuotaTable, old: QuotaTable) -> int:
    maps = [(new._entries, old._entries)] + [(new._by_key[k], old._by_key[k]) for k in new._by_key]
    return sum(n.copied_from(o) for n, o in maps)


@pytest.mark.parametrize("size", [20_000, 200_000])
def test_one_change_copies_a_few_chunks_not_the_table(size):
    table = big_table(size)
    entity = QuotaEntity("user-7")
    changed = table.with_changes({entity: QuotaEntry(entity, {P: 5})})
    assert entries_copied(changed, table) <= 3 * 1024  # one chunk of each of 3 maps (a chunk: ~256, at most ~1024)
    assert changed.limit(P, "user-7", "x") == 5 and changed.limit(C, "user-7", "x") == float("inf")
    assert table.limit(P, "user-7", "x") == 1007  # the old table is untouched
    assert changed.changes_since(table) == {entity}
    assert changed.changes_since(changed) is None and table.changes_since(changed) is None
    removed = changed.with_changes({QuotaEntity("user-8"): None})
    assert removed.limit(P, "user-8", "x") == float("inf") and len(removed) == size - 1


def test_a_bad_value_raises_naming_the_entity():
    with pytest.raises(ValueError, match="/users/x"):
        QuotaTable().with_changes({QuotaEntity("x"): QuotaEntry(QuotaEntity("x"), {P: -1})})


def test_a_change_made_in_parts_is_known_from_the_origin_and_copies_each_chunk_once():
    table = big_table(100_000)
    changing = table.changing()
    for part in range(10):  # 10 parts of 1,000 entities: every chunk is touched by each part
        changing.apply({QuotaEntity(f"user-{i}"): None for i in range(part * 1000, (part + 1) * 1000)})
    assert changing.copied <= 3 * 100_000  # each map copied at most once in all (not once a part: 3 * 10^6)
    changed = changing.done()
    assert changed.changes_since(table) == {QuotaEntity(f"user-{i}") for i in range(10_000)}
    assert len(changed) == 90_000 and changed.limit(P, "user-5", "x") == float("inf")
    assert table.limit(P, "user-5", "x") == 1005
