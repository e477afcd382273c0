"""Three sidecars sharing one ``producer_byte_rate`` (issue 26), on a fake clock: each a manager whose usage goes to
the others through a :class:`~quota.sharing.usage_share.UsageTap` every 250 ms (the early sync of a flat-out tenant),
recorded there 300 ms later; one client per sidecar sending 1 MB requests whenever it is not muted (a producer
with its queue full), muted for each throttle. What ``bench/cluster_budget.py`` measures with real processes, as
plain values: with the token bucket (``quota.smoothing: on``, the default with a usage topic) the total stays at the
quota, each sidecar taking what it asks for; the tenant moving all its traffic to one sidecar gets the whole
budget there within a few seconds. Kafka's sampled rate (smoothing off) fails both in the same simulation: 1.29 x
in total, and 15 s of nothing on the one sidecar after the shift, then a burst of 10 x: every sidecar refills the
same expired headroom before the others' usage arrives, the overshoot's throttle outlasts the window, and a sampled
rate whose window emptied grants a new client's burst (quota x 10 s) again."""

from __future__ import annotations

from quota import PRODUCER_BYTE_RATE, ClientQuotaManager, ManualClock, QuotaTable, QuotaWindow
from quota.primitives.decision import Throttle
from quota.sharing.usage_share import UsageTap

RATE = 2_000_000
REQUEST = 1_000_000
STEP_MS, SYNC_MS, LAG_MS = 5, 250, 300


def simulate(seconds: int, sending, smoothing: bool = True) -> list[list[int]]:
    """Bytes admitted per sidecar per second; ``sending(i, now_ms)``: whether sidecar i's client produces now."""
    clock = ManualClock(0)
    table = QuotaTable.from_values([({"client-id": "shared"}, {"producer_byte_rate": RATE})])
    managers = [
        ClientQuotaManager(table, PRODUCER_BYTE_RATE, clock, QuotaWindow(11, 1), 25_000, smoothing=smoothing)
        for _ in range(3)
    ]
    taps = [UsageTap() for _ in managers]
    for manager, tap in zip(managers, taps):
        manager.tap = tap
    muted_until = [0, 0, 0]
    in_transit: list[tuple[int, int, object]] = []  # (recorded at, receiver, delta)
    admitted = [[0] * seconds for _ in managers]
    for now in range(0, seconds * 1000, STEP_MS):
        clock.set(now)
        for i, tap in enumerate(taps):
            if now % SYNC_MS == i * STEP_MS:  # each syncs at its own phase
                delta = tap.take(f"sidecar-{i}")
                in_transit += [(now + LAG_MS, j, delta) for j in range(3) if j != i]
        for _at, j, delta in [t for t in in_transit if t[0] <= now]:
            for user, client_id, value in delta.produce:
                managers[j].record_remote(user, client_id, value, now)
        in_transit = [t for t in in_transit if t[0] > now]
        for i, manager in enumerate(managers):
            if sending(i, now) and now >= muted_until[i]:
                decision = manager.record_and_decide("", "shared", REQUEST, now)
                admitted[i][now // 1000] += REQUEST
                muted_until[i] = now + (decision.mute_ms if isinstance(decision, Throttle) else 0) + STEP_MS
    return admitted


def test_three_sidecars_flat_out_get_the_quota_once_in_total():
    admitted = simulate(90, lambda i, now: True)
    total = sum(sum(per[20:90]) for per in admitted) / 70 / RATE
    shares = [sum(per[20:90]) / 70 / RATE for per in admitted]
    assert 0.95 <= total <= 1.05, (total, shares)
    assert all(0.25 <= share <= 0.42 for share in shares), shares  # each its share of an equal demand


def test_the_whole_budget_follows_the_tenant_to_one_sidecar():
    shift_s = 40
    admitted = simulate(70, lambda i, now: i == 0 or now < shift_s * 1000)
    after = [admitted[0][s] / RATE for s in range(shift_s, 70)]
    reached = next(k for k in range(len(after) - 2) if sum(after[k : k + 3]) / 3 >= 0.9)
    assert reached <= 5, after  # within 5 s of the shift (a 3 s average: requests of half a second's quota)
    assert 0.95 <= sum(after[10:]) / len(after[10:]) <= 1.05, after
    assert sum(admitted[0][20:shift_s]) / 20 / RATE < 0.45  # before, it had about a third
