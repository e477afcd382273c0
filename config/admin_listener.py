"""What ``check-config`` and the proxy's start-up warn about an admin listener (``listeners[].admin``).

An admin listener trusts the network, not a principal: every connection it accepts may alter quotas and the proxy's
settings and write the proxy's topics, as ``admin_principals`` may. That is safe only where no tenant can connect:
loopback (the broker's container and the operator's ``exec`` share the proxy's network namespace), or a network the
operator alone reaches. Any other bind is said loudly, every time the configuration is checked or the proxy starts.
Pure: a configuration in, lines out.
"""

from __future__ import annotations

import ipaddress

from config.model import ListenerConfig, ProxyConfig


def admin_listener_warnings(config: ProxyConfig) -> list[str]:
    return [
        f"listeners[{i}] ({lc.name}) is the admin listener and binds {lc.bind}, not a loopback address: every "
        "client that can reach it is an admin whatever its principal (it may alter quotas and the proxy's "
        "settings, and write the proxy's topics); bind it to 127.0.0.1, or make sure only operators can reach "
        "that address (documentation: Security, the admin listener)"
        for i, lc in enumerate(config.listeners)
        if lc.admin and not loopback(lc)
    ]


def loopback(listener: ListenerConfig) -> bool:
    """The listener binds a loopback address only (``localhost`` included)."""
    host = listener.bind.host
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name that may resolve anywhere
