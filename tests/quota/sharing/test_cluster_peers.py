"""Sidecars sharing one budget through the usage topic (quota.sharing.cluster_peers, issue 26), with fake clocks: which
records count, when a peer goes stale, and the per-broker share a sidecar keeps while no peer is fresh. Two
managers stand for two sidecars; the transport (one record per sync) is a function call here."""

from __future__ import annotations

import pytest

from quota.managers.client_quota import ClientQuotaManager
from quota.primitives.clock import ManualClock
from quota.primitives.entity import PRODUCER_BYTE_RATE
from quota.primitives.quota_table import QuotaTable
from quota.primitives.rate import QuotaWindow
from quota.sharing.cluster_peers import ClusterPeers, fallback_delta
from quota.sharing.usage_delta import UsageDelta
from quota.sharing.usage_encoding import decode, encode
from quota.sharing.usage_share import UsageTap

QUOTA = 10_000  # bytes/s
SYNC_MS, STALE_MS = 1000, 10_000


def sidecar(clock):
    table = QuotaTable.from_values([({"user": "<default>"}, {PRODUCER_BYTE_RATE: QUOTA})])
    manager = ClientQuotaManager(table, PRODUCER_BYTE_RATE, clock, QuotaWindow(11, 1))
    manager.tap = UsageTap()
    return manager


def test_own_records_and_old_records_are_not_recorded_but_make_peers_known():
    peers = ClusterPeers("a", STALE_MS)
    assert not peers.accept("a", 1000, 1000)  # its own
    assert not peers.accept("b", 1000, 1000 + STALE_MS + 1)  # read at start-up, long after it was written
    assert peers.accept("c", 5000, 11_001)
    view = peers.view(11_001)
    assert (view.known, view.fresh, view.fallback, view.share_divisor) == (2, 1, False, 3)
    assert peers.stale_peers(11_001) == ["b"]
    assert peers.view(15_001).fallback  # c's last record is now older than stale_ms too
    peers.forget("b")
    assert peers.view(15_001).share_divisor == 2


def test_no_peer_ever_seen_is_no_fallback_and_an_older_record_does_not_move_a_peer_back():
    peers = ClusterPeers("a", STALE_MS)
    assert not peers.view(0).fallback and peers.view(0).share_divisor == 1
    peers.accept("b", 9000, 9000)
    peers.accept("b", 2000, 9000)  # out of order: b stays fresh as of 9000
    assert peers.view(18_000).fresh == 1
    with pytest.raises(ValueError, match="stale_ms"):
        ClusterPeers("a", 0)


def test_fallback_delta_scales_usage_and_drops_ids_and_connections():
    own = UsageDelta(
        "a",
        produce=(("alice", "p", 100.0),),
        fetch=(("bob", "", 7.0),),
        mutations=(("c", "x", 2.0),),
        producer_ids=(("alice", 3, (1, 2, 3)),),
        listeners=(("L", 1),),
        ips=(("10.0.0.1", 1),),
        open_connections=(("total", "", 4),),
    )
    scaled = fallback_delta(own, 2)
    assert scaled.produce == (("alice", "p", 200.0),) and scaled.fetch == (("bob", "", 14.0),)
    assert scaled.mutations == (("c", "x", 4.0),) and scaled.producer_ids == (("alice", 6, ()),)
    assert not (scaled.listeners or scaled.ips or scaled.open_connections)
    assert fallback_delta(own, 0).empty


def flat_out(managers, clock, seconds, sync, chunk=500):
    """One tenant's producer on each of ``managers``, sending whenever not throttled (Kafka clients wait out the
    throttle); ``sync(now)`` runs every SYNC_MS. Returns the bytes admitted per manager over the last half."""
    ready = [clock.now_ms()] * len(managers)
    admitted = [0] * len(managers)
    start = clock.now_ms()
    end = start + seconds * 1000
    next_sync = start + SYNC_MS
    while clock.now_ms() < end:
        now = clock.now_ms()
        for i, manager in enumerate(managers):
            if ready[i] <= now:
                throttle = manager.record_and_get_throttle_time_ms("alice", "p", chunk)
                if now >= start + seconds * 500:
                    admitted[i] += chunk
                ready[i] = now + max(throttle, 10)
        if now >= next_sync:
            sync(now)
            next_sync += SYNC_MS
        clock.advance(10)
    return [a / (seconds / 2) for a in admitted]


