"""A fleet default per quota kind and entity type, named entries only for the tenants above it. Pure Python, no Spark.

An operator does not set one quota per tenant: Kafka's ``<default>`` entities (``/users/<default>``,
``/users/<default>/clients/<default>``, ``/clients/<default>``, and KIP-612's ``ip: <default>``) hold every tenant
without an entry of its own, and a named entry is for a tenant that needs more and has shown it. From the per-tenant
recommendations (:func:`analytics.recommend.build_quotas`), per quota key and entity type (``{user, client-id}``,
``{user}``, ``{client-id}``, ``{ip}``)::

    default = percentile(the tenants' recommendations, q)      q = 90 by default (--fleet-default [Q])

(the lower of the two recommendations around the percentile's rank: one tenant's own figure, so an outlier does not
pull the default up), and a tenant keeps a named entry for that key only when
its own recommendation is above the default. An entity type with fewer than :data:`MIN_FLEET` tenants recommended
a key is no fleet: they keep their own entries and no default is written. Each default says what it rests on: how
many tenants, the percentile, how many are named above it. The proxy resolves the table as Kafka does (the most
specific entity first), so a named ``{user: u, client-id: c}`` entry wins over ``{user: <default>, client-id:
<default>}``, and a tenant without one gets the default.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from analytics.recommend import MIN_RATE, entity_id, round_up
from quota.primitives.entity import DEFAULT

MIN_FLEET = 5  # fewer tenants of an entity type with a key: no default, each keeps its own entry
DEFAULT_PERCENTILE = 90.0


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100), the lower of the two values around rank ``q / 100 x (n - 1)`` (numpy's
    ``method="lower"``): always one tenant's own figure, never a point between the fleet and an outlier (with 10
    tenants, p90 by interpolation is pulled a tenth of the way to the largest)."""
    ordered = sorted(values)
    return ordered[int(q / 100 * (len(ordered) - 1))]


def with_defaults(
    items: Sequence[Mapping], basis: Mapping[tuple, Mapping[str, str]], q: float = DEFAULT_PERCENTILE
) -> tuple[list[dict], dict[tuple, dict[str, str]]]:
    """``(items, basis)`` with a ``<default>`` entry per entity type and key where the type is a fleet
    (:data:`MIN_FLEET` tenants or more), and each tenant's key kept only when above its default; an item left with
    no key is dropped. The defaults come first."""
    fleets: dict[tuple[tuple, str], list] = {}
    for item in items:
        for key, value in item.items():
            if key != "entity":
                fleets.setdefault((tuple(item["entity"]), key), []).append(value)
    defaults: dict[tuple, dict] = {}
    said: dict[tuple, dict[str, str]] = {}
    limits: dict[tuple[tuple, str], float] = {}
    for (kinds, key), values in fleets.items():
        if len(values) < MIN_FLEET:
            continue
        at = percentile(values, q)
        limit = max(1, int(round_up(at))) if isinstance(values[0], int) else max(MIN_RATE, round_up(at))
        limits[(kinds, key)] = limit
        entity = {kind: DEFAULT for kind in kinds}
        defaults.setdefault(entity_id(entity), {"entity": entity})[key] = limit
        said.setdefault(entity_id(entity), {})[key] = (
            f"fleet default: p{q:g} of the {len(values)} {' and '.join(kinds)} entities' recommendations; "
            f"{sum(v > limit for v in values)} above it keep a named entry"
        )
    named = []
    for item in items:
        kinds, own = tuple(item["entity"]), basis.get(entity_id(item["entity"]), {})
        kept = {k: v for k, v in item.items() if k != "entity" and v > limits.get((kinds, k), -1)}
        if not kept:
            continue
        named.append({"entity": dict(item["entity"]), **kept})
        said[entity_id(item["entity"])] = {
            k: own[k] + (f"; above the fleet default {limits[(kinds, k)]:g}" if (kinds, k) in limits else "")
            for k in kept
            if k in own
        }
    return [*defaults.values(), *named], said
