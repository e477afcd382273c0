"""The report's dimensions: what the planner ranks tenants by, the chart drawn for each, and what each figure is
under each quota.scope (:mod:`analytics.scope`). Plain values; no Spark work here."""

from __future__ import annotations

from analytics import stats
from analytics.scope import BROKER, CLUSTER, Scope

# name: (title, table, filter on api or None, metric to rank by, unit, columns shown)
DIMENSIONS = {
    "producer_byte_rate": (
        "Produce bytes per second",
        "entity",
        "Produce",
        "request_rate_p99",
        "bytes/s",
        ["request_rate_p50", "request_rate_p99", "request_burst_max", "held_share", "request_demand"],
    ),
    "consumer_byte_rate": (
        "Fetch response bytes per second",
        "entity",
        "Fetch",
        "response_rate_p99",
        "bytes/s",
        ["response_rate_p50", "response_rate_p99", "response_burst_max", "held_share", "response_demand"],
    ),
    "held_share": (
        "Share of wall time held by a throttle",
        "entity",
        stats.ALL_APIS,
        "held_share",
        "share of time, 0-1",
        ["held_share", "throttle_seconds", "shadow_throttle_seconds", "requests"],
    ),
    "partition_mutations": (
        "Partition mutations (peak per second)",
        "entity",
        stats.ALL_APIS,
        "mutation_rate_max",
        "mutations/s",
        ["mutation_rate_p99", "mutation_rate_max", "mutations_max_interval", "partition_mutations"],
    ),
    "new_producer_ids": (
        "New producer ids per second, per user",
        "user",
        None,
        "new_pid_rate_p99",
        "PIDs/s",
        ["new_pid_rate_p50", "new_pid_rate_p99", "new_pid_rate_max", "new_producer_ids"],
    ),
    "connection_rate": (
        "Connections opened per second, per IP",
        "ip",
        None,
        "connection_rate_p99",
        "connections/s",
        ["connection_rate_p50", "connection_rate_p99", "connection_rate_max", "connections"],
    ),
}
# For each dimension's chart: the per-interval frame and the rate column to draw.
SERIES: dict[str, tuple[str, str] | None] = {
    "producer_byte_rate": ("entity", "request_rate"),
    "consumer_byte_rate": ("entity", "response_rate"),
    "held_share": None,
    "partition_mutations": ("entity", "mutation_rate"),
    "new_producer_ids": ("user", "new_pid_rate"),
    "connection_rate": ("ip", "connection_rate"),
}
# What each dimension's figures are under each scope (analytics.scope): said in its title
PER_SCOPE = {
    "producer_byte_rate": "broker",
    "consumer_byte_rate": "broker",
    "new_producer_ids": "broker",
    "partition_mutations": "proxy",
    "connection_rate": "proxy",
}


def title(name: str, title: str, scope: Scope) -> str:
    unit = PER_SCOPE.get(name)
    if unit is None:
        return title
    if unit == "proxy" and (scope.scope == BROKER or name == "connection_rate"):
        return f"{title}, busiest proxy" if scope.proxies > 1 else title
    return f"{title}, cluster total" if scope.scope == CLUSTER else f"{title}, busiest broker"
