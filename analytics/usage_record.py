"""One usage record as the proxy writes it: every key present, counts not given 0. Pure Python.

The synthetic log (:mod:`analytics.generate`) and the tests build their records with :func:`record`."""

from __future__ import annotations

COUNTS = (  # what an entity did in the interval (the planner's statistics read these: analytics.stats)
    "requests",
    "request_bytes",
    "response_bytes",
    "throttle_ms",
    "shadow_throttle_ms",
    "partition_mutations",
    "new_producer_ids",
    "connections_opened",
)
FIELDS = (
    "time",
    "interval_s",
    "listener",
    "ip",
    "user",
    "client_id",
    "api",
    *COUNTS,
    "held_ms",
    "throttles",
    "quota_rate",
    "observed_rate_sum",
    "proxy",
    "broker",
    "scope",
    "topic_bytes",  # record bytes charged to topic quotas, by topic label ({topic: NAME} or <default>); null: none
    "group_requests",  # requests counted against group request rates, by group label; null: none
    "quota_group",  # the quota group the user or client id is a member of; null: none
    "partition_bytes",  # record bytes charged to partition quotas, by label (orders/3, orders/<default>); null: none
    "held_by",  # requests held, by the quota that held them ({"request_rate": 3}); null: none
)
COUNT_FIELDS = FIELDS[7:17]
HELD_FIELDS = FIELDS[15:19]


def record(
    time: float,
    interval_s: float,
    listener: str,
    ip: str | None,
    user: str | None,
    client_id: str | None,
    api: str | None,
    *,
    proxy: str | None = "proxy-1",
    broker: int | None = None,
    scope: str | None = "broker",
    quota_rate: float | None = None,
    observed_rate_sum: float = 0.0,
    topic_bytes: dict[str, int] | None = None,
    group_requests: dict[str, int] | None = None,
    quota_group: str | None = None,
    partition_bytes: dict[str, int] | None = None,
    held_by: dict[str, int] | None = None,
    **counts: int,
) -> dict:
    """One usage record with every key present; counts not given are 0 (``held_ms``: the ``throttle_ms`` given, one
    connection's); ``proxy``, ``broker`` and ``scope`` say where it came from, as the proxy writes them;
    ``topic_bytes`` and ``group_requests`` by label, as a proxy with topic quotas or group request rates writes them;
    ``quota_group`` the quota group the entity is a member of; ``held_by`` its requests held, by quota (None: the
    planner reads ``throttles`` as them, as in a log written before the proxy wrote ``held_by``)."""
    rec = {
        "time": time,
        "interval_s": interval_s,
        "listener": listener,
        "ip": ip,
        "user": user,
        "client_id": client_id,
        "api": api,
    }
    counts.setdefault("held_ms", counts.get("throttle_ms", 0))
    for name in COUNT_FIELDS:
        rec[name] = int(counts.pop(name, 0))
    rec["quota_rate"], rec["observed_rate_sum"] = quota_rate, observed_rate_sum
    if counts:
        raise TypeError(f"unknown usage fields: {sorted(counts)}")
    rec["proxy"], rec["broker"], rec["scope"] = proxy, broker, scope
    rec["topic_bytes"], rec["group_requests"] = topic_bytes, group_requests
    rec["quota_group"] = quota_group
    rec["partition_bytes"] = partition_bytes
    rec["held_by"] = held_by
    return rec


def connection_record(time: float, interval_s: float, listener: str, ip: str, opened: int, **source) -> dict:
    return record(time, interval_s, listener, ip, None, None, None, connections_opened=opened, **source)
