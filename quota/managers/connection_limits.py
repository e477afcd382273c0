"""Every connection limit of the proxy as configured (KIP-612's creation rates, KIP-402's counts): one frozen value,
swapped whole by a dynamic update (:meth:`quota.managers.connection.ConnectionQuotas.configure`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from quota.primitives.entity import DEFAULT


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """Every connection limit, as configured; ``math.inf`` / ``None`` is "no limit"."""

    max_connection_creation_rate: float = math.inf
    listener_creation_rates: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    max_connections: int | None = None
    listener_max_connections: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    max_connections_per_ip: int | None = None
    max_connections_per_ip_overrides: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    ip_rates: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))  # ip or <default> -> rate
    internal_listener: str | None = None

    def ip_rate(self, ip: str) -> float:
        rate = self.ip_rates.get(ip)
        return rate if rate is not None else self.ip_rates.get(DEFAULT, math.inf)

    def ip_max_connections(self, ip: str) -> int | None:
        found = self.max_connections_per_ip_overrides.get(ip)
        return found if found is not None else self.max_connections_per_ip


NO_LIMITS = ConnectionLimits()
