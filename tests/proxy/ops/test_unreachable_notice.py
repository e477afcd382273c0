"""When the proxy warns that no broker answers: the first failed probe at once, then once per interval while the
failures last, and again at once after the broker was reached and lost (a fake clock: the caller passes the time)."""

from proxy.ops.readiness import UnreachableNotice


def test_the_first_failure_is_said_at_once_then_once_per_interval_while_it_lasts():
    notice = UnreachableNotice(interval_s=30.0)
    said = [(t, notice.failed(float(t))) for t in range(0, 95)]  # a probe a second for 95 s
    assert [(t, d) for t, d in said if d is not None] == [(0, 0.0), (30, 30.0), (60, 60.0), (90, 90.0)]
    assert not notice.ever_reachable


def test_a_success_starts_over_and_the_next_failure_is_said_at_once():
    notice = UnreachableNotice(interval_s=30.0)
    assert notice.failed(0.0) == 0.0
    assert notice.failed(10.0) is None
    notice.succeeded()
    assert notice.ever_reachable
    assert notice.failed(12.0) == 0.0  # not held back by the line said at 0
    assert notice.failed(20.0) is None
    assert notice.failed(42.0) == 30.0
