"""A connection's mute state by name, as Kafka's ``ChannelMuteState`` names a channel's (and the proxy's metrics
and log lines name it). Values in, a name out."""

from __future__ import annotations

from proxy.ops.connection_state import NOT_MUTED  # the name the scrape gives every listener, 0 when idle


def mute_state(
    *,
    muted: bool,
    response_pending: bool,
    held: bool,
    deciding: bool,
    inflight_bound: bool,
    client_full: bool,
    broker_full: bool,
    draining: bool,
) -> str:
    """``NOT_MUTED``, or ``MUTED_AND_`` the reasons that hold, joined by ``_AND_``: ``THROTTLED`` (a quota mute),
    ``RESPONSE_PENDING`` (a throttled request's response is not out), ``HELD`` (a request held until a time),
    ``DECIDING`` (waiting for the proxy's own lookup or work), ``INFLIGHT_BOUND``, ``CLIENT_FULL`` (the client takes
    no responses), ``BROKER_FULL``, ``DRAINING``."""
    reasons = [
        name
        for name, on in (
            ("THROTTLED", muted),
            ("RESPONSE_PENDING", response_pending),
            ("HELD", held),
            ("DECIDING", deciding),
            ("INFLIGHT_BOUND", inflight_bound),
            ("CLIENT_FULL", client_full),
            ("BROKER_FULL", broker_full),
            ("DRAINING", draining),
        )
        if on
    ]
    return "MUTED_AND_" + "_AND_".join(reasons) if reasons else NOT_MUTED
