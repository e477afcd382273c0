"""Quota groups in the plan: each of a group's keys from its members' records added up, and its entry with its
members. Pure Python, no Spark (the statistics: :mod:`analytics.group_stats`).

A quota group (``{quota-group: NAME}``, docs/quotas/quota-groups.md) gives its members one budget of each key it
sets. The usage log names the group of each record's user, else client id (``quota_group``); the planner reads
each key's group figure from the members' records added up per interval, as the proxy adds them in the group's one
sensor, by the rule of that key for one tenant (:data:`PLANNED`: the byte rates, the two token buckets, the request
rate), and a held group's demand from its members' (:func:`analytics.demand.summed_demand_rate`):

- in an interval where some member was held, each member adds its own demand: ``d`` of
  :func:`analytics.demand.interval_demand` where it was held, its rate where it was not; the interval tells the
  group's demand only when every member's part does (none held through it, none right after being held through);
- the group's estimate is those sums pooled over the free time (the interval less its most held member's held
  time), over the intervals above the group's quota, as :func:`analytics.demand.demand_rate` pools one tenant's.

A member is planned in its group: the table gives it no entry of its own for a key its group is recommended (an
entry of its own, ``/users/alice``, comes before the group in Kafka's order and would take it out of the shared
budget), and its figure counts in the group's. The entry lists the members the log shows (:func:`members`): as
users where every client of each user is in the group, else as client ids (a prefix cannot be read from a log: a
prefix group's entry lists the client ids seen; keep the prefix of the entry in force). The groups are a fleet of
their own for offenders (:func:`fleets`); no ``<default>`` takes a group (the proxy has none), so each keeps its entry.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence

from analytics import named_rates
from analytics.recommend import (
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    PRODUCER_BYTE_RATE,
    PRODUCER_IDS_RATE,
    Rules,
    byte_rate_basis,
    entity_id,
    mutation_basis,
    producer_ids_basis,
)
from quota.primitives.entity import DEFAULT, REQUEST_RATE
from quota.primitives.quota_groups import CLIENT_IDS, QUOTA_GROUP, USERS

ANONYMOUS = "ANONYMOUS"  # the principal of a connection without SASL or mTLS: every unauthenticated client

GROUP_KEYS = {"Produce": (PRODUCER_BYTE_RATE, "request"), "Fetch": (CONSUMER_BYTE_RATE, "response")}
"""The byte rates planned for a group, by API: what the Produce and Fetch rows of :mod:`analytics.group_stats`
measure."""

PLANNED = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, CONTROLLER_MUTATION_RATE, PRODUCER_IDS_RATE, REQUEST_RATE)
"""Every key planned for a group: its byte rates, its token buckets (the ``*`` rows) and its request rate (the
``request_rate`` rows); ``producer_ids_rate`` only for a group of users (KIP-936 keys it by user)."""

Tenants = Iterable[tuple[str | None, str | None, str | None]]  # (user, client_id, quota group) of every tenant
Recommendation = tuple[dict, str, float, str]  # (entity, key, value, what it rests on)


def members(group: str, tenants: Iterable[tuple[str | None, str | None, str | None]]) -> dict[str, list[str]]:
    """The member keys of ``group``'s entry from ``tenants`` (``(user, client_id, quota group)`` of every tenant in
    the log): users where every tenant of each of its users is in the group (a principal is authenticated, a client
    id is what the client says; ``ANONYMOUS``, every unauthenticated client, is no member to name), else client
    ids."""
    tenants = list(tenants)
    seen = [(user, client_id) for user, client_id, g in tenants if g == group]
    users = {user for user, _ in seen}
    clients = {client_id for _, client_id in seen if client_id is not None}
    whole_users = not users & {None, ANONYMOUS} and all(g == group for user, _, g in tenants if user in users)
    if whole_users:
        return {USERS: sorted(u for u in users if u is not None)}
    return {CLIENT_IDS: sorted(clients)}


def recommendations(rows: Iterable[Mapping], rules: Rules, tenants: Tenants = ()) -> Iterable[Recommendation]:
    """``({quota-group: NAME}, key, value, what it rests on)`` per group row (:mod:`analytics.group_stats`), by the
    rule of the same key for one tenant; ``producer_ids_rate`` only for a group of users (``tenants``:
    :func:`members`)."""
    tenants = list(tenants)
    for row in rows:
        entity = {QUOTA_GROUP: row["user"]}
        for key, (value, text) in _bases(row, rules, lambda: USERS in members(row["user"], tenants)):
            if value:
                yield entity, key, value, f"its members added up per interval: {text}"


def _bases(row: Mapping, rules: Rules, by_user) -> Iterator[tuple[str, tuple[float | None, str]]]:
    """``(key, (value, what it rests on))`` of one group row."""
    if row["api"] in GROUP_KEYS:
        key, side = GROUP_KEYS[row["api"]]
        yield key, byte_rate_basis(row, side, rules)
    elif row["api"] == REQUEST_RATE:
        yield REQUEST_RATE, named_rates.basis(row, rules)
    elif row["api"] == "*":
        yield CONTROLLER_MUTATION_RATE, mutation_basis(row, rules)
        if by_user():
            yield PRODUCER_IDS_RATE, producer_ids_basis(row, rules)


def fleets(rows: Iterable[Mapping], tenants: Tenants) -> dict[tuple[tuple[str, ...], str], list[dict]]:
    """The groups' fleets, per key (as :func:`analytics.outliers.fleets`): the groups that produced, fetched or sent
    the requests ``request_rate`` counts; every group for ``controller_mutation_rate``, every group of users for
    ``producer_ids_rate`` (one that did none counts at what one event gives)."""
    tenants = list(tenants)
    out: dict[tuple[tuple[str, ...], str], list[dict]] = {}
    for row in rows:
        entity = {QUOTA_GROUP: row["user"]}
        for key, _ in _bases(row, Rules(), lambda: USERS in members(row["user"], tenants)):
            out.setdefault(((QUOTA_GROUP,), key), []).append(entity)
    return out


def entries(
    planned: Iterable[Recommendation], tenants: Sequence[tuple[str | None, str | None, str | None]]
) -> tuple[list[dict], dict[tuple, dict[str, str]]]:
    """The groups' entries (``{quota-group: NAME}``, its members, its keys) and what each key rests on."""
    out: dict[str, dict] = {}
    said: dict[tuple, dict[str, str]] = {}
    for entity, key, value, text in planned:
        name = entity[QUOTA_GROUP]
        out.setdefault(name, {"entity": dict(entity), **members(name, tenants)})[key] = value
        said.setdefault(entity_id(entity), {})[key] = text
    return list(out.values()), said


