"""The records a proxy has made for the usage topic and not yet had acknowledged (quota.sharing.usage_outbox, issue 34): a
failed send is sent again, the same record, until acknowledged or stale; bounded by age and bytes."""

from __future__ import annotations

import pytest

from quota.sharing.usage_outbox import MAX_PENDING_RECORDS, UsageOutbox

STALE_MS = 10_000


def test_a_record_not_acknowledged_is_sent_again_unchanged_before_the_next_one():
    outbox = UsageOutbox(STALE_MS, 1000)
    first = outbox.add(outbox.next_seq(), b"one", 1000)
    assert outbox.due(1000) == [first]  # the send fails: nothing acknowledged
    second = outbox.add(outbox.next_seq(), b"two", 2000)
    assert outbox.due(2000) == [first, second]  # the same bytes, number and date first, then the new one
    assert (first.seq, first.stamp_ms, first.data) == (1, 1000, b"one") and second.seq == 2
    outbox.sent(first)
    with pytest.raises(ValueError, match="out of order"):
        outbox.sent(first)
    outbox.sent(second)
    assert outbox.due(3000) == [] and len(outbox) == 0 and outbox.expired == 0


def test_records_older_than_stale_ms_are_dropped_unsent_and_counted():
    outbox = UsageOutbox(STALE_MS, 1000)
    for at in (0, 1000, 2000):
        outbox.add(outbox.next_seq(), b"x", at)
    assert [r.seq for r in outbox.due(STALE_MS + 1000)] == [2, 3]  # the first is past stale_ms: peers would skip it
    assert outbox.expired == 1
    assert [r.seq for r in outbox.due(STALE_MS + 2001)] == [] and outbox.expired == 3


def test_waiting_records_are_bounded_in_bytes_the_oldest_dropped_first():
    outbox = UsageOutbox(STALE_MS, 100)
    for i in range(MAX_PENDING_RECORDS + 4):
        outbox.add(outbox.next_seq(), b"x" * 100, i)
    due = outbox.due(MAX_PENDING_RECORDS + 4)
    assert len(due) == MAX_PENDING_RECORDS and due[0].seq == 5 and outbox.expired == 4
    big = outbox.add(outbox.next_seq(), b"x" * 100 * (MAX_PENDING_RECORDS + 1), 30)  # alone past the bound: kept
    assert outbox.due(30) == [big]
