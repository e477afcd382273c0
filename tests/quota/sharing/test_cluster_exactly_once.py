"""Issue 34: three sidecars sharing one budget through numbered usage records stay within it when a publisher's
sends fail (and one that timed out had in fact been appended), when a follower reads the topic again, and when a
sidecar restarts. Pure and on a fake clock: each sidecar is its managers (``quota.smoothing`` on, as by default with
a usage topic), a tap, a :class:`~quota.sharing.usage_outbox.UsageOutbox` and a :class:`~quota.sharing.cluster_peers.ClusterPeers`;
the topic is a list; one tenant's client on each sidecar sends whenever it is not throttled. While the topic is down
no sidecar sees the others' usage (within ``stale_ms``: no fallback), so each lets the tenant through at its quota;
the usage then reaches the others late and they pay it back. A restarted sidecar
records its peers' usage from its start on (it starts with full buckets, as a new sidecar does). Each scenario also
runs the way the code worked before (records not numbered, a failed send dropped, the topic's history recorded at
start-up), to show that the bounds are what the numbering, the resending and the start keep. Measured (the tenant's
total over 15 s from the fault, as a multiple of its quota; the three sidecars' shares): topic down 1.01 (0.33,
0.33, 0.35), before 1.28 (0.18, 0.18, 0.92); a replay 0.98 (0.33 each), before 0.98 (0.01, 0.48, 0.48); a restart
1.05 (0.30, 0.46, 0.30), before 0.97 (0.48, 0.01, 0.48)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from quota.managers.client_quota import ClientQuotaManager
from quota.primitives.clock import ManualClock
from quota.primitives.entity import PRODUCER_BYTE_RATE
from quota.primitives.quota_table import QuotaTable
from quota.primitives.rate import QuotaWindow
from quota.sharing.cluster_peers import ClusterPeers, fallback_delta
from quota.sharing.usage_encoding import decode, encode
from quota.sharing.usage_outbox import UsageOutbox
from quota.sharing.usage_share import UsageTap

QUOTA = 10_000  # bytes/s
SYNC_MS, STALE_MS = 1000, 10_000
STEP_MS, CHUNK = 10, 500
EVENT_MS = 20_000  # when the fault happens
MEASURE_MS = 15_000  # measured from then on


class Sidecar:
    def __init__(
        self, name: str, clock: ManualClock, run: int, numbered: bool, stale_ms: int = STALE_MS, covering: bool = True
    ) -> None:
        table = QuotaTable.from_values([({"user": "<default>"}, {PRODUCER_BYTE_RATE: QUOTA})])
        self.name, self.numbered, self.covering = name, numbered, covering
        self.manager = ClientQuotaManager(table, PRODUCER_BYTE_RATE, clock, QuotaWindow(11, 1), smoothing=True)
        self.manager.tap = UsageTap()
        self.peers = ClusterPeers(name, stale_ms, since_ms=clock.now_ms() - SYNC_MS if numbered else None)
        self.outbox = UsageOutbox(stale_ms, 2**20)
        self.incarnation = f"{name}-{run}"
        self.read = 0  # the follower's position in the topic
        self.ready = 0  # when its client may send next

    def publish(self, topic: list, now: int, fault: str | None) -> None:
        delta = self.manager.tap.take(self.name)
        view = self.peers.view(now)
        if view.fallback:  # no peer fresh: its own usage recorded for each silent peer (quota / live sidecars)
            unseen = self.peers.cover(now) if self.covering else view.share_divisor - 1  # (before: not covered)
            for user, client_id, v in fallback_delta(delta, unseen).produce:
                self.manager.record_remote(user, client_id, v, now)
        seq = self.outbox.next_seq()
        if self.numbered:
            delta = replace(delta, incarnation=self.incarnation, seq=seq)
        self.outbox.add(seq, encode(delta), now)
        for record in self.outbox.due(now):
            if fault == "down":
                break
            topic.append((self.name, record.data, record.stamp_ms))
            if fault == "appended, then timed out" or not self.numbered:  # (before: sent once, whatever happened)
                if not self.numbered:
                    self.outbox.sent(record)
                break
            self.outbox.sent(record)
        if not self.numbered and fault == "down":
            self.outbox.sent(self.outbox.due(now)[0])  # before: "this delta is lost"

    def follow(self, topic: list, now: int) -> None:
        for key, value, stamp in topic[self.read :]:
            if not self.peers.accept(key, stamp, now):
                continue
            delta = decode(value)
            if self.numbered and not self.peers.first_time(key, delta.incarnation, delta.seq, stamp, now):
                continue
            for user, client_id, v in delta.produce:
                self.manager.record_remote(user, client_id, v, now)
        self.read = len(topic)


def run(
    scenario: str,
    numbered: bool,
    stale_ms: int = STALE_MS,
    covering: bool = True,
    down_ms: int = 3000,
    measured_from: int = 0,
    measure_ms: int = MEASURE_MS,
) -> tuple[float, list[float]]:
    """The tenant's admitted bytes over ``measure_ms`` from EVENT_MS (+ ``measured_from``), as a multiple of the
    quota, in total and per sidecar."""
    clock = ManualClock(1_000_000)
    start = clock.now_ms()
    sidecars = [Sidecar(name, clock, 0, numbered, stale_ms, covering) for name in ("a", "b", "c")]
    topic: list = []
    admitted = [0.0, 0.0, 0.0]
    next_sync = start + SYNC_MS
    while clock.now_ms() < start + EVENT_MS + measured_from + measure_ms:
        now = clock.now_ms()
        at = now - start
        measuring = EVENT_MS + measured_from <= at < EVENT_MS + measured_from + measure_ms
        for i, sidecar in enumerate(sidecars):
            if sidecar.ready <= now:
                throttle = sidecar.manager.record_and_get_throttle_time_ms("alice", "p", CHUNK)
                admitted[i] += CHUNK if measuring else 0
                sidecar.ready = now + max(throttle, STEP_MS)
        if now >= next_sync:
            next_sync += SYNC_MS
            for i, sidecar in enumerate(sidecars):
                fault = None
                if scenario == "the topic is down" and EVENT_MS <= at < EVENT_MS + down_ms:
                    fault = "appended, then timed out" if i == 2 and at == EVENT_MS + 2000 else "down"
                sidecar.publish(topic, now, fault)
            if scenario == "a follower reads the topic again" and at == EVENT_MS:
                sidecars[0].read = 0
            if scenario == "a sidecar restarts" and at == EVENT_MS:
                sidecars[1] = Sidecar("b", clock, 1, numbered, stale_ms, covering)  # its clients wait for it to be back
                sidecars[1].ready = now + 2000
            for sidecar in sidecars:
                sidecar.follow(topic, now)
        clock.advance(STEP_MS)
    per_second = QUOTA * measure_ms / 1000
    return sum(admitted) / per_second, [a / per_second for a in admitted]


@pytest.mark.parametrize("scenario", ["the topic is down", "a follower reads the topic again", "a sidecar restarts"])
def test_the_tenant_keeps_to_its_budget_in_total_through_faults(scenario):
    total, shares = run(scenario, numbered=True)
    burst = 1.0 if scenario == "a sidecar restarts" else 0.0  # a restarted sidecar starts with a full bucket
    assert 0.85 <= total <= 1.1 + burst * 1000 / MEASURE_MS, (total, shares)
    assert min(shares) > 0.2, shares  # and nobody starved


def test_before_the_numbering_a_failed_publish_let_the_tenant_through_above_its_quota():
    total, shares = run("the topic is down", numbered=False)
    assert total > 1.1, (total, shares)


def test_before_the_numbering_a_replay_starved_the_sidecar_that_read_the_topic_again():
    total, shares = run("a follower reads the topic again", numbered=False)
    assert shares[0] < 0.1, shares


def test_before_a_restarted_sidecar_recording_the_topics_history_was_starved():
    """The peers' usage of the last stale_ms, recorded at once into its new buckets: a debt it never catches up on
    while the others keep the tenant at its quota."""
    total, shares = run("a sidecar restarts", numbered=False)
    assert shares[1] < 0.1, shares


def test_after_a_stall_past_stale_ms_the_peers_usage_assumed_in_fallback_is_not_recorded_again():
    """The usage topic stalls for 3 s with ``stale_ms`` 2 s: each sidecar keeps to quota / 3 for the last second,
    assuming its peers use what it does; then the peers' records of that second arrive. Recorded over the share
    assumed, they were a debt of what had been paid already: measured over the 15 s from the topic's return, the
    tenant got 0.67 x its quota in total (0.17, 0.17, 0.33); with those records taken as covered, 0.98 (0.33 each)."""
    total, shares = run("the topic is down", numbered=True, stale_ms=2000, down_ms=3000, measured_from=3000)
    assert 0.9 <= total <= 1.1, (total, shares)
    assert min(shares) > 0.25, shares
    before, shares = run(
        "the topic is down", numbered=True, stale_ms=2000, down_ms=3000, measured_from=3000, covering=False
    )
    assert before < 0.8, (before, shares)


def test_a_stall_past_stale_ms_leaves_the_first_stale_ms_unpaid_and_no_more():
    """What docs/quotas/cluster-budgets.md states of a usage topic that stalls: shorter than ``stale_ms``, each
    sidecar lets the tenant through at its own quota meanwhile and the peers' records, sent late, are paid back;
    longer, the sidecars fall back to quota / 3 once ``stale_ms`` has passed, and the first ``stale_ms`` stays
    unpaid (its records are stale, or covered by the share assumed): the two peers' usage of that time, 2 x
    ``stale_ms`` x the quota more for the tenant, however long the stall. Measured over 40 s from the stall's
    start, the defaults (sync 1 s, stale 10 s): 9 s, 0.99 x (paid back); 12 s and 30 s, 19.4 s of the quota more."""
    window_s = 40
    paid, _ = run("the topic is down", numbered=True, down_ms=9_000, measure_ms=window_s * 1000)
    assert 0.95 <= paid <= 1.05, paid
    for down_ms in (12_000, 30_000):
        total, shares = run("the topic is down", numbered=True, down_ms=down_ms, measure_ms=window_s * 1000)
        extra_s = (total - 1) * window_s
        assert 0.9 * 2 * STALE_MS / 1000 <= extra_s <= 1.05 * 2 * STALE_MS / 1000, (down_ms, total, shares)
