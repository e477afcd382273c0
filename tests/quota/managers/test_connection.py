"""Connection creation rates and counts (KIP-612, KIP-402), on a fake clock: the acceptor's delay, the per-IP hold
and second check, the internal listener's exemption, and the counts."""

from __future__ import annotations

import math
from types import MappingProxyType

import pytest

from quota.managers.connection import (
    IP_RATE,
    LISTENER_MAX_CONNECTIONS,
    MAX_CONNECTIONS,
    MAX_CONNECTIONS_PER_IP,
    Admit,
    Close,
    ConnectionLimits,
    ConnectionQuotas,
    Hold,
    normalize_ip,
)
from quota.primitives.entity import DEFAULT
from quota.primitives.rate import QuotaWindow

WINDOW = QuotaWindow(11, 1)


def limits(**kw) -> ConnectionLimits:
    return ConnectionLimits(**{k: MappingProxyType(v) if isinstance(v, dict) else v for k, v in kw.items()})


def run_acceptor(
    q: ConnectionQuotas, listener: str, offered_per_s: float, seconds: float, start_ms: int = 0, ip: str = "10.0.0.1"
) -> list[int]:
    """An acceptor with connections arriving at ``offered_per_s``: each accept waits the delay it is given, during
    which arrivals queue (the backlog). Returns the times connections were handed on."""
    now, arrivals, handed = start_ms, 0.0, []
    end = start_ms + seconds * 1000
    gap = 1000.0 / offered_per_s
    next_arrival = float(start_ms)
    for _ in range(1_000_000):  # bounded
        now = max(now, int(next_arrival))
        if now >= end:
            break
        next_arrival += gap  # this arrival is accepted at `now` (or was waiting in the backlog)
        delay = q.accept_delay_ms(listener, now)
        assert 0 <= delay <= WINDOW.size_ms
        now += delay
        assert isinstance(q.admit(listener, ip, now), Admit)
        handed.append(now)
        arrivals += 1
    return handed


def rate_between(times: list[int], t0: int, t1: int) -> float:
    return sum(1 for t in times if t0 <= t < t1) / ((t1 - t0) / 1000)


def steady_rate(times: list[int], spans: int) -> float:
    """The rate over whole window spans (11 s) after the first: a sampled rate admits a burst each time its oldest
    sample expires (about every span), then holds back, so its rate is only steady over whole spans."""
    return rate_between(times, WINDOW.span_ms, WINDOW.span_ms * (1 + spans))


def test_proxy_wide_rate_delays_accepting_to_the_limit_after_the_start_up_allowance():
    q = ConnectionQuotas(["external"], WINDOW, limits(max_connection_creation_rate=10))
    handed = run_acceptor(q, "external", offered_per_s=50, seconds=60)
    # a fresh rate divides by at least (num - 1) windows: about 10 x 10 connections go at once, as in Kafka
    assert 90 <= sum(1 for t in handed if t < 3000) <= 110
    assert steady_rate(handed, 4) == pytest.approx(10, rel=0.05)
    assert q.accept_throttles["external"].count > 0


def test_the_delay_follows_kafkas_formula_and_is_capped_at_one_window():
    q = ConnectionQuotas(["l"], WINDOW, limits(max_connection_creation_rate=5))
    for _ in range(50):  # 50 in the first ms: rate 50 / 10 s = 5/s, at the limit
        assert q.accept_delay_ms("l", 0) == 0
    # the 51st: 51 / 10 s = 5.1/s; (5.1 - 5) / 5 * 10 s = 200 ms
    assert q.accept_delay_ms("l", 0) == 200
    for _ in range(100):
        assert q.accept_delay_ms("l", 0) <= 1000
    assert q.accept_delay_ms("l", 0) == 1000


def test_a_listener_limit_holds_for_that_listener_only():
    q = ConnectionQuotas(["a", "b"], WINDOW, limits(listener_creation_rates={"a": 5}))
    a = run_acceptor(q, "a", offered_per_s=40, seconds=40)
    b = run_acceptor(q, "b", offered_per_s=40, seconds=40)
    assert steady_rate(a, 2) == pytest.approx(5, rel=0.05)
    assert steady_rate(b, 2) == pytest.approx(40, rel=0.05)