def taken_out(items: Iterable[Mapping], groups: Sequence[Mapping], tenants: Tenants) -> list[dict]:
    """``items`` without the keys of the members' own entries that their groups (``groups``: :func:`entries`) set
    (a member's ``{user: NAME}`` too, for a group of users); an item left with none dropped."""
    taken = _taken(groups, tenants)
    out = []
    for item in items:
        entity = item["entity"]
        kept = {k: v for k, v in item.items() if (entity.get("user"), entity.get("client-id"), k) not in taken}
        if set(kept) != {"entity"}:
            out.append(kept)
    return out


def out_of_fleets(found: Mapping[tuple, Sequence[dict]], groups: Sequence[Mapping], tenants: Tenants) -> dict:
    """The fleets ``found`` (:func:`analytics.outliers.fleets`) without the members of a group for the keys it sets:
    planned in their group, they have no figure of their own to be judged by, nor to judge others by."""
    taken = _taken(groups, tenants)
    return {
        (kinds, key): [e for e in members if (e.get("user"), e.get("client-id"), key) not in taken]
        for (kinds, key), members in found.items()
    }


def _taken(groups: Sequence[Mapping], tenants: Tenants) -> set[tuple[str | None, str | None, str]]:
    """``(user, client_id, key)`` of each member's own entity for each key its group sets."""
    keys = {e["entity"][QUOTA_GROUP]: ({k for k in e if k in PLANNED}, USERS in e) for e in groups}
    taken = set()
    for user, client_id, group in tenants:
        group_keys, by_user = keys.get(group, ((), False))
        taken |= {(user, client_id, key) for key in group_keys}
        taken |= {(user, None, key) for key in group_keys if by_user}
    return taken


def with_groups(
    items: Sequence[Mapping], basis: Mapping[tuple, Mapping[str, str]], groups: Sequence[Mapping]
) -> tuple[list[dict], dict[tuple, dict[str, str]], list[str]]:
    """The table ``items`` (what each key rests on: ``basis``) with the groups' entries (:func:`entries`) after it,
    and lines for the outputs. A group of client ids comes after every level with a user (Kafka's order): where the
    table sets a key such a group sets in ``{user: <default>, client-id: <default>}``, that default is written as
    ``{client-id: <default>}`` instead, which the group comes before."""
    said = {eid: dict(keys) for eid, keys in basis.items()}
    if not groups:
        return [dict(it) for it in items], said, []
    by_client = {k for e in groups if USERS not in e for k in e if k in PLANNED}
    out, moved = [], {}
    for item in items:
        kept = dict(item)
        if item["entity"] == {"user": DEFAULT, "client-id": DEFAULT}:
            moved = {k: kept.pop(k) for k in by_client & set(kept)}
        if set(kept) != {"entity"}:
            out.append(kept)
    notes = [
        f"quota groups: {len(groups)} planned from their members' usage added up; a member gets no entry of its own "
        "for a key its group sets (it would come before the group, Kafka's order, and leave the shared budget)"
    ]
    if moved:
        default = {"client-id": DEFAULT}
        found = next((it for it in out if it["entity"] == default), None)
        if found is None:
            found = {"entity": default}
            out.insert(0, found)
        found.update(moved)
        why = (
            "the fleet default, written as {client-id: <default>}: a <default> with a user comes before a quota group "
            "of client ids (Kafka's order) and would leave the group with no effect"
        )
        said.setdefault(entity_id(default), {}).update({k: why for k in moved})
        notes.append(f"{', '.join(sorted(moved))}: {why}")
    return [*out, *(dict(g) for g in groups)], said, notes