def test_two_sidecars_sharing_deltas_keep_the_tenant_at_its_quota_in_total():
    clock = ManualClock(1_000_000)
    a, b = sidecar(clock), sidecar(clock)
    peers = {"a": ClusterPeers("a", STALE_MS), "b": ClusterPeers("b", STALE_MS)}

    def sync(now):
        records = [encode(m.tap.take(name)) for name, m in (("a", a), ("b", b))]  # one record per sidecar
        for name, manager in (("a", a), ("b", b)):
            for value in records:
                delta = decode(value)
                if peers[name].accept(delta.source, now, now):
                    for user, client_id, v in delta.produce:
                        manager.record_remote(user, client_id, v, now)

    rates = flat_out([a, b], clock, 120, sync)
    assert 0.8 * QUOTA <= sum(rates) <= 1.2 * QUOTA, rates
    # without sharing: each sidecar gives the tenant its whole quota
    clock2 = ManualClock(1_000_000)
    alone = flat_out([sidecar(clock2), sidecar(clock2)], clock2, 120, lambda now: None)
    assert sum(alone) >= 1.8 * QUOTA, alone


def test_with_every_peer_stale_a_sidecar_keeps_to_quota_over_live_sidecars_known():
    clock = ManualClock(1_000_000)
    a = sidecar(clock)
    peers = ClusterPeers("a", STALE_MS)
    peers.accept("b", clock.now_ms(), clock.now_ms())
    peers.accept("c", clock.now_ms(), clock.now_ms())  # then b and c fall silent (dead, or split away)
    views = []

    def sync(now):
        own = a.tap.take("a")
        view = peers.view(now)
        views.append(view.fallback)
        if view.fallback:
            for user, client_id, v in fallback_delta(own, view.share_divisor - 1).produce:
                a.record_remote(user, client_id, v, now)

    clock.advance(STALE_MS + 1)
    (rate,) = flat_out([a], clock, 120, sync)
    assert all(views)
    assert 0.8 * QUOTA / 3 <= rate <= 1.2 * QUOTA / 3, rate


# -- issue 34: each record applied once, future dates bounded, peers that stopped forgotten --------------------------


def test_a_numbered_record_is_applied_once_per_incarnation_however_often_it_is_read():
    peers = ClusterPeers("a", STALE_MS)
    now = 100_000
    assert peers.first_time("b", "run1", 1, now, now) and peers.first_time("b", "run1", 2, now, now)
    assert not peers.first_time("b", "run1", 1, now, now)  # a replay of the topic
    assert not peers.first_time("b", "run1", 2, now, now)  # a send retried after it had gone through
    assert peers.first_time("b", "run2", 1, now, now)  # b restarted: its new run counts from 1
    assert peers.first_time("c", "run1", 1, now, now)  # another sidecar's numbers are its own
    assert peers.first_time("b", "", 0, now, now) and peers.first_time("b", "", 0, now, now)  # not numbered
    # once a run's last record is stale nothing of it is remembered: any record of it read again is stale too
    later = now + STALE_MS + 1
    assert not peers.accept("b", now, later)
    assert peers.first_time("b", "run1", 1, now, later + STALE_MS)  # (judge skips it first in practice)


def test_records_dated_more_than_30_s_ahead_are_not_taken_and_make_no_peer_fresh():
    from quota.managers.volume import CLOCK_SKEW_MS
    from quota.sharing.cluster_peers import FUTURE, OWN, STALE, TAKE

    peers = ClusterPeers("a", STALE_MS)
    now = 1_000_000
    assert peers.judge("b", now + CLOCK_SKEW_MS, now) == TAKE
    assert peers.judge("c", now + 3_600_000, now) == FUTURE  # a clock an hour fast
    assert peers.view(now).known == 1
    assert peers.judge("a", now, now) == OWN and peers.judge("b", now - STALE_MS - 1, now) == STALE
    # cut off from the topic: b goes stale in time and the sidecar falls back, whatever c dates its records
    view = peers.view(now + CLOCK_SKEW_MS + STALE_MS + 1)
    assert view.fallback and view.share_divisor == 2


