"""Open-connection counts (KIP-402) across workers: what the other workers have open counts against
max.connections, the listener's and the IP's, as they last said; a worker that is gone is forgotten. Pure."""

from __future__ import annotations

from types import MappingProxyType

from quota.managers.connection import MAX_CONNECTIONS, MAX_CONNECTIONS_PER_IP, Admit, ConnectionLimits, ConnectionQuotas
from quota.primitives.peer_connections import IP, LISTENER, TOTAL, PeerConnections
from quota.primitives.rate import QuotaWindow
from quota.sharing.open_ledger import OpenLedger
from quota.sharing.remote_usage import record_remote
from quota.sharing.usage_encoding import decode, encode
from quota.sharing.usage_share import UsageTap


def quotas(**limits):
    return ConnectionQuotas(["L"], QuotaWindow(), ConnectionLimits(**limits))


def share(sender: ConnectionQuotas, receiver: ConnectionQuotas, source: str) -> None:
    delta = decode(encode(sender.tap.take(source)))
    record_remote(delta, 0, produce=None, fetch=None, mutations=None, producer_ids=None, connections=receiver)


def test_the_peers_open_connections_count_against_every_limit_and_a_gone_peer_is_forgotten():
    a = quotas(max_connections=3, max_connections_per_ip=2)
    b = quotas(max_connections=3, max_connections_per_ip=2)
    a.tap = UsageTap()
    assert isinstance(a.admit("L", "10.0.0.1", 0), Admit)
    assert isinstance(a.admit("L", "10.0.0.2", 0), Admit)
    share(a, b, "0")
    assert isinstance(b.admit("L", "10.0.0.1", 0), Admit)  # 2 of 3 in all, 1 of 2 for this IP before it
    assert b.admit("L", "10.0.0.3", 0).reason == MAX_CONNECTIONS  # 3 in all now
    a.closed("L", "10.0.0.2")
    share(a, b, "0")  # only what changed is sent: the total, the listener and that IP, now
    assert b.admit("L", "10.0.0.1", 0).reason == MAX_CONNECTIONS_PER_IP  # 1 on a + 1 on b
    b.peers.forget("0")  # worker 0 died: its connections went with it
    assert isinstance(b.admit("L", "10.0.0.1", 0), Admit)


def test_a_peer_restates_everything_it_has_open_on_request():
    a = quotas()
    a.admit("L", "10.0.0.1", 0)
    a.admit("L", "10.0.0.1", 0)
    tap = UsageTap()
    tap.open(a.open_snapshot())
    assert sorted(tap.take("0").open_connections) == [("ip", "10.0.0.1", 2), ("listener", "L", 2), ("total", "", 2)]


def test_counts_are_absolute_so_repeating_one_changes_nothing():
    peers = PeerConnections()
    peers.update("0", [("total", "", 4), ("ip", "a", 2)])
    peers.update("0", [("total", "", 4)])
    peers.update("1", [("total", "", 1), ("ip", "a", 1)])
    assert (peers.total(), peers.ip("a"), peers.listener("L")) == (5, 3, 0)
    peers.update("0", [("ip", "a", 0)])
    assert peers.ip("a") == 1
    peers.forget("1")
    peers.forget("never")
    assert (peers.total(), peers.ip("a")) == (4, 0)


def test_a_single_process_has_no_peers():
    q = quotas(max_connections_per_ip=1, max_connections_per_ip_overrides=MappingProxyType({}))
    assert isinstance(q.admit("L", "10.0.0.1", 0), Admit)
    assert q.admit("L", "10.0.0.1", 0).reason == MAX_CONNECTIONS_PER_IP


def test_the_parents_ledger_holds_a_count_limit_across_workers_exactly():
    """Claims from two workers racing for one IP's last slots: the ledger is the one count, so exactly the limit
    is admitted whichever worker asks; a release frees a slot for any worker, a forgotten worker frees all its own."""
    ledger = OpenLedger()
    outcomes = [ledger.claim(str(n % 2), "L", "10.0.0.1", 3, None, None) for n in range(6)]
    assert outcomes == [None, None, None, IP, IP, IP]
    assert ledger.claim("0", "L", "10.0.0.2", 3, None, None) is None  # another IP is not limited by the first
    ledger.release("1", "L", "10.0.0.1")
    assert ledger.claim("0", "L", "10.0.0.1", 3, None, None) is None
    assert ledger.claim("1", "L", "10.0.0.1", 3, None, None) == IP
    ledger.release("1", "L", "never-claimed")  # ignored, never below zero
    assert (ledger.open(IP, "10.0.0.1"), ledger.open(LISTENER, "L"), ledger.open(TOTAL)) == (3, 4, 4)
    ledger.forget("0")
    assert (ledger.open(IP, "10.0.0.1"), ledger.open(TOTAL)) == (0, 0)  # worker 1's one was released above


def test_the_ledger_checks_the_listener_and_proxy_wide_limits_too():
    ledger = OpenLedger()
    assert ledger.claim("0", "L", "a", None, 2, None) is None
    assert ledger.claim("1", "L", "b", None, 2, None) is None
    assert ledger.claim("0", "L", "c", None, 2, None) == LISTENER
    assert ledger.claim("0", "M", "c", None, None, 2) == TOTAL
    assert ledger.claim("0", "M", "c", None, None, None) is None  # an internal listener: exempt, yet counted
    assert ledger.open(TOTAL) == 3


def test_a_refusal_elsewhere_uncounts_the_connection_here_and_names_the_limit():
    q = quotas(max_connections_per_ip=2, max_connections_per_ip_overrides=MappingProxyType({}))
    assert q.count_limits("L", "10.0.0.1") == (2, None, None)
    assert isinstance(q.admit("L", "10.0.0.1", 0), Admit)
    close = q.refused_elsewhere("L", "10.0.0.1", IP)
    assert close.reason == MAX_CONNECTIONS_PER_IP and "max.connections.per.ip" in close.detail
    assert (q.total, q.per_ip) == (0, {})
    assert quotas().count_limits("L", "10.0.0.1") is None  # no count limit: nothing to claim
