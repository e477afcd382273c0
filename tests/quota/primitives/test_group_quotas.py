"""The group quota table as the config topic changes it (quota.primitives.group_quotas): a change makes a new table,
the old one stays as it was, and an entry that is not the group's own is refused."""

from __future__ import annotations

import pytest

from quota.primitives.entity import DEFAULT, REQUEST_RATE, QuotaEntry
from quota.primitives.group_quotas import GroupEntity, group_table


def entry(group: str, rate: float) -> QuotaEntry:
    return QuotaEntry(GroupEntity.of(group), {REQUEST_RATE: rate})


def test_a_change_makes_a_new_table_and_leaves_the_old_one():
    old = group_table({"payments": 2, DEFAULT: 5})
    assert old.with_changes({}) is old
    new = old.with_changes({"payments": entry("payments", 7), DEFAULT: None, "storm": entry("storm", 1)})
    assert [new.resolve(REQUEST_RATE, "", g).limit for g in ("payments", "storm", "other")] == [7, 1, float("inf")]
    assert [old.resolve(REQUEST_RATE, "", g).limit for g in ("payments", "storm", "other")] == [2, 5, 5]
    assert new.entry("storm") == entry("storm", 1) and new.entry(DEFAULT) is None and len(new) == 2
    assert new.keys() == {REQUEST_RATE} and new.with_changes({"payments": None, "storm": None}).keys() == frozenset()


@pytest.mark.parametrize(
    "changes,message",
    [
        ({"payments": entry("storm", 1)}, "/groups/payments: the entry is /groups/storm's"),
        ({"payments": QuotaEntry(GroupEntity.of("payments"), {"producer_byte_rate": 1})}, "takes request_rate alone"),
        ({"payments": entry("payments", 0)}, "must be a rate > 0"),
    ],
)
def test_an_entry_not_the_groups_own_or_not_a_rate_is_refused(changes, message):
    table = group_table({"payments": 2})
    with pytest.raises(ValueError, match=message):
        table.with_changes(changes)
    assert table.resolve(REQUEST_RATE, "", "payments").limit == 2
