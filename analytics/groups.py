"""Quota groups in the plan: a group's byte rates from its members' summed demand, and its entry with its members.
Pure Python, no Spark (the statistics: :mod:`analytics.group_stats`).

A quota group (``{quota-group: NAME}``, docs/quotas/quota-groups.md) gives its members one budget of each key it
sets. The usage log names the group of each record's user, else client id (``quota_group``); the planner reads
each key's group figure from the members' records added up per interval, as the proxy adds them in the group's one
sensor, and a held group's demand from its members' (:func:`analytics.demand.summed_demand_rate`):

- in an interval where some member was held, each member adds its own demand: ``d`` of
  :func:`analytics.demand.interval_demand` where it was held, its rate where it was not; the interval tells the
  group's demand only when every member's part does (none held through it, none right after being held through);
- the group's estimate is those sums pooled over the free time (the interval less its most held member's held
  time), over the intervals above the group's quota, as :func:`analytics.demand.demand_rate` pools one tenant's.

A member is planned in its group: the table gives it no entry of its own for a key its group is recommended (an
entry of its own, ``/users/alice``, comes before the group in Kafka's order and would take it out of the shared
budget), and its figure counts in the group's. The entry lists the members the log shows (:func:`members`): as
users where every client of each user is in the group, else as client ids (a prefix cannot be read from a log: a
prefix group's entry lists the client ids seen; keep the prefix of the entry in force).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from analytics.recommend import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, Rules, byte_rate_basis, entity_id
from quota.primitives.entity import DEFAULT
from quota.primitives.quota_groups import CLIENT_IDS, QUOTA_GROUP, USERS

ANONYMOUS = "ANONYMOUS"  # the principal of a connection without SASL or mTLS: every unauthenticated client

GROUP_KEYS = {"Produce": (PRODUCER_BYTE_RATE, "request"), "Fetch": (CONSUMER_BYTE_RATE, "response")}
"""The keys planned for a group, by API: what the rows of :mod:`analytics.group_stats` measure."""

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


def recommendations(rows: Iterable[Mapping], rules: Rules) -> Iterable[Recommendation]:
    """``({quota-group: NAME}, key, value, what it rests on)`` per group row (:mod:`analytics.group_stats`)."""
    for row in rows:
        if row["api"] not in GROUP_KEYS:
            continue
        key, side = GROUP_KEYS[row["api"]]
        value, text = byte_rate_basis(row, side, rules)
        if value:
            yield {QUOTA_GROUP: row["user"]}, key, value, f"its members added up per interval: {text}"


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


def taken_out(
    items: Iterable[Mapping], groups: Sequence[Mapping], tenants: Iterable[tuple[str | None, str | None, str | None]]
) -> list[dict]:
    """``items`` without the keys of the members' own entries that their groups (``groups``: :func:`entries`) set;
    an item left with none dropped."""
    keys = {e["entity"][QUOTA_GROUP]: {k for k in e if k in GROUP_KEYS_SET} for e in groups}
    taken = {(user, client_id, key) for user, client_id, group in tenants if group in keys for key in keys[group]}
    out = []
    for item in items:
        entity = item["entity"]
        kept = {k: v for k, v in item.items() if (entity.get("user"), entity.get("client-id"), k) not in taken}
        if set(kept) != {"entity"}:
            out.append(kept)
    return out


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
    by_client = {k for e in groups if USERS not in e for k in e if k in GROUP_KEYS_SET}
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


GROUP_KEYS_SET = frozenset(key for key, _ in GROUP_KEYS.values())
