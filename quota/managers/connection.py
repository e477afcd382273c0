"""Connection quotas: creation rate proxy-wide, per listener and per IP (KIP-612), and counts (KIP-402).

Facts carried over from KIP-612 and apache/kafka ``SocketServer.scala`` (``ConnectionQuotas``):

* Three sampled rates (:class:`~quota.primitives.rate.Rate`, the byte-rate quotas' ``quota.window.*``): proxy-wide (Kafka's
  "broker-wide", ``max.connection.creation.rate``), per listener (``listener.name.<name>.max.connection.creation.rate``)
  and per IP (the ``connection_creation_rate`` of client-quota entity ``{ip: ...}`` or ``{ip: <default>}``).
* The acceptor records each new connection in the proxy-wide and its listener's rate, then, when either is over its
  limit, waits ``(rate - limit) / limit * window`` before handing the connection on and accepting the next, at most
  one quota window (``quota.window.size.seconds``). Connections of the internal (inter-broker) listener are not
  counted in the proxy-wide rate, nor held by the proxy-wide ``max.connections``, when the proxy has other
  listeners (Kafka's ``protectedListener``).
* Per IP, after the accept: the connection is recorded in its IP's rate; over the limit it is un-recorded from the
  IP, listener and proxy-wide rates (it was not accepted) and held for ``min(delay, 1 s)``. KIP-612's text then
  checks again: if the IP is still over its quota the connection is closed, else it proceeds (and is recorded).
  (Apache Kafka's ``SocketServer`` holds it for its throttle time and then always closes it; the proxy follows the
  KIP's text: a connection whose IP is back under its rate is served rather than made to reconnect.)
* Beyond Kafka, the per-IP rates are bounded (``quota.max.tracked.entities``, issues 35 and 44): a new address is
  served at its rate however full the table, and rotating addresses gains nothing per address
  (:mod:`quota.managers.ip_rates`).
* Counts (KIP-402): ``max.connections`` proxy-wide, ``listener.name.<name>.max.connections``,
  ``max.connections.per.ip`` and ``max.connections.per.ip.overrides``. Here a new connection over any of them is
  closed at once (Kafka blocks its acceptor for the proxy-wide and listener counts; a proxy that closes is
  retried by clients with their reconnect back-off, and never fills its own backlog).

Pure: no sockets, no clock of its own; the proxy passes ``now_ms`` and acts on what is returned.
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from quota.managers.connection_limits import NO_LIMITS as NO_LIMITS  # the limits it is given, for its callers
from quota.managers.connection_limits import ConnectionLimits as ConnectionLimits
from quota.managers.ip_rates import IpRates
from quota.primitives.peer_connections import IP as OPEN_IP
from quota.primitives.peer_connections import LISTENER, TOTAL, OpenCount, PeerConnections
from quota.primitives.rate import QuotaWindow, Rate
from quota.primitives.throttle import bounded_throttle_time_ms
from quota.primitives.usage_tap import NO_TAP, NoTap

CONNECTION_CREATION_RATE = "connection_creation_rate"
IP = "ip"
IP_HOLD_MAX_MS = 1000  # KIP-612: a throttled IP's connection is held for min(delay, 1 s)

# Why a connection is closed before it is served (the proxy's ``connections_closed`` reasons).
IP_RATE = "connection_rate_ip"
MAX_CONNECTIONS = "max_connections"
LISTENER_MAX_CONNECTIONS = "listener_max_connections"
MAX_CONNECTIONS_PER_IP = "max_connections_per_ip"


def normalize_ip(text: str) -> str:
    """The canonical text of an IP address (IPv4-mapped IPv6 as IPv4, as the socket reports dual-stack peers);
    raises ValueError for anything else."""
    address = ipaddress.ip_address(text.strip())
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return str(address)


@dataclass(frozen=True, slots=True)
class Admit:
    """Serve the connection."""


@dataclass(frozen=True, slots=True)
class Hold:
    """The connection's IP is over its rate: hold it ``delay_ms`` (no broker connection), then :meth:`retry`."""

    delay_ms: int


@dataclass(frozen=True, slots=True)
class Close:
    """Close the connection now, for ``reason`` (one of this module's reason constants)."""

    reason: str
    detail: str