def test_peers_silent_while_the_topic_goes_on_are_forgotten_but_not_while_cut_off_from_it():
    """2 live peers and 20 killed pods (each restart a new id, none sent a tombstone): once the topic has gone on
    for forget_ms without them, a sidecar cut off from it keeps to quota / 3, not quota / 23. Before that they
    still count (a peer silent while the topic goes on may be cut off from it and keeping to its own share)."""
    forget_ms = 6 * STALE_MS
    peers = ClusterPeers("a", STALE_MS, forget_ms=forget_ms)
    t = 1_000_000
    for pod in range(20):
        peers.judge(f"killed-{pod}", t + pod * 100, t + pod * 100)

    def live(until):
        for at in range(live.at, until, 1000):  # the live ones go on publishing, and so does a itself
            for source in ("a", "live-1", "live-2"):
                peers.judge(source, at, at)
        live.at = until

    live.at = t + 2000
    live(t + 2000 + STALE_MS)
    assert peers.view(live.at).known == 22  # stale, not yet forgotten
    live(t + 2000 + forget_ms + 1000)
    cut_at = live.at  # a reads nothing more from here on
    assert peers.view(cut_at).known == 2
    view = peers.view(cut_at + 10 * forget_ms)  # nobody heard from since: nobody forgotten, no peer fresh
    assert (view.known, view.fresh, view.fallback, view.share_divisor) == (2, 0, True, 3)


def test_records_dated_before_the_follower_started_are_history_not_recorded_but_make_peers_known():
    peers = ClusterPeers("a", STALE_MS, since_ms=50_000)
    assert not peers.accept("b", 49_999, 51_000)  # fresh, but from before this sidecar followed the topic
    assert peers.view(51_000).fresh == 1
    assert peers.accept("b", 50_000, 51_000)


def test_numbers_that_arrive_out_of_order_are_each_applied_once():
    """A usage topic given a second partition: a sender's key moves to it, and a follower may read its next record
    there before the last one of the first partition."""
    peers = ClusterPeers("a", STALE_MS)
    now = 100_000
    assert [peers.first_time("b", "run", seq, now, now) for seq in (1, 3, 2, 3, 2, 4)] == [
        True,
        True,
        True,
        False,
        False,
        True,
    ]


def test_made_up_peers_are_bounded_by_the_cluster_and_the_real_ones_stay_known():
    """Issue 44, T8: 500 peers written straight to the usage topic made a sidecar keep to quota / 502 once every
    peer was stale (and 0 x for 8 s after the real peer was back). In sidecar mode a cluster of N brokers has N
    sidecars: at most 2 N are known, the stalest dropped for a newer one."""
    peers = ClusterPeers("me", STALE_MS)
    peers.cluster_has(3)
    now = 1_000_000
    assert peers.judge("real", now, now) == "take"
    for i in range(500):
        peers.judge(f"made-up-{i}", now - 5_000, now)  # dated earlier than the real peer's newest record
    view = peers.view(now)
    assert view.known == 6 and peers.max_peers == 6
    assert peers.judge("real", now + 1000, now + 1000) == "take"
    assert "real" not in peers.stale_peers(now + 1000)  # still known, never pushed out by what was made up
    late = now + STALE_MS + 5_000  # every peer stale: the fallback share
    assert peers.view(late).fallback and peers.view(late).share_divisor <= 7
    assert peers.judge("ancient", now - 9_000, now) == "stale"  # older than every known peer: not known


def test_a_smaller_cluster_drops_the_stalest_peers_at_once():
    peers = ClusterPeers("me", STALE_MS)
    for i in range(10):
        peers.judge(f"p{i}", 1000 + i, 2000)
    peers.cluster_has(1)
    assert peers.view(2000).known == 4 and sorted(peers.stale_peers(10**9)) == ["p6", "p7", "p8", "p9"]


def test_records_dated_while_a_peers_usage_was_assumed_in_fallback_are_covered_not_taken():
    peers = ClusterPeers("a", STALE_MS)
    assert peers.accept("b", 1000, 1000)
    assert peers.view(1000 + STALE_MS + 1).fallback
    assert peers.cover(12_000) == 1  # b's usage up to 12 s assumed (fallback_delta)
    assert peers.judge("b", 11_500, 12_500) == "covered"  # its record of that time, read once the topic is back
    assert not peers.view(12_500).fallback  # still makes b fresh again
    assert peers.judge("b", 12_250, 12_500) == "take"  # usage after the time assumed is taken
    peers.forget("b")
    assert peers.judge("b", 11_500, 12_500) == "take"  # a peer forgotten has nothing assumed
