"""How a follower tells that its topic is no longer the one it was reading (deleted and recreated): pure."""

from __future__ import annotations

from proxy.following import Offsets, log_changed


def test_the_same_log_growing_or_compacted_is_not_a_change():
    seen = Offsets(start=0, end=10, position=10)
    assert log_changed(seen, 0, 12, 11) is None
    assert log_changed(seen, 4, 12, 12) is None  # the log start moves forward (retention, DeleteRecords)


def test_offsets_going_backwards_mean_a_new_log_under_the_same_name():
    seen = Offsets(start=3, end=10, position=10)
    assert "start offset" in log_changed(seen, 0, 12, 10)
    assert "end offset went back" in log_changed(Offsets(0, 10, 8), 0, 2, 8)
    assert "below the position" in log_changed(Offsets(0, 0, 0), 0, 2, 5)
    assert "out of range" in log_changed(Offsets(0, 10, 10), 0, 10, 0)