def test_the_internal_listener_is_exempt_from_the_proxy_wide_rate_but_not_from_its_own():
    q = ConnectionQuotas(
        ["external", "internal"],
        WINDOW,
        limits(max_connection_creation_rate=5, listener_creation_rates={"internal": 20}, internal_listener="internal"),
    )
    external = run_acceptor(q, "external", offered_per_s=40, seconds=34)
    internal = run_acceptor(q, "internal", offered_per_s=40, seconds=34)
    assert steady_rate(external, 2) == pytest.approx(5, rel=0.05)
    assert steady_rate(internal, 2) == pytest.approx(20, rel=0.05)
    # internal connections did not count against the proxy-wide rate
    assert q.proxy_accept_rate(34_000) < 7


def test_a_sole_listener_marked_internal_is_not_exempt():
    """Kafka protects the inter-broker listener only when there are other listeners."""
    q = ConnectionQuotas(["only"], WINDOW, limits(max_connection_creation_rate=5, internal_listener="only"))
    handed = run_acceptor(q, "only", offered_per_s=40, seconds=34)
    assert steady_rate(handed, 2) == pytest.approx(5, rel=0.05)


def ip_storm(q: ConnectionQuotas, ip: str, per_s: float, seconds: float, start_ms: int = 0) -> tuple[list[int], int]:
    """Connections from ``ip`` at ``per_s``, accepted at once (no listener limit): each is admitted, or held and
    checked again after its hold. Returns the times connections were served, and how many were closed."""
    pending: list[tuple[int, int]] = []  # (when a held connection is checked again, arrival)
    served, closed = [], 0
    gap = 1000.0 / per_s
    n = int(seconds * per_s)
    events = [(start_ms + int(i * gap), "arrive") for i in range(n)]
    for _ in range(10 * n + 10):  # bounded
        if not events and not pending:
            break
        pending.sort()
        if pending and (not events or pending[0][0] <= events[0][0]):
            at, _ = pending.pop(0)
            decision = q.retry("l", ip, at)
            if isinstance(decision, Admit):
                served.append(at)
            else:
                assert decision.reason == IP_RATE
                closed += 1
            continue
        at, _ = events.pop(0)
        assert q.accept_delay_ms("l", at) == 0
        decision = q.admit("l", ip, at)
        if isinstance(decision, Admit):
            served.append(at)
        else:
            assert isinstance(decision, Hold) and 0 < decision.delay_ms <= 1000
            pending.append((at + decision.delay_ms, at))
    return served, closed


def test_an_ip_over_its_rate_is_served_at_its_rate_and_the_rest_closed_after_a_hold():
    """KIP-612's per-IP rule with 5/s for one IP, 20 connects/s: after the start-up allowance (about
    rate x (samples - 1) x window = 50) it is served at 5/s over whole window spans, the rest closed after their
    hold; another IP is not affected."""
    q = ConnectionQuotas(["l"], WINDOW, limits(ip_rates={"127.0.0.2": 5}))
    served, closed = ip_storm(q, "127.0.0.2", per_s=20, seconds=45)
    assert 50 <= sum(1 for t in served if t < 3000) <= 56
    assert steady_rate(served, 3) == pytest.approx(5, rel=0.1)
    assert closed == 900 - len(served)
    # throttled connections were un-recorded: the listener counts what it served
    served_last_span = sum(1 for t in served if t >= 45_000 - WINDOW.span_ms)
    assert q.listener_accept_rate("l", 45_000) * 11 == pytest.approx(served_last_span, rel=0.1)
    other, other_closed = ip_storm(q, "127.0.0.3", per_s=20, seconds=45, start_ms=45_000)
    assert len(other) == 900 and other_closed == 0
    assert q.ip_throttles["l"].count > 0


def test_the_default_ip_rate_applies_to_each_ip_separately_and_an_override_wins():
    q = ConnectionQuotas(["l"], WINDOW, limits(ip_rates={DEFAULT: 2, "127.0.0.9": 100}))
    a, _ = ip_storm(q, "127.0.0.2", per_s=10, seconds=34)
    b, _ = ip_storm(q, "127.0.0.3", per_s=10, seconds=34)
    c, c_closed = ip_storm(q, "127.0.0.9", per_s=10, seconds=34)
    assert steady_rate(a, 2) == pytest.approx(2, rel=0.15)
    assert steady_rate(b, 2) == pytest.approx(2, rel=0.15)
    assert len(c) == 340 and c_closed == 0


