"""What a byte-rate quota does with a new entity once its sensor table is full (``quota.max.tracked.entities``,
issue 35). Pure.

Kafka keeps a sensor per client id under a ``<default>`` quota for an hour, so memory grows with every client id
seen in the last hour: a client that makes up a new id per connection (or a flood of them) grows a proxy by about
0.8 KiB per id per quota until it is killed. Past the cap, a new entity is not tracked on its own: it is counted in
one *overflow sensor* per quota that covers it, whose tags are the entity's own with every part the quota matched
as ``<default>`` replaced by :data:`OVERFLOW` (``("", "<overflow>")`` under ``/clients/<default>``,
``("alice", "<overflow>")`` under ``/users/alice/clients/<default>``, ``("<overflow>", "")`` under
``/users/<default>``). Every untracked entity of that quota then shares that one quota, as Kafka's
``<default>``-entity sensors are shared by the clients they name: the flood is throttled together at the quota, and
the tenants already tracked keep their own sensors and their own budget.

Why not evict the least recently used tenant instead: an evicted tenant's window starts empty, so it may burst
``quota * (num - 1)`` windows again at its next request; a flood of new ids would then hand a fresh burst to every
well-behaved tenant it pushed out, and a tenant could reset its own window by flooding. A careful operator would
rather throttle the flood than the tenants already there. Room comes back as idle sensors expire (an hour without a
record), and new entities get their own sensors again.

An entity a quota names in full (``/users/alice/clients/etl``, ``/users/alice``, ``/clients/etl``) is always tracked:
the configuration bounds those. A client whose id is literally ``<overflow>`` counts with the overflow.
"""

from __future__ import annotations

from quota.primitives.entity import DEFAULT, QuotaTags, ResolvedQuota

OVERFLOW = "<overflow>"
"""The tag part of an overflow sensor that stands for every untracked name (``<default>``'s sibling)."""

DEFAULT_MAX_TRACKED_ENTITIES = 100_000
"""Sensors one byte-rate quota manager holds before new entities overflow: about 80 MiB (0.8 KiB each), so the two of
a sidecar stay within its 512 MiB limit beside 20,000 connections (README, Sizing)."""


def overflow_tags(resolved: ResolvedQuota) -> QuotaTags | None:
    """The tags of the overflow sensor that counts ``resolved``'s entity when it cannot have its own; None for an
    entity the quota names in full (always tracked). A client no quota covers (counted for its metrics only)
    overflows into ``("", "<overflow>")``, as its tags are ``("", client_id)``."""
    entity = resolved.entity
    tags = resolved.tags
    if entity is None:
        return QuotaTags("", OVERFLOW)
    if entity.user != DEFAULT and entity.client_id != DEFAULT:
        return None
    return QuotaTags(
        OVERFLOW if entity.user == DEFAULT else tags.user, OVERFLOW if entity.client_id == DEFAULT else tags.client_id
    )
