"""The table for a fleet: a default per quota kind and entity type, offenders held, named entries only for the
tenants that need more. Pure Python, no Spark.

An operator does not set one quota per tenant: Kafka's ``<default>`` entities (``/users/<default>``,
``/users/<default>/clients/<default>``, ``/clients/<default>``, and KIP-612's ``ip: <default>``) hold every tenant
without an entry of its own, and a named entry is for a tenant that needs more and has shown it. :func:`plan` makes
the table from the per-tenant recommendations (:func:`analytics.recommend.build_quotas`):

1. the outliers of each fleet are found (:mod:`analytics.outliers`): an offender is held to its fleet's figure, a
   tenant flagged ``--legitimate`` keeps its own;
2. per quota key and entity type (``{user, client-id}``, ``{user}``, ``{client-id}``, ``{ip}``), over the tenants
   recommended the key, outliers left out::

       default = percentile(their recommendations, q)      q = 90 by default (--fleet-default Q); IPs at p99

   (the lower of the two recommendations around the percentile's rank: one tenant's own figure). A tenant keeps a
   named entry for that key only when its recommendation is above the default, or when it is an outlier (an offender
   stays pinned at its limit, whatever the default becomes). IP addresses come and go (pods, NAT pools), so their
   default is at p99 at least: the table is the default and the few addresses that stand out. A type with fewer than
   :data:`~analytics.outliers.MIN_FLEET` tenants recommended a key is no fleet: they keep their own entries and no
   default is written.

The proxy resolves the table as Kafka does (the most specific entity first), so a named ``{user: u, client-id: c}``
entry wins over ``{user: <default>, client-id: <default>}``, and a tenant without one gets the default.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from analytics import groups, named_rates, outliers
from analytics.outliers import LIMIT_PERCENTILE, MIN_FLEET, Outlier, percentile
from analytics.recommend import (
    MIN_RATE,
    Rules,
    bases,
    build_quotas,
    entity_id,
    figure_text,
    round_up,
    sorted_items,
)
from quota.primitives.entity import DEFAULT
from quota.primitives.quota_groups import QUOTA_GROUP

DEFAULT_PERCENTILE = 90.0
IP_PERCENTILE = 99.0  # the ip default's least percentile: the table names only the few addresses that stand out


@dataclass(frozen=True)
class Table:
    """The recommended table: its items, what each key rests on, the outliers found and lines for every output."""

    items: list[dict]
    basis: dict[tuple, dict[str, str]]
    outliers: list[Outlier] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    under_default: list[dict] = field(default_factory=list)  # :func:`under_default`


def under_default(
    own: Sequence[Mapping], basis: Mapping[tuple, Mapping[str, str]], table: Sequence[Mapping]
) -> list[dict]:
    """The keys of the per-tenant items ``own`` (with what each rests on, ``basis``) that the ``table`` leaves to a
    ``<default>`` entry: ``{entity, key, own, default, rests_on}`` each, so that a tenant without an entry, a held one
    among them, is still said."""
    named = {(entity_id(it["entity"]), k) for it in table for k in it if k != "entity"}
    values = {(entity_id(it["entity"]), k): v for it in table for k, v in it.items() if k != "entity"}
    return [
        {"entity": it["entity"], "key": k, "own": v, "default": values[(default, k)]}
        | {"rests_on": basis.get(entity_id(it["entity"]), {}).get(k, "")}
        for it in own
        if (default := entity_id(_default_of(it["entity"]))) != entity_id(it["entity"])
        for k, v in it.items()
        if k != "entity" and (entity_id(it["entity"]), k) not in named and (default, k) in values
    ]


def plan(
    entity_rows: Sequence[Mapping],
    user_rows: Sequence[Mapping],
    ip_rows: Sequence[Mapping],
    rules: Rules = Rules(),
    q: float | None = DEFAULT_PERCENTILE,
    legitimate: Sequence[Mapping[str, str]] = (),
    named_rows: Sequence[Mapping] = (),
    group_rows: Sequence[Mapping] = (),
    tenants: Sequence[tuple[str | None, str | None, str | None]] = (),
) -> Table:
    """The table from the job's statistics rows (``named_rows``: :mod:`analytics.named_stats`'s, for topics' byte
    rates and request rates; ``group_rows``: :mod:`analytics.group_stats`', with ``tenants``, each tenant's quota
    group): offenders held, and with ``q`` the fleet defaults (None: one entry per tenant); the quota groups'
    entries after them, their members planned in them (:mod:`analytics.groups`)."""
    named = list(named_rates.recommendations(named_rows, rules))
    grouped, group_basis = groups.entries(groups.recommendations(group_rows, rules, tenants), tenants)
    items = sorted_items(named_rates.merged(build_quotas(entity_rows, user_rows, ip_rows, rules), named))
    items = groups.taken_out(items, grouped, tenants)
    found = {**outliers.fleets(entity_rows, user_rows, ip_rows), **named_rates.fleets(named_rows)}
    found = {**groups.out_of_fleets(found, grouped, tenants), **groups.fleets(group_rows, tenants)}
    judged = outliers.judge([*items, *grouped], found, rules, legitimate)
    own_basis = named_rates.merged_basis(bases(entity_rows, user_rows, ip_rows, rules), named)
    of_group = [o for o in judged if QUOTA_GROUP in o.entity]  # a group keeps its entry: no <default> takes it
    grouped, group_basis = outliers.hold(grouped, group_basis, of_group)
    own, own_basis = outliers.hold(items, own_basis, [o for o in judged if o not in of_group])
    lumped = named_rates.lumped_partitions(named_rows)
    items, basis = (own, own_basis) if q is None else with_defaults(own, own_basis, q, judged, lumped)
    items, basis, group_notes = groups.with_groups(items, {**basis, **group_basis}, grouped)
    offenders = sum(not o.legitimate for o in judged)
    notes = [
        (
            f"fleet defaults: a <default> entry per entity type and key at p{q:g} of its tenants' recommendations "
            f"(IPs at p{max(q, IP_PERCENTILE):g}), outliers left out; a named entry only for a tenant above it or an "
            "outlier (--no-fleet-default: one entry per tenant)"
            if q is not None
            else "one entry per tenant (--no-fleet-default)"
        ),
        f"offenders: a figure more than {rules.offender_mads:g} MADs above its fleet's median on the log scale (fleets of "
        f"{MIN_FLEET} or more), held to the fleet's p{LIMIT_PERCENTILE:g}: {offenders} in this table"
        + (f", {len(judged) - offenders} kept by --legitimate" if len(judged) > offenders else ""),
        *outliers.unmatched(legitimate, found, judged),
        *named_rates.notes(named_rows, rules),
        *group_notes,
    ]
    return Table(items, basis, judged, notes, under_default(own, own_basis, items))


def with_defaults(
    items: Sequence[Mapping],
    basis: Mapping[tuple, Mapping[str, str]],
    q: float = DEFAULT_PERCENTILE,
    judged: Iterable[Outlier] = (),
    lumped: Collection[tuple[str, str]] = (),
) -> tuple[list[dict], dict[tuple, dict[str, str]]]:
    """``(items, basis)`` with a ``<default>`` entry per entity type and key where the type is a fleet
    (:data:`MIN_FLEET` tenants or more, outliers left out), and each tenant's key kept only when above its default
    or an outlier's (``judged``); an item left with no key is dropped. The defaults come first. A topic's named
    partitions are a fleet of their own (its default ``{topic: T, partition: <default>}``) unless the log has the
    topic's other partitions of that key together under ``<default>`` (``lumped``: ``(topic, key)``): then the named
    ones are its hot ones, picked for being unlike the others, and no default comes from them."""
    pinned = {(entity_id(o.entity), o.key) for o in judged}
    fleets: dict[tuple[tuple, str], list] = {}
    for item in items:
        kinds = _fleet_of(item["entity"])
        for key, value in item.items():
            if key != "entity" and (entity_id(item["entity"]), key) not in pinned:
                fleets.setdefault((kinds, key), []).append(value)
    defaults: dict[tuple, dict] = {}
    said: dict[tuple, dict[str, str]] = {}
    limits: dict[tuple[tuple, str], float] = {}
    for (kinds, key), values in fleets.items():
        if len(values) < MIN_FLEET or (kinds[0] == named_rates.NO_FLEET and (kinds[1], key) in lumped):
            continue
        at_q = max(q, IP_PERCENTILE) if kinds == ("ip",) else q
        at = percentile(values, at_q)
        limit = max(1, int(round_up(at))) if isinstance(values[0], int) else max(MIN_RATE, round_up(at))
        limits[(kinds, key)] = limit
        entity = {kind: DEFAULT for kind in kinds} if kinds[0] != named_rates.NO_FLEET else _partitions_of(kinds[1])
        defaults.setdefault(entity_id(entity), {"entity": entity})[key] = limit
        whose = f"{' and '.join(kinds)} entities'" if kinds[0] != named_rates.NO_FLEET else f"partitions of {kinds[1]}'"
        said.setdefault(entity_id(entity), {})[key] = (
            f"fleet default: p{at_q:g} of the {len(values)} {whose} recommendations "
            f"(outliers left out); {sum(v > limit for v in values)} above it keep a named entry"
        )
    named = []
    for item in items:
        eid, kinds = entity_id(item["entity"]), _fleet_of(item["entity"])
        own = basis.get(eid, {})
        kept = {
            k: v for k, v in item.items() if k != "entity" and ((eid, k) in pinned or v > limits.get((kinds, k), -1))
        }
        if not kept:
            continue
        named.append({"entity": dict(item["entity"]), **kept})
        said[eid] = {
            k: own[k]
            + (
                f"; above the fleet default {figure_text(limits[(kinds, k)])}"
                if (kinds, k) in limits and (eid, k) not in pinned
                else ""
            )
            for k in kept
            if k in own
        }
    return [*defaults.values(), *named], said


def _fleet_of(entity: Mapping) -> tuple:
    """The fleet an entity's figures are in: its entity type, and for a partition also its topic (a topic's
    partitions are a fleet of their own: their default is the topic's ``partition: <default>`` entry)."""
    kinds = tuple(entity)
    return (named_rates.NO_FLEET, entity["topic"]) if kinds == named_rates.NO_FLEET else kinds


def _partitions_of(topic: str) -> dict:
    return {"topic": topic, "partition": DEFAULT}


def _default_of(entity: Mapping) -> dict:
    """The ``<default>`` entry a fleet default gives ``entity``'s type (a partition's: its topic's)."""
    if tuple(entity) == named_rates.NO_FLEET:
        return _partitions_of(entity["topic"])
    return {kind: DEFAULT for kind in entity}
