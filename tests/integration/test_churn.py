"""Connection churn (issue 44, T2), run as bench/churn.py runs it: Tansu behind a frame-counting relay, the proxy as
its own process with default settings and its open-files limit lowered to 1,024, so that the flood would exhaust its
descriptors within a second. Clients connect, send 1,000 pipelined 30-byte Produce v3 acks=0 frames and close, flat
out; a newcomer from another address keeps asking for ApiVersions. The bench judges the newcomer's wait against 2 s;
on a busy machine the test asserts what does not depend on the machine's speed: every newcomer is answered, at most
``connections.max.inflight.requests`` (5) frames of each gone client reach the broker, and the proxy never runs out
of descriptors (it used to forward all 1,000, and stop accepting for minutes once it ran out)."""

import pytest

from bench.churn import GIVE_UP_S, MAX_PER_GONE, churn

pytestmark = pytest.mark.integration

NEWCOMER_MAX_WAIT_S = 2.0
FLOOD_S = 3  # seconds; bench/churn.py runs longer floods (the backlog of a proxy that falls behind grows with them)


@pytest.mark.long_running(seconds=9)
def test_gone_clients_cost_the_broker_a_few_frames_and_the_proxy_keeps_its_descriptors():
    result = churn(seconds=3, after=1, attackers=1, sources=20, nofile=1024, rst=False)
    assert result.made > 200, "the flood did not run"
    assert result.per_connection <= MAX_PER_GONE, f"{result.reached} frames of {result.made} gone clients"
    assert result.fd_errors == 0
    assert all(wait < GIVE_UP_S for _, wait in result.waits), result.waits
    assert result.most_fds < 1024


@pytest.mark.long_running(seconds=12)
@pytest.mark.parametrize("sources,rst", [(1, False), (4096, True)], ids=["one-address-fin", "4096-addresses-rst"])
def test_a_newcomer_is_served_within_2_s_during_and_after_open_close_churn(sources, rst):
    """Issue 44: "churn from one address and from many: a new connection from elsewhere is served within 2 s during
    and after the flood, with default settings". A hostile tenant's open/close loops, flat out from two processes of
    its own (connect, close at once, from 127.0.0.1 or from 4,096 loopback addresses in turn, the second reset),
    against the proxy as its own process with the shipped defaults and the open-files limit it inherits; a newcomer
    from 127.0.0.250 connects every 0.5 s and asks for ApiVersions. Each must be answered within 2 s: the requirement
    itself, so the bound is the test's. (Before a connection gone unheard was skipped at its turn, each cost a broker
    connection: in 6 s floods, bench/churn.py, the newcomer waited up to 2.8-6.4 s.)"""
    result = churn(
        seconds=FLOOD_S, after=1.5, attackers=2, sources=sources, nofile=None, rst=rst, frames=0, relay=False
    )
    print(
        f"\nchurn from {sources} address(es): {result.made:,} connections in {FLOOD_S} s; newcomer's worst wait "
        f"{result.worst(True):.2f} s during, {result.worst(False):.2f} s after; most descriptors {result.most_fds}",
        flush=True,
    )
    assert result.made > 300, "the flood did not run"
    assert result.fd_errors == 0
    assert len(result.waits) >= 4
    slow = [(round(at, 2), round(wait, 2)) for at, wait in result.waits if wait > NEWCOMER_MAX_WAIT_S]
    assert not slow, f"newcomers answered after more than 2 s (seconds into the flood, wait): {slow}"