def test_a_held_connection_is_admitted_when_its_ip_is_back_within_quota():
    q = ConnectionQuotas(["l"], WINDOW, limits(ip_rates={"10.1.1.1": 5}))

    def connect(now_ms: int):
        assert q.accept_delay_ms("l", now_ms) == 0
        return q.admit("l", "10.1.1.1", now_ms)

    for _ in range(50):  # the allowance: 50 / 10 s
        assert connect(0) == Admit()
    decision = connect(9000)
    assert decision == Hold(200)  # 51 / 10 s = 5.1/s: (5.1 - 5) / 5 * 10 s
    refused = q.retry("l", "10.1.1.1", 9100)  # 51 / 10.1 s: still over
    assert isinstance(refused, Close) and refused.reason == IP_RATE
    assert connect(9100) == Hold(100)  # the refused one was not counted
    assert q.retry("l", "10.1.1.1", 9200) == Admit()  # 51 / 10.2 s = 5/s: within the quota
    assert q.per_ip["10.1.1.1"] == 51
    assert q.listener_accept_rate("l", 9200) == pytest.approx(51 / 10.2)


def test_counts_close_at_once_over_each_limit_and_are_released_on_close():
    q = ConnectionQuotas(
        ["a", "b"],
        WINDOW,
        limits(
            max_connections=4,
            listener_max_connections={"b": 1},
            max_connections_per_ip=2,
            max_connections_per_ip_overrides={"10.0.0.9": 3},
        ),
    )
    assert q.admit("a", "10.0.0.1", 0) == Admit() and q.admit("a", "10.0.0.1", 0) == Admit()
    third = q.admit("a", "10.0.0.1", 0)
    assert isinstance(third, Close) and third.reason == MAX_CONNECTIONS_PER_IP
    assert q.admit("b", "10.0.0.2", 0) == Admit()
    over_listener = q.admit("b", "10.0.0.3", 0)
    assert isinstance(over_listener, Close) and over_listener.reason == LISTENER_MAX_CONNECTIONS
    assert q.admit("a", "10.0.0.9", 0) == Admit()
    over_total = q.admit("a", "10.0.0.9", 0)
    assert isinstance(over_total, Close) and over_total.reason == MAX_CONNECTIONS
    q.closed("a", "10.0.0.1")
    assert q.admit("a", "10.0.0.9", 0) == Admit()  # the override allows 3 from this IP, and a slot is free
    assert q.total == 4 and q.per_ip == {"10.0.0.1": 1, "10.0.0.2": 1, "10.0.0.9": 2}


def test_the_internal_listener_is_exempt_from_max_connections():
    q = ConnectionQuotas(["ext", "int"], WINDOW, limits(max_connections=1, internal_listener="int"))
    assert q.admit("ext", "10.0.0.1", 0) == Admit()
    assert isinstance(q.admit("ext", "10.0.0.2", 0), Close)
    assert q.admit("int", "10.0.0.3", 0) == Admit()


def test_closing_a_connection_never_admitted_raises():
    q = ConnectionQuotas(["l"], WINDOW)
    with pytest.raises(ValueError):
        q.closed("l", "10.0.0.1")


def test_unlimited_by_default_and_no_ip_rates_tracked():
    q = ConnectionQuotas(["l"], WINDOW)
    for i in range(5000):
        assert q.accept_delay_ms("l", i // 100) == 0
        assert q.admit("l", f"10.0.{i // 250}.{i % 250}", i // 100) == Admit()
    assert q.tracked_ips == 0
    assert q.proxy_accept_rate(50) == pytest.approx(5000 / 10.05)  # (num - 1) windows and the 50 ms elapsed


def test_idle_ip_rates_are_dropped_after_an_hour():
    q = ConnectionQuotas(["l"], WINDOW, limits(ip_rates={DEFAULT: 5}))
    q.admit("l", "10.0.0.1", 0)
    q.expire_idle(3_599_999)
    assert q.tracked_ips == 1
    q.expire_idle(3_600_000)
    assert q.tracked_ips == 0


def test_reconfiguring_keeps_rates_and_counts():
    q = ConnectionQuotas(["l"], WINDOW)
    for _ in range(100):
        q.accept_delay_ms("l", 0)
        q.admit("l", "10.0.0.1", 0)
    q.configure(limits(max_connection_creation_rate=5, max_connections_per_ip=100))
    assert q.accept_delay_ms("l", 0) == 1000  # 101 / 10 s is far over 5/s
    assert isinstance(q.admit("l", "10.0.0.1", 0), Close)  # 100 open already


def test_ips_are_normalised():
    assert normalize_ip("::ffff:127.0.0.2") == "127.0.0.2"
    assert normalize_ip("2001:DB8::1") == "2001:db8::1"
    with pytest.raises(ValueError):
        normalize_ip("example.com")
    assert math.isinf(ConnectionLimits().ip_rate("1.2.3.4"))
