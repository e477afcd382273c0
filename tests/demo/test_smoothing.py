"""The demo's smoothing phase measures each second's rate over the time the second really lasted."""

import pytest

from demo.smoothing import per_second


def test_a_late_read_is_divided_by_the_time_it_covered():
    # a producer admitted at exactly its quota (100 bytes/s); the read due at 2 s came at 2.9 s
    counts = [(0.0, 0.0), (1.0, 100.0), (2.9, 290.0), (3.0, 300.0), (4.0, 400.0)]
    assert per_second(counts, 100.0) == pytest.approx((1.0, 1.0, 1.0, 1.0))


def test_a_second_without_admitted_bytes_stays_zero():
    counts = [(0.0, 0.0), (1.0, 0.0), (2.0, 250.0)]
    assert per_second(counts, 100.0) == (0.0, 2.5)
