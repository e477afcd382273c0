"""Which client connections are the proxy's own: recognised by the kernel's socket table, never by what a client sends.

The proxy's own Kafka clients (the dynamic-config follower and writer, the volume-usage publisher and follower, the
admin client that creates their topics) go where ``upstream.own_clients`` says when it is set: a broker listener no
proxy is in front of, advertising the brokers themselves, so no sidecar ever sees them (nothing here is needed then).
Without it they bootstrap on ``upstream.bootstrap_servers``, whose broker advertises the proxies, and reach the
broker behind this sidecar straight (:class:`SidecarRoute`), and the other brokers through the other sidecars.

A connection accepted from ``peer`` on ``local`` is the proxy's own when this very process holds the other end: a
TCP socket whose local address is ``peer`` and whose remote address is ``local``. The kernel keeps that 4-tuple
unique, so a client elsewhere (another process on the host included) cannot claim it; a client id, a header or a
record can be forged, a socket of this process cannot. Every connection the proxy's aiokafka clients open is noted
when it is made (:func:`track_aiokafka`: aiokafka's connection protocol records its socket's two addresses, and
forgets them when the connection is lost), so the check is one set lookup. The proxy's own requests that do not use
aiokafka (:func:`proxy.cluster.kafka_clients.ask`: readiness probes, discovery, the followers' Metadata looks,
DescribeLogDirs) never write an internal topic. Clients of other processes, on this host or not, are never the
proxy's own: without ``upstream.own_clients``, in a cluster of sidecars each proxy's clients reach the other brokers
through the other sidecars, which must know them by their principal (``admin_principals``; see the security
documentation), and on PLAINTEXT they have none (:mod:`config.own_clients` warns of it).
"""

from __future__ import annotations

import asyncio
import contextvars
import ipaddress
import socket
from collections.abc import Awaitable, Callable
from typing import Any

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

# Where the proxy's own aiokafka clients connect instead of the address a broker advertised (sidecar mode: straight
# to the broker behind, not through the proxy's own listener). Set around the start of the proxy's own clients, so
# only their tasks (which copy the context they were created in) see it; a client of the same process that is not
# the proxy's (a test's) connects where its metadata says.
ROUTE: contextvars.ContextVar[Callable[[str, int], Awaitable[Address | None]] | None] = contextvars.ContextVar(
    "kafka_quota_proxy_own_client_route", default=None
)
_routed_create_conn: Callable[..., Awaitable[Any]] | None = None  # aiokafka's create_conn, once redirected


def track_aiokafka() -> bool:
    """Note the addresses of every connection aiokafka makes in this process (idempotent). False when this aiokafka
    does not have the connection protocol this relies on; the socket table is then the only way."""
    try:
        import aiokafka.conn as conn
    except ImportError:
        return False
    base: Any = getattr(conn, "AIOKafkaProtocol", None)  # aiokafka's protocol class, when this version has it
    if base is None:
        return False
    if getattr(base, "noted_by_the_proxy", False):
        return True

    class NotedProtocol(base):
        noted_by_the_proxy = True
        _noted: tuple | None = None

        def connection_made(self, transport) -> None:
            local = _canonical(transport.get_extra_info("sockname"))
            peer = _canonical(transport.get_extra_info("peername"))
            if local is not None and peer is not None:
                self._noted = (local, peer)
                NOTED.add(self._noted)
            super().connection_made(transport)

        def connection_lost(self, exc) -> None:
            if self._noted is not None:
                NOTED.discard(self._noted)
            super().connection_lost(exc)

    conn.AIOKafkaProtocol = NotedProtocol
    _route_aiokafka()
    return True


def _route_aiokafka() -> None:
    """aiokafka's client connects through ``create_conn``; the proxy's own clients (``ROUTE`` set) are redirected."""
    try:
        import aiokafka.client as client
    except ImportError:
        return
    global _routed_create_conn
    original = getattr(client, "create_conn", None)
    if original is None or original is _routed_create_conn:
        return

    async def create_conn(host, port, *args, **kwargs):
        route = ROUTE.get()
        if route is not None:
            target = await route(host, port)
            if target is not None:
                host, port = target
        return await original(host, port, *args, **kwargs)

    _routed_create_conn = client.create_conn = create_conn


class SidecarRoute:
    """Sidecar mode: a connection to one of this proxy's own (non-cluster-mode) listeners is forwarded to the
    upstream bootstrap address, so the proxy's own clients go there directly: through its own listener they would
    need that listener's TLS and credentials (a TLS-only listener refused them as plaintext clients) and the upstream
    TLS settings they do have would not fit it. A listener is recognised by its port and a host that resolves to an
    address of this machine (the advertised name of the broker, the pod's IP, loopback)."""

    def __init__(self, listener_ports: set[int], upstream: Address) -> None:
        self.ports = listener_ports
        self.upstream = upstream
        self._known: dict[tuple[str, int], bool] = {}

    async def __call__(self, host: str, port: int) -> Address | None:
        if port not in self.ports:
            return None
        key = (host, port)
        if key not in self._known:
            try:
                infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
            except OSError:
                return None  # aiokafka reports the failure as it would have
            self._known[key] = any(_is_local(str(info[4][0])) for info in infos)
        return self.upstream if self._known[key] else None


def sidecar_route(config, listener_ports: set[int]) -> SidecarRoute | None:
    """The route of a sidecar's own clients: to ``upstream.bootstrap_servers[0]`` past this proxy's own
    ``listener_ports``; None (no route needed) without such ports, or with ``upstream.own_clients``, whose listener
    advertises the brokers themselves."""
    if not listener_ports or config.upstream.own_clients is not None:
        return None
    first = config.upstream.bootstrap_servers[0]
    return SidecarRoute(listener_ports, (first.host, first.port))


def _is_local(ip: str) -> bool:
    """Whether ``ip`` is an address of this machine (bindable here)."""
    try:
        parsed = ipaddress.ip_address(ip.split("%", 1)[0])
    except ValueError:
        return False
    if parsed.is_loopback or parsed.is_unspecified:
        return True
    family = socket.AF_INET6 if parsed.version == 6 else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.bind((ip, 0))
        return True
    except OSError:
        return False


class OwnConnections:
    """``is_own(peer, local)``: whether this process's own Kafka clients hold the other end of an accepted
    connection."""

    def is_own(self, peer, local) -> bool:
        return (_canonical(peer), _canonical(local)) in NOTED
