"""The per-IP connection creation rates of KIP-612 (the ``connection_creation_rate`` of ``{ip: ...}`` entities),
bounded by ``quota.max.tracked.entities`` (issues 35 and 44). Pure: ``now_ms`` is passed in.

Past that many IPs with a rate, room for a new one is made by evicting one not recorded since it was made (a
flood's one-off addresses: an IPv6 prefix holds 2^64), its connections carried in a debt sketch
(:mod:`quota.primitives.debt_sketch`); the new one starts at its limit, without a fresh allowance. So a new address
is served at its rate however full the table, and rotating addresses gains nothing per address. An IP's rate with
nothing recorded for an hour is dropped, as Kafka expires its IP sensors.
"""

from __future__ import annotations

import math

from quota.managers.connection_limits import ConnectionLimits
from quota.primitives.debt_sketch import DebtSketch
from quota.primitives.overflow import DEFAULT_MAX_TRACKED_ENTITIES
from quota.primitives.rate import QuotaWindow, Rate, at_limit

EVICTION_SCAN = 1024  # IP rates an eviction looks at for one not recorded since it was made (a second chance)
IDLE_IP_SENSOR_MS = 3_600_000  # as Kafka's InactiveSensorExpirationTimeSeconds: an IP's rate is dropped after 1 h idle


class IpRates:
    """The creation rate of each IP with a limit, in the order they were made or last given a second chance."""

    __slots__ = ("window", "max_tracked_entities", "overflowed", "_rates", "_last_ms", "_moved", "_debts")

    def __init__(self, window: QuotaWindow) -> None:
        self.window = window
        self.max_tracked_entities = DEFAULT_MAX_TRACKED_ENTITIES  # IP rates kept before new IPs evict others
        self.overflowed = 0  # IP rates evicted to make room for new ones (local connections and peers')
        self._rates: dict[str, Rate] = {}
        self._last_ms: dict[str, int] = {}  # when each IP's rate was last recorded in
        self._moved: dict[str, int] = {}  # when each was made or last given a second chance (_evict)
        self._debts = DebtSketch(window.span_ms)  # evicted IPs' connections in the window (issue 44)

    def rate(self, ip: str, limits: ConnectionLimits, now_ms: int) -> Rate:
        """The rate ``ip``'s connections are counted in (made if none). Past ``max_tracked_entities`` IPs, room is
        made for a new one by evicting one (:meth:`_evict`), and the new one starts without a fresh allowance: its
        rate as if it had connected at its limit for the whole window, less one connection, so it is served at its
        rate from its first connection on and rotating addresses gains nothing per address."""
        rate = self._rates.get(ip)
        if rate is None:
            full = self.full and ip not in limits.ip_rates
            if full:
                self._evict(limits, now_ms)
            rate = self._rates[ip] = Rate(self.window)
            self._moved[ip] = now_ms
            limit, window = limits.ip_rate(ip), self.window
            owed = limit * self._debts.remaining_ms(ip, now_ms) / 1000.0 if limit != math.inf else 0.0
            if full and limit != math.inf and owed < limit * window.min_elapsed_ms / 1000.0:
                rate.seed(at_limit(limit, window, now_ms, less=1.0), now_ms)
            elif owed > 0:
                rate.record(owed, now_ms)
        self._last_ms[ip] = now_ms
        return rate

    def _evict(self, limits: ConnectionLimits, now_ms: int) -> None:
        """Room for one more IP: from the front, the first not recorded since it was made or last moved goes (a
        flood's one-off addresses first), its connections in the window carried in the debt sketch; those
        recorded since go to the back (a second chance); past EVICTION_SCAN of them, the front one goes."""
        rates, last, moved = self._rates, self._last_ms, self._moved
        for _ in range(min(EVICTION_SCAN, len(rates))):
            ip = next(iter(rates))
            if last[ip] <= moved[ip]:
                break
            rates[ip] = rates.pop(ip)
            moved[ip] = now_ms
        else:
            ip = next(iter(rates))
        self.overflowed += 1
        limit = limits.ip_rate(ip)
        used = rates.pop(ip).total(now_ms)
        if 0 < limit < math.inf:  # paid off at its limit
            self._debts.add(ip, now_ms + used / limit * 1000.0, now_ms)
        del last[ip], moved[ip]

    def get(self, ip: str) -> Rate | None:
        """``ip``'s rate, never made (None: none yet, or evicted): for reading."""
        return self._rates.get(ip)

    def busiest_samples(self, now_ms: int, max_ips: int) -> list[tuple[str, list[tuple[int, int, float]]]]:
        """The samples (:meth:`quota.primitives.rate.Rate.samples`) of the ``max_ips`` IPs that connected most."""
        ips = [(ip, rate.samples(now_ms)) for ip, rate in list(self._rates.items())]
        ips = [row for row in ips if row[1]]
        if len(ips) > max_ips:
            ips = sorted(ips, key=lambda row: sum(v for _, _, v in row[1]), reverse=True)[:max_ips]
        return ips

    @property
    def full(self) -> bool:
        """A new IP's rate would evict another's (quota.max.tracked.entities)."""
        return len(self._rates) >= self.max_tracked_entities

    def expire_idle(self, now_ms: int) -> None:
        """Drop the rates of IPs with nothing recorded for an hour (Kafka expires IP sensors the same way)."""
        for ip in [ip for ip, last in self._last_ms.items() if now_ms - last >= IDLE_IP_SENSOR_MS]:
            del self._rates[ip], self._last_ms[ip], self._moved[ip]

    def __len__(self) -> int:
        return len(self._rates)
