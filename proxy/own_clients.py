"""Which client connections are the proxy's own: recognised by the kernel's socket table, never by what a client sends.

The proxy's own Kafka clients (the dynamic-config follower and writer, the volume-usage publisher and follower, the
admin client that creates their topics) reach the broker through the proxy's own listener in sidecar mode (the
broker advertises the proxy). A connection accepted from ``peer`` on ``local`` is the proxy's own when this very
process holds the other end: a TCP socket whose local address is ``peer`` and whose remote address is ``local``.
The kernel keeps that 4-tuple unique, so a client elsewhere (another process on the host included) cannot claim it;
a client id, a header or a record can be forged, a socket of this process cannot.

Every connection the proxy's aiokafka clients open is noted when it is made (:func:`track_aiokafka`: aiokafka's
connection protocol records its socket's two addresses, and forgets them when the connection is lost), so the check
is one set lookup. The proxy's own requests that do not use aiokafka (readiness probes, discovery, DescribeLogDirs)
never write an internal topic. Clients of other processes, on this host or not, are never the proxy's own: in a
cluster of sidecars each proxy's clients reach the other brokers through the other sidecars, which must know them
by their principal (``admin_principals``; see the README's security section).
"""

from __future__ import annotations

import ipaddress

Address = tuple[str, int]


def _canonical(address) -> Address | None:
    """(ip, port) with an IPv4-mapped IPv6 address as IPv4 (an IPv6 socket accepting an IPv4 client)."""
    if not address or len(address) < 2:
        return None
    ip = str(address[0]).split("%", 1)[0]
    try:
        parsed = ipaddress.ip_address(ip)
    except ValueError:
        return None
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is not None:
        parsed = parsed.ipv4_mapped
    return str(parsed), int(address[1])


# (local, remote) of every connection this process's aiokafka clients hold: what the other end accepted as (peer, local)
NOTED: set[tuple[Address, Address]] = set()


def track_aiokafka() -> bool:
    """Note the addresses of every connection aiokafka makes in this process (idempotent). False when this aiokafka
    does not have the connection protocol this relies on; the socket table is then the only way."""
    try:
        import aiokafka.conn as conn
    except ImportError:
        return False
    base = getattr(conn, "AIOKafkaProtocol", None)
    if base is None:
        return False
    if getattr(base, "noted_by_the_proxy", False):
        return True

    class NotedProtocol(base):
        noted_by_the_proxy = True
        _noted: tuple | None = None

        def connection_made(self, transport) -> None:
            pair = (_canonical(transport.get_extra_info("sockname")), _canonical(transport.get_extra_info("peername")))
            if None not in pair:
                self._noted = pair
                NOTED.add(pair)
            super().connection_made(transport)

        def connection_lost(self, exc) -> None:
            if self._noted is not None:
                NOTED.discard(self._noted)
            super().connection_lost(exc)

    conn.AIOKafkaProtocol = NotedProtocol
    return True


class OwnConnections:
    """``is_own(peer, local)``: whether this process's own Kafka clients hold the other end of an accepted
    connection."""

    def is_own(self, peer, local) -> bool:
        return (_canonical(peer), _canonical(local)) in NOTED
