"""Repeated errors from one peer are logged once per interval, with a count of those suppressed."""

from proxy.ground.logs import LogLimiter


def test_one_line_per_peer_and_kind_per_interval_then_the_count_of_suppressed_ones():
    limiter = LogLimiter(interval_s=10, max_peers=2)
    assert limiter.allow("1.1.1.1", "request", 0.0) == 0
    assert [limiter.allow("1.1.1.1", "request", t) for t in (1.0, 2.0, 3.0)] == [None, None, None]
    assert limiter.allow("1.1.1.1", "response", 3.0) == 0  # another kind
    assert limiter.allow("1.1.1.1", "request", 10.5) == 3
    assert limiter.allow("2.2.2.2", "request", 11.0) == 0  # bounded: the oldest peer entry goes
    assert len(limiter._peers) == 2
