"""The change set: what to change in the table in force to reach the recommended table. Pure Python, no Spark.

Per entity and quota key, the table in force (:class:`analytics.in_force.InForce`) against the recommended table:

- **add**: recommended, not in force;   **raise** / **lower**: in force at another value;
- **enforce**: a recommended key of an entry in force in shadow mode (``mode: shadow``, or the proxy-wide
  ``quota.mode: shadow``): it holds nobody today (the replay's today-figure is 0 for the tenants it governs), so the
  change is to enforce it, at the recommended value; said as a comment, as no ``configs`` option sets a mode;
- **remove**: a named entry's key in force that the recommended table leaves to the fleet default of its entity
  type, for a tenant the log saw doing that kind of traffic (its own figure is at or below the default);
- an **offender** (held to its fleet's figure, :mod:`analytics.outliers`) is never raised above what the table in
  force gives it today: where that is less, it is held there, by a named entry of that value (so a raised default
  does not raise it either);
- **the fleet default goes on the default in force**: the planner writes its fleet default for users and client ids
  as ``{user: <default>, client-id: <default>}`` (or another of Kafka's three default shapes); where the table in
  force holds that key's default in another shape (``{client-id: <default>}``, ``{user: <default>}``), the change is
  to that entry (raise or lower it), not an entry of the planner's shape beside it. A second default would win or
  lose by Kafka's order alone: the one behind it would stay in the table with no effect on anyone, and one above it
  (``<default>``/``<default>`` above ``{client-id: x}``) would silently take over the named entries between them;
- a ``<default>`` entry in force that no tenant can resolve to after the change (another default of users and client
  ids, of that key, comes first in Kafka's order for every tenant) is **removed**, said as such;
- everything else in force stays as it is (**kept**, with why): the keys of entities the log never saw doing that
  traffic (a tenant quiet over the log keeps its quota), a ``<default>`` the planner sets none for (its fleet is
  too small), a key the planner does not cover. An unchanged key gets no line.

Beside each byte-rate line, the replay's held seconds (:mod:`analytics.replay`, run with the table in force as today
and the table after the change as the candidate), summed over the tenants that line's entry governs under either
table (the entry the proxy resolves for them, Kafka's eight levels); the other keys are not replayed. A tenant the
log shows held for :data:`MOSTLY_HELD` of its time or more was free too little for its demand to show
(:mod:`analytics.demand`: an interval tells it only when free for ``MIN_FREE`` of it): the replay runs what could be
estimated, which errs low, so the after-figure is a lower bound, and the line says so with the demand it is at least.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from analytics import recommend
from analytics.demand import MIN_FREE
from analytics.in_force import FILE, TOPIC, InForce, limit_for
from analytics.recommend import comments, entity_id, figure_text
from analytics.replay import KEYS as REPLAYED
from analytics.replay import byte_rate_table
from analytics.replay import members as replay_members
from quota.primitives.entity import DEFAULT, QuotaEntity, precedence
from quota.primitives.quota_groups import CLIENT_IDS, MEMBER_KEYS, QUOTA_GROUP, USERS, QuotaGroupEntity

NOT_KEYS = ("entity", *MEMBER_KEYS)  # an item's parts that are no quota: its entity, a quota group's members

ADD, RAISE, LOWER, REMOVE, ENFORCE = "add", "raise", "lower", "remove", "enforce"
ORDER = (ADD, RAISE, LOWER, REMOVE, ENFORCE)
SHADOW = "in shadow mode today: it holds nobody"
BYTE_KEYS = {key: api for api, (key, _) in REPLAYED.items()}  # producer_byte_rate -> Produce ...
MOSTLY_HELD = 1 - MIN_FREE  # held this share of the log or more: free too little for the demand to show


@dataclass(frozen=True)
class Unseen:
    """A tenant the log shows held nearly all the time (:data:`MOSTLY_HELD`): its demand is at least
    ``demand_at_least`` B/s (the largest of its estimate, the quota it was held to and its p99 rate), how much more
    the log cannot show."""

    entity: dict
    held_share: float
    demand_at_least: float

    def text(self) -> str:
        return f"{_words(self.entity)} {self.said()}"

    def said(self) -> str:
        return (
            f"held {self.held_share:.0%} of the log: its demand is at least {figure_text(self.demand_at_least)} B/s, "
            "how much more the log cannot show; the after-figure is a lower bound"
        )


@dataclass(frozen=True)
class Change:
    entity: dict
    key: str
    action: str  # ADD, RAISE, LOWER, REMOVE or ENFORCE (a key of an entry in shadow mode, to be enforced)
    before: float | None  # in force (None: not set)
    after: float | None  # recommended (None: removed)
    origin: str | None = None  # where the key in force is set: FILE or TOPIC (None for an add)
    rests_on: str = ""  # what the recommendation rests on (analytics.recommend.bases)
    held_today_s: float | None = None  # the replay's held seconds of the tenants it governs (byte rates only)
    held_after_s: float | None = None
    tenants: int = 0  # the tenants the replay counted for it
    unseen: tuple[Unseen, ...] = ()  # of those, the ones held nearly all the time: the figures are lower bounds

    def line(self) -> str:
        """``raise user=a client-id=b producer_byte_rate 1,000,000 -> 4,000,000 (held 540 s today, 12 s after)``"""
        what = _words(self.entity)
        values = {
            ADD: f"{figure_text(self.after or 0)} (not set today)",
            REMOVE: f"{figure_text(self.before or 0)} -> the fleet default",
        }.get(self.action, f"{figure_text(self.before or 0)} -> {figure_text(self.after or 0)}")
        if self.action == ENFORCE:
            values = (
                f"{figure_text(self.after or 0)} ({SHADOW})"
                if self.before is None or math.isclose(self.before, self.after or 0)
                else f"{values} ({SHADOW})"
            )
        return f"{self.action} {what} {self.key} {values}: {self.verdict()}"

    def verdict(self) -> str:
        if self.held_today_s is None or self.held_after_s is None:
            return "not replayed (the replay covers byte rates)" if self.key not in BYTE_KEYS else "not replayed"
        if not self.tenants:
            return "no tenant in the log under it"
        said = (
            f"held {self.held_today_s:,.0f} s today, {self.held_after_s:,.0f} s after the change "
            f"({self.tenants} tenant{'s' if self.tenants > 1 else ''} in the log)"
        )
        return "; ".join([said, *(u.text() for u in self.unseen)])


@dataclass(frozen=True)
class ChangeSet:
    changes: tuple[Change, ...]
    kept: tuple[tuple[dict, str, float, str], ...]  # (entity, key, value in force, why it stays)
    after: tuple[dict, ...]  # the table in force with the changes applied
    in_force: InForce

    def counts(self) -> str:
        found = [(sum(c.action == a for c in self.changes), a) for a in ORDER]
        return ", ".join(f"{n} {a}" for n, a in found if n or a != ENFORCE)


def plan(
    in_force: InForce,
    recommended: Sequence[Mapping],
    basis: Mapping[tuple, Mapping[str, str]],
    seen: Iterable[tuple[tuple, str]],
    offenders: Iterable[tuple[tuple, str]] = (),
) -> ChangeSet:
    """The change set from the table in force to ``recommended`` (:func:`analytics.fleet.plan`'s items);
    ``seen``: ``(entity_id, key)`` of every entity the log saw doing that key's traffic
    (:func:`analytics.outliers.fleets`); ``offenders``: the keys of the offenders held to their fleet's figure
    (:mod:`analytics.outliers`, not those kept by --legitimate), never raised above what they have today: where the
    table in force gives one less than its fleet's figure, it is held there (pinned by a named entry of that value,
    so a raised default does not raise it either)."""
    target = {(entity_id(it["entity"]), k): v for it in recommended for k, v in it.items() if k not in NOT_KEYS}
    current = {(entity_id(it["entity"]), k): v for it in in_force.items for k, v in it.items() if k != "entity"}
    entities = {entity_id(it["entity"]): dict(it["entity"]) for it in [*in_force.items, *recommended]}
    defaults = {(tuple(sorted(entities[eid])), key) for eid, key in target if _is_default(entities[eid])}
    target, moved = _onto_defaults_in_force(target, current, entities)
    seen, held = set(seen), set(offenders)
    changes, kept = [], []
    for (eid, key), after in target.items():
        before = current.get((eid, key))
        said = basis.get(moved.get((eid, key), eid), {}).get(key, "")
        if (eid, key) in moved:
            planner = _words(entities[moved[(eid, key)]])
            said = (
                f"{said + '; ' if said else ''}the fleet default, on the default in force ({_words(entities[eid])}) "
                f"rather than a new {planner} beside it, which would leave one of the two with no effect"
            )
        today = limit_for(in_force.items, entities[eid], key) if (eid, key) in held else None
        if today is not None and today < after:
            said = f"offender: held at the {figure_text(today)} in force today, below its fleet's figure {figure_text(after)}"
            after = today
        shadow = eid in in_force.shadow
        if before is not None and math.isclose(before, after) and not shadow:
            continue
        action = ENFORCE if shadow else ADD if before is None else RAISE if after > before else LOWER
        origin = None if before is None else in_force.origins.get((eid, key))
        changes.append(Change(entities[eid], key, action, before, after, origin, said))
    for (eid, key), before in current.items():
        if (eid, key) in target:
            continue
        entity = entities[eid]
        first = _default_before(entity, key, [*target, *current], entities)
        group = _group_of(entity, key, recommended)
        if group is not None:
            origin = in_force.origins.get((eid, key))
            why = (
                f"a member of {{quota-group: {group}}}, which sets it: an entry of its own comes first (Kafka's order)"
            )
            changes.append(Change(entity, key, REMOVE, before, None, origin, why + " and takes it out of the budget"))
        elif first is not None:
            origin = in_force.origins.get((eid, key))
            why = f"no effect: every tenant resolves to {_words(first)} first (Kafka's order)"
            changes.append(Change(entity, key, REMOVE, before, None, origin, why))
        elif _is_default(entity) and "partition" in entity:
            kept.append((entity, key, before, "the planner sets no partition default (the log sums its partitions)"))
        elif _is_default(entity):
            kept.append((entity, key, before, "the planner sets no default for this entity type (fewer tenants)"))
        elif (eid, key) not in seen:
            kept.append((entity, key, before, "not seen doing this traffic in the log: kept as it is"))
        elif (tuple(sorted(entity)), key) not in defaults:
            kept.append((entity, key, before, "no fleet default of its type in the recommended table"))
        else:
            origin = in_force.origins.get((eid, key))
            changes.append(Change(entity, key, REMOVE, before, None, origin, "at or below the fleet default"))
    changes.sort(key=lambda c: (ORDER.index(c.action), not _is_default(c.entity), sorted(c.entity.items()), c.key))
    table = [
        {**it, **_members_of(it["entity"], [*in_force.replayed(), *recommended])}
        for it in apply(in_force.items, changes)
    ]
    return ChangeSet(tuple(changes), tuple(kept), tuple(table), in_force)


def _members_of(entity: Mapping[str, str], recommended: Iterable[Mapping]) -> dict:
    """A quota group's members as the recommended table names them (the replay resolves its members to it); {} for
    any other entity."""
    found = next((it for it in recommended if QUOTA_GROUP in entity and it["entity"] == entity), {})
    return {k: v for k, v in found.items() if k in MEMBER_KEYS}


def _group_of(entity: Mapping[str, str], key: str, recommended: Iterable[Mapping]) -> str | None:
    """The quota group of the recommended table that sets ``key`` and has ``entity``'s user or client id as a
    member, if any."""
    for item in recommended:
        if QUOTA_GROUP in item["entity"] and key in item:
            named = item.get(USERS, []) if USERS in item else item.get(CLIENT_IDS, [])
            if (entity.get("user") if USERS in item else entity.get("client-id")) in named:
                return item["entity"][QUOTA_GROUP]
    return None


def _is_default(entity: Mapping[str, str]) -> bool:
    return any(name == DEFAULT for name in entity.values())


def _fleet_default(entity: Mapping[str, str]) -> int | None:
    """The precedence level of a ``<default>`` entity of users and client ids (5: ``<default>``/``<default>``, 6:
    ``{user: <default>}``, 8: ``{client-id: <default>}``); None for any other entity."""
    if not entity or set(entity) - {"user", "client-id"} or any(name != DEFAULT for name in entity.values()):
        return None
    return precedence(QuotaEntity(entity.get("user"), entity.get("client-id")))


def _words(entity: Mapping[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in entity.items())


def _onto_defaults_in_force(
    planned_table: Mapping[tuple, float], current: Mapping, entities: Mapping[tuple, dict]
) -> tuple[dict[tuple, float], dict[tuple, tuple]]:
    """``planned_table`` (``{(entity_id, key): value}``) with each key's one fleet default of users and client ids
    moved onto the default the table in force holds for that key in another shape (the one tenants resolve to today,
    the first in Kafka's order), and ``{(entity_id in force, key): entity_id the planner wrote}`` for the moved."""
    target, moved = dict(planned_table), {}
    for key in {k for _, k in planned_table}:
        planned = [eid for eid, k in target if k == key and _fleet_default(entities[eid]) is not None]
        today = [eid for eid, k in current if k == key and _fleet_default(entities[eid]) is not None]
        if len(planned) != 1 or not today or (planned[0], key) in current:
            continue  # no default, two shapes planned (each on its own), or the planner's shape is in force
        live = min(today, key=lambda eid: _fleet_default(entities[eid]) or 0)
        target[(live, key)] = target.pop((planned[0], key))
        moved[(live, key)] = planned[0]
    return target, moved


def _default_before(entity: Mapping[str, str], key: str, keys: Iterable[tuple], entities: Mapping) -> dict | None:
    """The default of users and client ids that comes before ``entity`` (one itself) for ``key`` among ``keys``
    (``(entity_id, key)``): every tenant resolves to it first, so ``entity`` governs no one; None when there is none."""
    level = _fleet_default(entity)
    if level is None:
        return None
    before = [
        (found, entities[eid])
        for eid, k in keys
        if k == key and (found := _fleet_default(entities[eid])) is not None and found < level
    ]
    return min(before, key=lambda pair: pair[0])[1] if before else None


def apply(items: Iterable[Mapping], changes: Iterable[Change]) -> list[dict]:
    """``items`` with ``changes`` applied (an entity left with no key dropped)."""
    table: dict[tuple, dict] = {entity_id(it["entity"]): dict(it) for it in items}
    for c in changes:
        item = table.setdefault(entity_id(c.entity), {"entity": dict(c.entity)})
        if c.after is None:
            item.pop(c.key, None)
        else:
            item[c.key] = c.after
    return [it for it in table.values() if len(it) > 1]


def with_replay(changes: ChangeSet, rows: Iterable[Mapping], stats: Iterable[Mapping] = ()) -> ChangeSet:
    """Each byte-rate change with the held seconds of the tenants its entry governs, today (the table in force) and
    after the change, from the replay's rows (:data:`analytics.replay.RESULT`, run with today's table); with
    ``stats`` (:func:`analytics.stats.entity_stats`' rows), those of them held nearly all the time (:class:`Unseen`)."""
    rows = list(rows)
    unseen = unseen_demand(stats)
    today, after = byte_rate_table(changes.in_force.replayed()), byte_rate_table(changes.after)
    out = []
    for c in changes.changes:
        api = BYTE_KEYS.get(c.key)
        if api is None:
            out.append(c)
            continue
        governed = [
            r
            for r in rows
            if r["api"] == api
            and any(
                _governs(table.resolve(c.key, user or "", client_id or "").entity, c.entity)
                for table in (today, after)
                for user, client_id in replay_members(r)
            )
        ]
        held_today = round(sum(r["today_held_s"] for r in governed), 1)
        held_after = round(sum(r["candidate_held_s"] for r in governed), 1)
        tenants = [m for r in governed for m in replay_members(r)]
        found = tuple(u for user, client_id in tenants if (u := unseen.get((user, client_id, api))) is not None)
        out.append(replace(c, held_today_s=held_today, held_after_s=held_after, tenants=len(tenants), unseen=found))
    return replace(changes, changes=tuple(out))


def unseen_demand(stats: Iterable[Mapping]) -> dict[tuple, Unseen]:
    """``{(user, client_id, api): Unseen}`` for the byte-rate rows held :data:`MOSTLY_HELD` of their time or more:
    their demand is at least the estimate (:mod:`analytics.demand`, which errs low) and the quota they were held to."""
    out = {}
    for row in stats:
        if row["api"] not in REPLAYED or (row.get("held_share") or 0) < MOSTLY_HELD:
            continue
        side = REPLAYED[row["api"]][1]
        floor = max(row.get(f"{side}_demand") or 0, row.get("quota_rate") or 0, row.get(f"{side}_rate_p99") or 0)
        entity = recommend.entity_key(row["user"], row["client_id"])
        out[(row["user"], row["client_id"], row["api"])] = Unseen(entity, row["held_share"], floor)
    return out


def _governs(resolved, entity: Mapping[str, str]) -> bool:
    """The entry the proxy resolved (a QuotaEntity, a quota group's, or None) is ``entity``'s."""
    if resolved is None:
        return False
    if isinstance(resolved, QuotaGroupEntity):
        return entity == {QUOTA_GROUP: resolved.name}
    return resolved.user == entity.get("user") and resolved.client_id == entity.get("client-id")


def to_commands(changes: ChangeSet, scope_lines: Iterable[str] = ()) -> str:
    """The commands that apply exactly ``changes``: one ``configs --alter`` per entity (its adds, raises and lowers in
    ``--add-config``, its removals of keys set through the config topic in ``--delete-config``), after a ``# `` line
    per change; a removal of a key set in the configuration file is a ``# `` line saying to remove it there (the
    config topic overrides the file; it cannot take the file's key away)."""
    out = comments(scope_lines)
    out += comments([f"The change set against the table in force ({changes.in_force.source}): {changes.counts()}"])
    by_entity: dict[tuple, list[Change]] = {}
    for c in changes.changes:
        by_entity.setdefault(entity_id(c.entity), []).append(c)
    for group in by_entity.values():
        entity = group[0].entity
        added = {c.key: _number(c.after) for c in group if c.after is not None}
        deleted = [c.key for c in group if c.action == REMOVE and c.origin == TOPIC]
        in_file = [c for c in group if c.action == REMOVE and c.origin != TOPIC]
        out += comments(c.line() for c in group)
        out += comments(
            f"edit {changes.in_force.file or 'the proxy configuration'}: remove {c.key} from the entry of "
            f"{_words(entity)} (set in the file, which the config topic cannot undo)"
            for c in in_file
        )
        if any(c.action == ENFORCE for c in group):
            out += comments([_enforce_text(entity, changes.in_force.file)])
        if "quota-group" in entity:
            out += comments([recommend.file_only({"entity": entity, **added}, changes.in_force.file)])
        elif added or deleted:
            out += recommend.to_command({"entity": entity, **added}, deleted=deleted) + "\n"
    return out


def _enforce_text(entity: Mapping[str, str], file: str | None) -> str:
    """How to take an entry out of shadow mode: no ``configs`` option sets a mode (AlterClientQuotas carries
    numbers)."""
    return (
        f"enforce the entry of {_words(entity)}: set mode: enforce on it in {file or 'the proxy configuration'} "
        "(or in its config topic record); where the proxy-wide quota.mode is shadow, `kafka-quota-proxy configs "
        "--entity-type brokers --entity-default --alter --add-config quota.mode=enforce` enforces every entry"
    )


def _number(value: float | None) -> float | int | None:
    return int(value) if value is not None and float(value).is_integer() else value


def origin_text(origin: str | None) -> str:
    return {FILE: "the configuration file", TOPIC: "the config topic"}.get(origin or "", "")
