"""A byte-rate quota far from binding is decided without measuring (``remaining_floor``, ``Rate.surely_within``):
the same caps, cuts and throttles as measuring every time, whether the quota binds or not."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quota import CONSUMER_BYTE_RATE, DEFAULT, ClientQuotaManager, ManualClock, QuotaTable, QuotaWindow, Rate

STEPS = st.lists(
    st.tuples(st.integers(0, 3_000), st.integers(1, 5_000), st.integers(0, 6_000), st.booleans()), max_size=40
)


def consumer(steps, shortcuts: bool, monkeypatch) -> list:
    """What a consumer's fetches were capped to, cut to and charged, and the rate after each, as the Fetch's stage
    reads them (``proxy.apis.byte_rate``): the floor first when ``shortcuts``, the exact figures always otherwise."""
    if not shortcuts:
        monkeypatch.setattr(Rate, "surely_within", lambda self, limit, now_ms: False)  # measure purges as before
        monkeypatch.setattr(
            Rate, "record_within", lambda self, value, now_ms, limit: self.record(value, now_ms) or False
        )
    clock = ManualClock()
    table = QuotaTable.from_values([({"user": DEFAULT}, {CONSUMER_BYTE_RATE: 1_000})])
    m = ClientQuotaManager(table, CONSUMER_BYTE_RATE, clock, QuotaWindow(num=3, size_seconds=1))
    seen = []
    for advance, max_bytes, answer, other in steps:
        clock.advance(advance)
        client = "other" if other else "etl"  # two clients of one user: one quota, fetches interleaved
        floor = m.remaining_floor("alice", client) if shortcuts else 0.0
        exact = max(1, int(m.remaining_in_quota_window("alice", client)))
        cap = max_bytes if max_bytes <= floor else min(max_bytes, exact)
        size = answer if answer <= floor else min(answer, max(1, int(m.remaining_in_quota_window("alice", client))))
        seen.append((cap, size, m.record_and_decide("alice", client, size), repr(m.keeper.get(("alice", "")).rate)))
    monkeypatch.undo()
    return seen


@settings(max_examples=30, deadline=None)
@given(steps=STEPS)
def test_the_shortcuts_change_no_cap_cut_or_throttle(steps):
    with pytest.MonkeyPatch.context() as monkeypatch:
        assert consumer(steps, True, monkeypatch) == consumer(steps, False, monkeypatch)
