"""Which ``quota.scope`` the planner's figures are for, and what every output says about it. Pure Python, no Spark.

The proxy writes the scope in force on every usage record (``scope``), with the proxy's id (``proxy``) and, in
cluster mode, the broker port's node id (``broker``). Logs written before it did have none of them: such records
are taken as ``broker`` (Kafka's semantics, the proxy's default), from one proxy and no broker.

- ``broker``: ``producer_byte_rate``, ``consumer_byte_rate`` and ``producer_ids_rate`` apply on each broker, so a
  figure is per broker: in each interval the busiest ``(proxy, broker)``'s rate (a sidecar, or a cluster-mode proxy's
  broker port; the bootstrap port is a budget of its own), then the percentiles over the intervals.
  ``controller_mutation_rate``: the busiest proxy's (one KIP-599 bucket per proxy).
- ``cluster``: one budget for the whole cluster, so a figure is the tenant's total, summed over every proxy and
  broker in each interval (the proxies sharing a usage topic, sidecars or cluster-mode replicas: give the planner
  all their logs).

``connection_creation_rate`` is per proxy under both (connection limits are never shared): the busiest proxy's.

The scope is ``--scope`` when given, else the one the log records. A log that records both is refused
(:class:`ScopeError`) unless ``--scope`` says which to read it as.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

BROKER, CLUSTER = "broker", "cluster"
SCOPES = (BROKER, CLUSTER)


class ScopeError(ValueError):
    """The log cannot be read under one scope as it is (mixed scopes, an unknown scope) and none was asked for."""


@dataclass(frozen=True)
class Scope:
    """The scope the figures are for and what the log said about it."""

    scope: str
    recorded: Mapping[str | None, int]  # scope recorded -> records (None: records that do not say)
    proxies: int  # distinct proxy ids (records without one count as one proxy)
    budgets: int  # distinct (proxy, broker) pairs: the per-broker budgets the log shows
    asked: bool = False  # --scope given

    def figures(self) -> str:
        """One line: what a recommended rate is, under this scope."""
        if self.scope == CLUSTER:
            return (
                f"quota.scope cluster: each rate is the tenant's total over the whole cluster, summed per "
                f"interval over {_n(self.proxies, 'proxy', 'proxies')} in this log "
                f"(connection_creation_rate: per proxy, the busiest)"
            )
        return (
            f"quota.scope broker: each rate is per broker, the busiest broker's in each interval "
            f"({_n(self.budgets, 'broker budget', 'broker budgets')} in this log); Kafka applies "
            f"producer_byte_rate, consumer_byte_rate and producer_ids_rate on each broker, so a tenant on N "
            f"brokers may use up to N x these in total (controller_mutation_rate and connection_creation_rate: "
            f"per proxy, the busiest)"
        )

    def notes(self) -> list[str]:
        """What else the reader should know: a scope taken by default, or one that differs from the log's."""
        out = []
        unknown = self.recorded.get(None, 0)
        if unknown:
            out.append(
                f"{unknown:,} records do not say their scope (written before the proxy recorded it): "
                f"read as broker, one proxy, no broker id"
            )
        logged = {s for s in self.recorded if s is not None}
        if self.asked and logged - {self.scope}:
            out.append(
                f"the log was written under quota.scope {' and '.join(sorted(logged))}: these figures are "
                f"for running under {self.scope}, as --scope asked"
            )
        if self.scope == CLUSTER and self.proxies == 1:
            out.append(
                "one proxy's log: where proxies share a usage topic (quota.scope cluster), give the planner "
                "every one's log (the budget is their sum)"
            )
        return out

    def summary(self) -> dict:
        """The rows the report's summary and the job's result add."""
        return {"quota scope": self.scope, "proxies": self.proxies, "broker budgets": self.budgets}


def choose(sources: Iterable[Mapping], asked: str | None = None) -> Scope:
    """The scope for a log whose sources are ``[{scope, proxy, broker, records}, ...]`` (stats.sources), or
    ``asked`` (``--scope``). Raises :class:`ScopeError` for a log that records both scopes when none is asked."""
    if asked is not None and asked not in SCOPES:
        raise ScopeError(f"--scope must be broker or cluster, got {asked!r}")
    recorded: dict = {}
    proxies: dict = {}
    budgets = set()
    for row in sources:
        scope = row["scope"]
        if scope is not None and scope not in SCOPES:
            raise ScopeError(f"the log records an unknown quota.scope {scope!r} (known: broker, cluster)")
        recorded[scope] = recorded.get(scope, 0) + row["records"]
        proxies.setdefault(scope or BROKER, set()).add(row["proxy"])
        budgets.add((row["proxy"], row["broker"]))
    as_read = {s or BROKER for s in recorded}
    if asked is None and len(as_read) > 1:
        raise ScopeError(
            "the log mixes quota.scope broker ("
            + _who(recorded, proxies, BROKER)
            + ") and cluster ("
            + _who(recorded, proxies, CLUSTER)
            + "): a figure cannot be per broker and per cluster at once; analyse "
            "each scope's logs separately (--input per directory), or pass --scope broker|cluster to read them all "
            "as one"
        )
    scope = asked or (as_read.pop() if as_read else BROKER)
    return Scope(
        scope, recorded, len({p for ps in proxies.values() for p in ps}) or 1, len(budgets) or 1, asked is not None
    )


def _who(recorded: Mapping, proxies: Mapping, scope: str) -> str:
    records = sum(n for s, n in recorded.items() if (s or BROKER) == scope)
    names = sorted("(no id)" if p is None else p for p in proxies.get(scope, ()))
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    extra = f", {recorded[None]:,} of them without a scope" if scope == BROKER and recorded.get(None) else ""
    return f"{records:,} records from {shown}{extra}"


def _n(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"