ADMIT = Admit()


@dataclass(slots=True)
class ThrottleStats:
    """Throttle times applied, as Kafka's ``connection-accept-throttle-time`` averages them (over throttles > 0)."""

    count: int = 0
    total_ms: int = 0

    def add(self, ms: int) -> None:
        self.count += 1
        self.total_ms += ms


class ConnectionQuotas:
    """Connection creation rates and counts of one proxy, across its listeners."""

    tap: NoTap = (
        NO_TAP  # where accepted connections are also told when usage is shared with peers (quota.sharing.usage_share)
    )

    def __init__(
        self, listeners: list[str] | tuple[str, ...], window: QuotaWindow, limits: ConnectionLimits = NO_LIMITS
    ) -> None:
        self.window = window
        self.limits = limits
        self._listeners = tuple(listeners)
        self._proxy_rate = Rate(window)
        self._listener_rates = {name: Rate(window) for name in self._listeners}
        self.ip_rates = IpRates(window)  # per IP, bounded (quota.max.tracked.entities)
        self.total = 0
        self.per_listener = {name: 0 for name in self._listeners}
        self.per_ip: dict[str, int] = {}
        self.accept_throttles = {name: ThrottleStats() for name in self._listeners}
        self.ip_throttles = {name: ThrottleStats() for name in self._listeners}
        self.peers = PeerConnections()  # workers: what the others have open (empty for a single process)

    def configure(self, limits: ConnectionLimits) -> None:
        """New limits take effect at the next connection; rates and counts are kept."""
        self.limits = limits

    def _protected(self, listener: str) -> bool:
        return listener == self.limits.internal_listener and len(self._listeners) > 1

    # -- the accept loop -------------------------------------------------------------------------------------

    def accept_delay_ms(self, listener: str, now_ms: int) -> int:
        """Records a connection just accepted on ``listener`` in the proxy-wide and listener rates, and returns
        how long the listener must wait before handing it on and accepting the next (0: at once), at most one
        quota window."""
        limits = self.limits
        delay = 0
        if not self._protected(listener):
            delay = self._record(self._proxy_rate, limits.max_connection_creation_rate, now_ms, self.window.size_ms)
        delay = max(
            delay,
            self._record(
                self._listener_rates[listener],
                limits.listener_creation_rates.get(listener, math.inf),
                now_ms,
                self.window.size_ms,
            ),
        )
        if delay > 0:
            self.accept_throttles[listener].add(delay)
        self.tap.listener(listener, 1)
        return delay

    def _record(self, rate: Rate, limit: float, now_ms: int, max_ms: int) -> int:
        rate.record(1.0, now_ms)
        if limit == math.inf:
            return 0
        measured = rate.measure(now_ms)
        if measured <= limit:
            return 0
        return max(0, bounded_throttle_time_ms(measured, limit, rate.window_size_ms(now_ms), max_ms))

    def _unrecord_accept(self, listener: str, now_ms: int) -> None:
        if not self._protected(listener):
            self._proxy_rate.record(-1.0, now_ms)
        self._listener_rates[listener].record(-1.0, now_ms)
        self.tap.listener(listener, -1)

    # -- per IP, after the accept ----------------------------------------------------------------------------

    def admit(self, listener: str, ip: str, now_ms: int) -> Admit | Hold | Close:
        """A connection from ``ip`` accepted on ``listener`` (after :meth:`accept_delay_ms`): admitted and
        counted, held for its IP's rate, or closed for a count limit."""
        limit = self.limits.ip_rate(ip)
        if limit != math.inf:
            rate = self.ip_rates.rate(ip, self.limits, now_ms)
            throttle = self._record(rate, limit, now_ms, self.window.size_ms)
            if throttle > 0:
                rate.record(-1.0, now_ms)  # not accepted: not counted
                self._unrecord_accept(listener, now_ms)
                self.ip_throttles[listener].add(throttle)
                return Hold(min(throttle, IP_HOLD_MAX_MS))
            self.tap.ip(ip, 1)
        return self._count(listener, ip)

    def retry(self, listener: str, ip: str, now_ms: int) -> Admit | Close:
        """A held connection's second check (KIP-612): still over its IP's rate, it is closed; else admitted (and
        now counted in every rate)."""
        limit = self.limits.ip_rate(ip)
        if limit != math.inf:
            rate = self.ip_rates.rate(ip, self.limits, now_ms)
            if self._record(rate, limit, now_ms, self.window.size_ms) > 0:
                rate.record(-1.0, now_ms)
                return Close(IP_RATE, f"{ip} is over its connection_creation_rate of {limit:g}/s")
            self.tap.ip(ip, 1)
        if not self._protected(listener):
            self._proxy_rate.record(1.0, now_ms)
        self._listener_rates[listener].record(1.0, now_ms)
        self.tap.listener(listener, 1)
        return self._count(listener, ip)

    def record_remote(self, listeners: Iterable[tuple[str, int]], ips: Iterable[tuple[str, int]], now_ms: int) -> None:
        """Connections a peer accepted, ``(listener, n)``, and counted per IP, ``(ip, n)``
        (:mod:`quota.sharing.remote_usage`): recorded in the same rates, deciding nothing; the open counts stay this
        process's own."""
        for listener, n in listeners:
            rate = self._listener_rates.get(listener)
            if rate is not None:
                rate.record(float(n), now_ms)
                if not self._protected(listener):
                    self._proxy_rate.record(float(n), now_ms)
        for ip, n in ips:
            if self.limits.ip_rate(ip) != math.inf:
                self.ip_rates.rate(ip, self.limits, now_ms).record(float(n), now_ms)

    def seed_rows(self, now_ms: int, max_ips: int) -> dict[str, Any]:
        """What a restarted peer needs to start where this one is: the samples of the proxy-wide and listener
        creation rates, and of the ``max_ips`` busiest IP rates (:meth:`quota.primitives.rate.Rate.samples`)."""
        return {
            "proxy": self._proxy_rate.samples(now_ms),
            "listeners": {name: rate.samples(now_ms) for name, rate in self._listener_rates.items()},
            "ips": self.ip_rates.busiest_samples(now_ms, max_ips),
        }

    def seed(self, rows: dict[str, Any], now_ms: int) -> None:
        """A peer's :meth:`seed_rows`: each rate starts from the peer's samples (deciding nothing, as
        :meth:`record_remote`; a listener or IP without a limit here is skipped)."""
        self._proxy_rate.seed(rows.get("proxy", ()), now_ms)
        for name, samples in rows.get("listeners", {}).items():
            if name in self._listener_rates:
                self._listener_rates[name].seed(samples, now_ms)
        for ip, samples in rows.get("ips", ()):
            if self.limits.ip_rate(ip) != math.inf:
                self.ip_rates.rate(ip, self.limits, now_ms).seed(samples, now_ms)

    def _count(self, listener: str, ip: str) -> Admit | Close:
        limits = self.limits
        peers = self.peers
        ip_max = limits.ip_max_connections(ip)
        if ip_max is not None and self.per_ip.get(ip, 0) + peers.ip(ip) >= ip_max:
            return Close(MAX_CONNECTIONS_PER_IP, f"{ip} has {ip_max} connections (max.connections.per.ip)")
        listener_max = limits.listener_max_connections.get(listener)
        if listener_max is not None and self.per_listener[listener] + peers.listener(listener) >= listener_max:
            return Close(
                LISTENER_MAX_CONNECTIONS,
                f"listener {listener} has {listener_max} connections (listener.name.{listener}.max.connections)",
            )
        if (
            limits.max_connections is not None
            and self.total + peers.total() >= limits.max_connections
            and not self._protected(listener)
        ):
            return Close(MAX_CONNECTIONS, f"the proxy has {limits.max_connections} connections (max.connections)")
        self.total += 1
        self.per_listener[listener] += 1
        self.per_ip[ip] = self.per_ip.get(ip, 0) + 1
        self.tap.open(self._open_counts(listener, ip))
        return ADMIT

    def count_limits(self, listener: str, ip: str) -> tuple[int | None, int | None, int | None] | None:
        """The open-count limits a connection from ``ip`` on ``listener`` is held to (per IP, listener,
        proxy-wide; None: not limited), or None when no count limit applies at all."""
        limits = self.limits
        total = None if self._protected(listener) else limits.max_connections
        found = (limits.ip_max_connections(ip), limits.listener_max_connections.get(listener), total)
        return None if found == (None, None, None) else found

    def refused_elsewhere(self, listener: str, ip: str, kind: str) -> Close:
        """A connection this process admitted that the proxy-wide count (every worker's) refuses: un-counted here,
        and the Close saying which limit (``kind``: quota.primitives.peer_connections' IP, LISTENER or TOTAL)."""
        self.closed(listener, ip)
        limits = self.limits
        if kind == OPEN_IP:
            return Close(
                MAX_CONNECTIONS_PER_IP, f"{ip} has {limits.ip_max_connections(ip)} connections (max.connections.per.ip)"
            )
        if kind == LISTENER:
            return Close(
                LISTENER_MAX_CONNECTIONS,
                f"listener {listener} has "
                f"{limits.listener_max_connections.get(listener)} connections "
                f"(listener.name.{listener}.max.connections)",
            )
        return Close(MAX_CONNECTIONS, f"the proxy has {limits.max_connections} connections (max.connections)")

    def _open_counts(self, listener: str, ip: str) -> tuple[OpenCount, ...]:
        return (
            (TOTAL, "", self.total),
            (LISTENER, listener, self.per_listener[listener]),
            (OPEN_IP, ip, self.per_ip.get(ip, 0)),
        )

    def open_snapshot(self) -> list[tuple[str, str, int]]:
        """Every open count of this process (what a peer that just started needs to hear)."""
        return (
            [(TOTAL, "", self.total)]
            + [(LISTENER, name, n) for name, n in self.per_listener.items()]
            + [(OPEN_IP, ip, n) for ip, n in self.per_ip.items()]
        )

    def closed(self, listener: str, ip: str) -> None:
        """An admitted connection closed; raises if it was never admitted (a count would go below zero)."""
        count = self.per_ip.get(ip, 0)
        if count <= 0 or self.per_listener[listener] <= 0 or self.total <= 0:
            raise ValueError(f"connection from {ip} on {listener} closed but not counted as open")
        if count == 1:
            del self.per_ip[ip]
        else:
            self.per_ip[ip] = count - 1
        self.per_listener[listener] -= 1
        self.total -= 1
        self.tap.open(self._open_counts(listener, ip))

    # -- reading (for metrics: changes nothing, so a scrape may read from another thread) ---------------------

    def proxy_accept_rate(self, now_ms: int) -> float:
        return self._proxy_rate.peek(now_ms)

    def listener_accept_rate(self, listener: str, now_ms: int) -> float:
        return self._listener_rates[listener].peek(now_ms)

    def ip_accept_rate(self, ip: str, now_ms: int) -> float:
        rate = self.ip_rates.get(ip)
        return 0.0 if rate is None else rate.peek(now_ms)

    def counted_rates(self, listener: str, ip: str) -> tuple[Rate | None, Rate | None, str, Rate | None]:
        """For reading (``quota.explain``), never made: the proxy-wide rate a connection from ``ip`` on ``listener``
        is counted in (None on the protected internal listener), its listener's (None: not a listener here), and its
        IP's key and rate (None: none yet, or evicted)."""
        proxy = None if self._protected(listener) else self._proxy_rate
        return proxy, self._listener_rates.get(listener), ip, self.ip_rates.get(ip)

    @property
    def ip_table_full(self) -> bool:
        """A new IP's rate would evict another's (quota.max.tracked.entities)."""
        return self.ip_rates.full

    @property
    def max_tracked_entities(self) -> int:
        """IP rates kept before a new IP's evicts another's (``quota.max.tracked.entities``; may change live)."""
        return self.ip_rates.max_tracked_entities

    @max_tracked_entities.setter
    def max_tracked_entities(self, n: int) -> None:
        self.ip_rates.max_tracked_entities = n

    @property
    def overflowed(self) -> int:
        """IP rates evicted to make room for new ones (local connections and peers')."""
        return self.ip_rates.overflowed

    def expire_idle(self, now_ms: int) -> None:
        """Drop the rates of IPs with nothing recorded for an hour (Kafka expires IP sensors the same way)."""
        self.ip_rates.expire_idle(now_ms)

    @property
    def tracked_ips(self) -> int:
        return len(self.ip_rates)
