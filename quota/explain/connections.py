"""The connection quotas' findings of an explanation: creation rates per IP, per listener and proxy-wide (KIP-612),
and the open-connection counts (KIP-402). Pure.

A creation rate is judged as :class:`~quota.managers.connection.ConnectionQuotas` judges a new connection: recorded
first, then measured, so the finding says what a connection opened now would meet (a hold of at most 1 s and a close
for its IP; a wait of the accept loop, which every client of the listener shares, for the others).
"""

from __future__ import annotations

import math

from quota.explain.values import FULL, THROTTLED, UNLIMITED, WITHIN, Finding, FindingOf, Who
from quota.managers.connection import IP_HOLD_MAX_MS, ConnectionQuotas
from quota.primitives.entity import DEFAULT
from quota.primitives.rate import Rate
from quota.primitives.throttle import bounded_throttle_time_ms

RATE = "connection_creation_rate"
COUNT = "max_connections"


def _with_one_more(rate: Rate | None, limit: float, now_ms: int, max_ms: int, window_ms: int) -> tuple[float, int]:
    """The rate now, and the throttle one more connection now would be given (0 within the limit)."""
    if rate is None:
        measured, elapsed = 0.0, window_ms
    else:
        measured, elapsed = rate.peek_with_window(now_ms)
    after = measured + 1000.0 / elapsed
    if math.isinf(limit) or after <= limit:
        return measured, 0
    return measured, max(0, bounded_throttle_time_ms(after, limit, elapsed, max_ms))


def _rate_finding(
    scope: str,
    entity: str | None,
    limit: float,
    rate: Rate | None,
    quotas: ConnectionQuotas,
    now_ms: int,
    notes: tuple[str, ...] = (),
) -> Finding:
    base = FindingOf(quota=RATE, scope=scope, unit="connections/s")
    if math.isinf(limit):
        return Finding(verdict=UNLIMITED, entity=entity, **base)
    window = quotas.window
    measured, throttle = _with_one_more(rate, limit, now_ms, window.size_ms, window.min_elapsed_ms)
    return Finding(
        verdict=THROTTLED if throttle > 0 else WITHIN,
        limit=limit,
        measured=measured,
        throttle_ms=throttle,
        notes=notes,
        entity=entity,
        **base,
    )


def _count_finding(scope: str, entity: str, limit: int | None, open_now: int) -> Finding:
    base = FindingOf(quota=COUNT, scope=scope, unit="connections")
    if limit is None:
        return Finding(verdict=UNLIMITED, entity=entity, **base)
    full = open_now >= limit
    return Finding(
        verdict=FULL if full else WITHIN,
        limit=float(limit),
        measured=float(open_now),
        notes=("a new connection is closed at once",) if full else (),
        entity=entity,
        **base,
    )


def connection_findings(quotas: ConnectionQuotas, listeners: tuple[str, ...], who: Who, now_ms: int) -> list[Finding]:
    """Per IP first (what names this client), then each listener asked about (every one when none was), then
    proxy-wide. Open counts are every worker's (``ConnectionQuotas.peers``)."""
    limits = quotas.limits
    ip = who.ip
    named = listeners if who.listener is None else tuple(name for name in listeners if name == who.listener)
    rates = {name: quotas.counted_rates(name, ip) for name in named}
    ip_key, ip_rate = rates[named[0]][2:] if named else (ip, None)
    entity = f"/ips/{ip}" if ip in limits.ip_rates else (f"/ips/{DEFAULT}" if DEFAULT in limits.ip_rates else None)
    ip_notes: tuple[str, ...] = (
        f"over its rate a new connection is held up to {IP_HOLD_MAX_MS} ms, then closed if still over (KIP-612)",
    )
    if ip_rate is None and quotas.ip_table_full and ip not in limits.ip_rates:
        ip_notes += (
            "the IP table is full (quota.max.tracked.entities): its next connection evicts an unused IP's "
            "rate and starts at its limit, without a fresh allowance",
        )
    findings = [_rate_finding("ip", entity, limits.ip_rate(ip), ip_rate, quotas, now_ms, ip_notes)]
    peers = quotas.peers
    ip_max = limits.ip_max_connections(ip)
    setting = (
        "max.connections.per.ip.overrides"
        if ip in limits.max_connections_per_ip_overrides
        else "max.connections.per.ip"
    )
    findings.append(_count_finding("ip", setting, ip_max, quotas.per_ip.get(ip, 0) + peers.ip(ip)))
    accept_note = ("the accept loop waits this long before it takes the next connection, whoever opens it",)
    for name in named:
        proxy_rate, listener_rate = rates[name][:2]
        findings.append(
            _rate_finding(
                f"listener {name}",
                f"listener.name.{name}.max.connection.creation.rate",
                limits.listener_creation_rates.get(name, math.inf),
                listener_rate,
                quotas,
                now_ms,
                accept_note,
            )
        )
        findings.append(
            _count_finding(
                f"listener {name}",
                f"listener.name.{name}.max.connections",
                limits.listener_max_connections.get(name),
                quotas.per_listener.get(name, 0) + peers.listener(name),
            )
        )
    proxy_rates = [rates[name][0] for name in named if rates[name][0] is not None]
    if proxy_rates or not named:  # else asked about the internal listener alone: not held by proxy-wide limits
        proxy_rate = proxy_rates[0] if proxy_rates else quotas.counted_rates("", ip)[0]
        findings.append(
            _rate_finding(
                "proxy-wide",
                "max.connection.creation.rate",
                limits.max_connection_creation_rate,
                proxy_rate,
                quotas,
                now_ms,
                accept_note,
            )
        )
        findings.append(
            _count_finding("proxy-wide", "max.connections", limits.max_connections, quotas.total + peers.total())
        )
    return findings
