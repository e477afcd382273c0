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


# A wait against real time, so a measurement (tests/conftest.py): the proxy, Tansu and the attackers' processes, all
# started by the test, run at the measurements' priority, and the rest of the suite's CPU waits. Beside five other
# workers and a helper's benchmarks (load 12-30) the attackers took the proxy's cores and the accept queue filled:
# the newcomer's SYN then waits for the kernel's retransmissions (1 s, 3 s). bench/churn.py --starve measures that.
# Beside the two other rate groups and four busy loops (load 17-26) it still failed 1 run in 3 (2.33 s), and 3 of 9
# tries alone at that load (2.13-3.06 s, each sent in the flood's first 0.5 s): a slow newcomer's line gives the
# proxy's CPU seconds in its wait and its event loop's seconds waiting for a core (2.24 s: 0.28 s of CPU, 1.72 s
# waiting), so a failure says whether the machine or the proxy took the time.
@pytest.mark.measures_rate
@pytest.mark.long_running(seconds=12)
@pytest.mark.parametrize(
    "sources,request_kind",
    [(1, "api_versions"), (4096, "metadata")],
    ids=["one-address-api-versions", "4096-addresses-metadata"],
)
def test_a_newcomer_is_served_within_2_s_during_and_after_churn_of_one_request_a_connection(sources, request_kind):
    """Issue 44: "churn from one address and from many: a new connection from elsewhere is served within 2 s during
    and after the flood, with default settings". A hostile tenant's loops, flat out from two processes of its own:
    connect (from 127.0.0.1, or from 4,096 loopback addresses in turn), send one request (ApiVersions, or Metadata
    for every topic) and close; a newcomer from 127.0.0.250 connects every 0.5 s and asks for ApiVersions, against
    the proxy as its own process with the shipped defaults and the open-files limit it inherits. Each newcomer must
    be answered within 2 s: the requirement itself, so the bound is the test's. A request sent makes each churned
    connection one to serve (a broker connection, its request forwarded, as Kafka serves it); connections that send
    nothing, or reset, are gone by their turn and cost less (tests/proxy/connection/test_gone_unheard.py). Before
    admitted connections were set up in turn by network and address, with a bound on what one network keeps in
    flight at the broker, the newcomer waited behind the flood in the kernel's accept queue and at the broker: up to
    2.7-3.2 s (bench/churn.py --frames 1)."""
    result = churn(
        seconds=FLOOD_S,
        after=1.5,
        attackers=2,
        sources=sources,
        nofile=None,
        rst=False,
        frames=1,
        relay=False,
        request=request_kind,
    )
    print(
        f"\nchurn from {sources} address(es), one {request_kind} request each: {result.made:,} connections in "
        f"{FLOOD_S} s; newcomer's worst wait {result.worst(True):.2f} s during, {result.worst(False):.2f} s after; "
        f"most descriptors {result.most_fds}, most in the accept queue {result.most_queued}",
        flush=True,
    )
    assert result.made > 300, "the flood did not run"
    assert result.fd_errors == 0
    assert len(result.waits) >= 4
    slow = [
        (round(at, 2), round(wait, 2), round(cpu, 2), round(waited, 2))
        for (at, wait), (cpu, waited) in zip(result.waits, result.proxy_in_waits)
        if wait > NEWCOMER_MAX_WAIT_S
    ]
    assert not slow, (
        "newcomers answered after more than 2 s (seconds into the flood, wait, the proxy's CPU seconds in it, its "
        f"event loop's seconds waiting for a core in it): {slow}; most in the accept queue {result.most_queued}"
    )
