"""The sensors one byte-rate (or mutation) quota keeps, one per quota tag pair, as a pure object: which sensor a
client is counted in, made when it has none, overflowed past ``quota.max.tracked.entities``, dropped after an hour
idle, and kept true to the quota table as it changes. Kafka's ``ClientQuotaManager`` keeps its sensors in the
``Metrics`` registry (``getOrCreateQuotaSensors``, ``updateQuotaMetricConfigs``); here they are this object's, and the
manager (:mod:`quota.managers.client_quota`), peers' usage (:mod:`quota.sharing`), a worker's seed and the metric
views all reach them through it. It decides nothing: throttles, smoothing and shadow are the manager's.

* **Lookup.** :meth:`SensorKeeper.known` finds a known client's sensor from its names alone, without resolving the
  client against the table (several lookups and two new objects): the request path's one lookup for a tenant it has
  seen. How depends on the table's shape (:func:`known_by`).
* **Eviction** (issue 44): once :attr:`SensorKeeper.max_tracked_entities` sensors are held, a new entity a quota
  names only as ``<default>`` gets a sensor of its own all the same: room is made by evicting one not recorded since
  it was last moved (made and never used again first, as a flood's one-off names are; idle ones next; a sensor in
  use gets a second chance), its debt (what it used of its quota, as the time its limit pays it off) carried in a
  decaying count-min sketch (:mod:`quota.primitives.debt_sketch`). A sensor made starts owing what is left; one
  made while the table is full starts without the fresh-entity burst besides (owing at least what the burst would
  let through), so a flood of new names gains no burst per name, and an entity gains nothing by being evicted and
  coming back. A well-behaved newcomer thus has its own quota at once, however full the table (the shared
  ``<overflow>`` sensor it used to land in was the flood's). :attr:`overflowed` counts the evictions.
* **Expiry** (:mod:`quota.primitives.sensor_table`): a record drops at most :data:`RECORD_EXPIRY_BATCH` idle sensors
  first; :meth:`SensorKeeper.expire` drops the rest off the request path.
* **Version** of the quota table: bumped by every :meth:`SensorKeeper.update_quotas`; a sensor whose
  ``resolved_version`` is the current one holds what the client its tags name resolves to, so a peer's row named by
  those tags may skip resolving.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from operator import attrgetter
from typing import Generic, TypeVar

from quota.primitives.debt_sketch import DebtSketch
from quota.primitives.entity import QuotaEntity, QuotaTags, ResolvedQuota
from quota.primitives.overflow import overflow_tags
from quota.primitives.quota_groups import group_of_tags
from quota.primitives.quota_lookup import QuotaLookup
from quota.primitives.rate import QuotaWindow
from quota.primitives.sensor import ClientSensors, EntityStats, summed_stats
from quota.primitives.sensor_table import SensorTable
from quota.primitives.top import busiest, no_pause, others, release, snapshot

EVICTION_SCAN = 1024
"""Sensors an eviction looks at from the front of a full table for one not recorded since it was last moved; those
recorded since go to the back (a second chance, which a record pays for: the scans cost O(1) a record amortized),
and past this many the front one goes all the same, so one eviction never costs more than about a millisecond."""

RECORD_EXPIRY_BATCH = 2
"""Idle sensors one record drops at most (more than the one it may make, so records alone keep up): a record that
finds a million sensors past their hour must not drop them all on the request path (about 10 us each); the
housekeeping drops the rest in batches."""

MAX_MEMBERS = 4096
"""Quota-group members whose sensor one keeper remembers by their names (past it, it forgets them all and starts
again): a member's sensor is the group's, never found by the member's names, so without it each of its records would
resolve again."""

BY_NAMES, BY_CLIENT_ID, BY_USER, BY_NOTHING = range(4)
"""How a known client's sensor is found from its names alone (:meth:`SensorKeeper.known`): by ``(user, client_id)``
when some level of the key names both, by ``("", client_id)`` when every level names a client-id alone, by
``(user, "")`` when every level names a user alone, not at all when the levels mix the last two."""


def known_by(tag_parts: frozenset[tuple[bool, bool]]) -> int:
    """:data:`BY_NAMES` ... :data:`BY_NOTHING` for a quota table's ``tag_parts(key)``."""
    if (True, True) in tag_parts:
        return BY_NAMES
    if tag_parts == {(False, True)}:
        return BY_CLIENT_ID
    if tag_parts == {(True, False)}:
        return BY_USER
    return BY_NOTHING


S = TypeVar("S", bound=ClientSensors, covariant=True)  # what one tag pair's state is: ClientSensors, or a subclass


class SensorKeeper(Generic[S]):
    """The sensors of ``quota_key`` under ``quotas``, each a ``sensors_class`` over ``window``, dropped after
    ``expiration_ms`` without a record. Every method that needs the time takes it (``now_ms``)."""

    # The two a byte-rate manager's C hot paths read (quota/primitives/native/hot_paths.c) as slots, at their offsets,
    # and the version the connection extension's Fetch reuse key reads (its slot cached per call site, as for the
    # other slots it reads); the rest in the instance's dict (``known`` is set over the method of that name, which a
    # slot could not be).
    __slots__ = ("table", "_known_by", "version", "__dict__")

    def __init__(
        self,
        quotas: QuotaLookup,
        quota_key: str,
        window: QuotaWindow,
        sensors_class: type[S],
        expiration_ms: int,
        max_tracked_entities: int,
    ) -> None:
        self.quotas = quotas
        self.quota_key = quota_key
        self.window = window
        self.sensors_class = sensors_class
        # The live sensors by tags, idle ones first (quota.primitives.sensor_table: Kafka's expiry).
        self.table: SensorTable[S] = SensorTable(expiration_ms)
        # Past this many sensors a new entity is counted in its quota's overflow sensor; may change live (a lower
        # cap makes no sensor go: new entities overflow until expiry brings the table below it).
        self.max_tracked_entities = max_tracked_entities
        self.overflowed = 0  # entities evicted to make room for new ones (local records and peers')
        self.debts = DebtSketch(window.span_ms)  # what evicted entities still owe (quota.primitives.debt_sketch)
        self.version = 0  # of the quota table: a sensor's resolved_version is valid while it is this one
        self.refreshed = 0  # sensors looked at by update_quotas (tests count it)
        self._known_by = known_by(quotas.tag_parts(quota_key))
        # (user, client_id) -> the quota group's sensor it resolved to under this table (cleared with the table)
        self._members: dict[tuple[str, str], S] = {}  # cleared, never swapped: the lookups hold it
        self.known = self._known_for(self._known_by)  # type: ignore[method-assign,assignment]  # the table shape's own

    @property
    def by_tags(self) -> dict[QuotaTags, S]:
        """tags -> sensor, idle ones first (the table's own dict: a scrape snapshots it)."""
        return self.table.sensors

    @property
    def expiration_ms(self) -> int:
        return self.table.expiration_ms

    def resolve(self, user: str, client_id: str) -> ResolvedQuota:
        """The quota that applies to this user and client-id, and the tags of the sensor it is counted in."""
        return self.quotas.resolve(self.quota_key, user, client_id)

    def get(self, tags: QuotaTags) -> S | None:
        """The live sensor of ``tags``, if any (never made)."""
        return self.table.sensors.get(tags)

    def counted_in(self, resolved: ResolvedQuota) -> S | None:
        """The live sensor ``resolved``'s entity is counted in (its own: past :attr:`max_tracked_entities` room is
        made for it); None when none lives (never made, or evicted). Never made here."""
        return self.table.sensors.get(resolved.tags)

    def __len__(self) -> int:
        """The number of live sensors."""
        return len(self.table)

    # -- lookup and making ---------------------------------------------------------------------------------------

    def known(self, user: str, client_id: str) -> S | None:
        """The sensor of this client when it holds what the current table resolves for it, else None: the request
        path's one lookup for a known tenant, instead of resolving and then looking the sensor up.

        A ``fast`` sensor holds what the table resolves for its representative (:class:`ClientSensors`). That is
        what it resolves for this client too when the client is the representative and the one its tags name
        (``BY_NAMES``: tags of both names identify one client); or when every level of the table counts a client
        under its client-id alone (``BY_CLIENT_ID``: the user takes no part in resolving, and a client no entry
        covers is counted under ``("", client_id)`` as well) or under its user alone (``BY_USER``: as long as the
        sensor was matched by an entry; a client no entry covers is counted under its client-id instead).

        Written here for every shape at once; each keeper answers through the lookup of its table's shape alone,
        set over this one as an instance attribute (:meth:`_known_for`), which finds the same sensor."""
        by = self._known_by
        sensors: S | None
        # A plain tuple finds the QuotaTags key it equals; building a QuotaTags would cost every request.
        if by == BY_NAMES:
            sensors = self.table.sensors.get((user, client_id))  # type: ignore[call-overload]  # finds its QuotaTags
            if sensors is not None and sensors.fast and sensors.representative is sensors.tags:
                return sensors
        elif by == BY_CLIENT_ID:
            sensors = self.table.sensors.get(("", client_id))  # type: ignore[call-overload]  # finds its QuotaTags
            if sensors is not None and sensors.fast:
                return sensors
        elif by == BY_USER:
            sensors = self.table.sensors.get((user, ""))  # type: ignore[call-overload]  # finds its QuotaTags
            if sensors is not None and sensors.fast and sensors.entity is not None:
                return sensors
        if self._members:  # a quota group's member: its group's sensor, while that one lives
            sensors = self._members.get((user, client_id))
            if sensors is not None and sensors.fast and self.table.sensors.get(sensors.tags) is sensors:
                return sensors
        return None

    def _known_for(self, by: int) -> Callable[[str, str], S | None]:
        """:meth:`known` for a table of shape ``by`` (:func:`known_by`) with the shape's test made once, not for each
        lookup: what ``known`` is on each keeper (set again when the table changes). Each finds what :meth:`known`
        finds (tests/quota/primitives/test_sensor_keeper.py drives both)."""
        # what they read, held for good (the table's dict is not: a compaction swaps it); not the keeper itself, so
        # no reference cycle keeps a dropped keeper
        table, members = self.table, self._members

        def by_names(user: str, client_id: str) -> S | None:
            sensors: S | None = table.sensors.get((user, client_id))  # type: ignore[call-overload]  # finds its QuotaTags
            if sensors is not None and sensors.fast and sensors.representative is sensors.tags:
                return sensors
            return _member(table, members, user, client_id) if members else None

        def by_client_id(user: str, client_id: str) -> S | None:
            sensors: S | None = table.sensors.get(("", client_id))  # type: ignore[call-overload]  # finds its QuotaTags
            if sensors is not None and sensors.fast:
                return sensors
            return _member(table, members, user, client_id) if members else None

        def by_user(user: str, client_id: str) -> S | None:
            sensors: S | None = table.sensors.get((user, ""))  # type: ignore[call-overload]  # finds its QuotaTags
            if sensors is not None and sensors.fast and sensors.entity is not None:
                return sensors
            return _member(table, members, user, client_id) if members else None

        def by_nothing(user: str, client_id: str) -> S | None:
            return _member(table, members, user, client_id) if members else None

        return (by_names, by_client_id, by_user, by_nothing)[by]

    def for_record(self, user: str, client_id: str, now_ms: int) -> S:
        """The sensor a record of this client goes to (made if none), with a few idle ones dropped first."""
        table = self.table
        if now_ms > table.due_ms:
            table.expire(now_ms, RECORD_EXPIRY_BATCH)
        sensors = self.known(user, client_id)
        if sensors is None:
            resolved = self.resolve(user, client_id)
            sensors = self.of(resolved, user, client_id, now_ms)
            if group_of_tags(resolved.tags) is not None and sensors.fast:  # found by the member's names next time
                if len(self._members) >= MAX_MEMBERS:
                    self._members.clear()
                self._members[(user, client_id)] = sensors
            return sensors
        if now_ms - sensors.moved_ms >= table.step_ms:  # as table.touch finds, without the call for most records
            table.touch(sensors, now_ms)
        return sensors

    def at(self, resolved: ResolvedQuota, user: str, client_id: str, now_ms: int) -> S:
        """The sensor of ``resolved``'s tags (made if none) holding its limit, after a few idle ones dropped."""
        if now_ms > self.table.due_ms:
            self.table.expire(now_ms, RECORD_EXPIRY_BATCH)
        return self.of(resolved, user, client_id, now_ms)

    def for_remote(self, user: str, client_id: str, now_ms: int) -> S | None:
        """:meth:`at` for a peer's usage of this client (None when no quota applies: a peer's usage of it is not
        kept); a row that named its sensor's tags, as a peer's do, marks the sensor resolved under this version."""
        resolved = self.resolve(user, client_id)
        if resolved.unlimited:
            return None
        sensors = self.at(resolved, user, client_id, now_ms)
        if sensors.tags == (user, client_id):
            sensors.resolved_version = self.version
        return sensors

    def of(self, resolved: ResolvedQuota, user: str, client_id: str, now_ms: int) -> S:
        """The sensor of ``resolved``'s tags, made if none (room made by an eviction when the table is full),
        holding ``resolved``'s limit."""
        table = self.table
        sensors = table.sensors.get(resolved.tags)
        if sensors is None:
            full = len(table.sensors) >= self.max_tracked_entities and overflow_tags(resolved) is not None
            if full:  # else the table has room, or the quota names the entity in full: always tracked
                self._evict(now_ms)
            sensors = self.sensors_class(resolved, self.window, user, client_id, now_ms)
            sensors.carry(self.debts.remaining_ms(resolved.tags, now_ms), now_ms, full)
            table.add(sensors, now_ms)
        else:
            if sensors.limit != resolved.limit or sensors.entity is not resolved.entity:
                sensors.apply(resolved)
                table.represent(sensors, (user, client_id))  # one that resolves to these tags now
            table.touch(sensors, now_ms)
        if not sensors.fast and sensors.shadow == resolved.shadow and sensors.representative == (user, client_id):
            sensors.fast = True  # it holds what the representative resolves to: a record may skip resolving (known)
        return sensors

    def _evict(self, now_ms: int) -> None:
        """Room for a new entity in the full table: one not recorded since it was last moved goes (made and never
        used again first: a flood's one-off names), its debt carried in the sketch."""
        victim = self.table.evict(now_ms, EVICTION_SCAN)
        if victim is not None:
            self.overflowed += 1
            self.debts.add(victim.tags, victim.paid_off_ms(now_ms), now_ms)

    # -- the quota table -----------------------------------------------------------------------------------------

    def update_quotas(self, quotas: QuotaLookup, now_ms: Callable[[], int]) -> None:
        """Swap in a new quota table; the sensors it reaches take their new limit now (``updateQuotaMetricConfigs``).

        A client whose tags change under the new table (a new ``/users/alice/clients/etl`` entry, or a deleted one
        whose clients fall back to ``/users/alice``) moves to a sensor of its new tags, made now (at ``now_ms()``)
        if it has none, so the limit reported is the one that applies. The old sensor keeps the quota its tags still
        carry (other clients may count in it: Kafka's ``quotaLimit(metricTags)``), or has none (none is reported)
        and is left to expire with its counters.

        Only the sensors the changed entities can reach are looked at when the table says what changed
        (:meth:`QuotaTable.changes_since`): a named user's entry reaches the sensors of that user, a named
        client-id's (alone or under ``<default>`` users) those of that client-id; a default for every user or every
        client-id reaches every sensor, as does a table made from scratch. Cost: O(min(changed, sensors)).
        """
        changed = quotas.changes_since(self.quotas)
        self.quotas = quotas
        self.version += 1  # every sensor's tags resolve again before a peer's row skips resolving
        self._members.clear()  # every member resolves again
        self._known_by = known_by(quotas.tag_parts(self.quota_key))
        self.known = self._known_for(self._known_by)  # type: ignore[method-assign,assignment]
        sensors_by_tags = self.table.sensors
        if changed is None or len(changed) >= len(sensors_by_tags):  # looking at every sensor costs less then
            reached = list(sensors_by_tags.values())
        else:
            reached = self._reached_by(changed)
        self.refreshed += len(reached)
        moved: list[tuple[ResolvedQuota, tuple[str, str]]] = []
        for sensors in reached:
            resolved = quotas.resolve(self.quota_key, *sensors.representative)
            if resolved.tags != sensors.tags:
                moved.append((resolved, sensors.representative))
                resolved = quotas.resolve(self.quota_key, *sensors.tags)  # a client named as the tags are
            if resolved.tags == sensors.tags:
                sensors.apply(resolved)  # and no longer fast: a record re-resolves it once
            else:
                sensors.retire()
        if moved:
            now = now_ms()
            for resolved, (user, client_id) in moved:
                if not resolved.unlimited and resolved.tags not in self.table.sensors:  # at most one per old sensor
                    self.table.add(self.sensors_class(resolved, self.window, user, client_id, now), now)
        # A record trusts a stored limit only while fast: what a change reaches was refreshed (made slow) above.

    def _reached_by(self, changed: Iterable[QuotaEntity]) -> list[S]:
        """The sensors whose representative (or tags) an entity of ``changed`` can match."""
        tags = self.table.reach.reached_by(changed)
        sensors_by_tags = self.table.sensors
        if tags is None:
            return list(sensors_by_tags.values())
        found = (sensors_by_tags.get(t) for t in tags)
        return [sensors for sensors in found if sensors is not None]

    # -- expiry and views ----------------------------------------------------------------------------------------

    def expire(self, now_ms: int, limit: int | None = None) -> int:
        """Drop sensors with no record for longer than the expiration (at most ``limit`` of them, the oldest
        first); returns how many were dropped."""
        return self.table.expire(now_ms, limit)

    def snapshot(self) -> list[S]:
        """Every live sensor, as a list made at once (a scrape may read it from another thread)."""
        return snapshot(self.table.sensors)

    def top(self, n: int, now_ms: int, pause: Callable[[], None] = no_pause) -> tuple[list[S], EntityStats | None]:
        """The ``n - 1`` busiest sensors (by value recorded) and the rest summed as one (None when nothing is left
        over; every sensor when there are ``n`` or fewer). Changes nothing (:mod:`quota.primitives.top`)."""
        sensors = snapshot(self.table.sensors)
        top = busiest(sensors, n, attrgetter("value_total"), pause)
        if top is None:
            return sensors, None
        other = summed_stats(others(sensors, top, pause), now_ms, self.window.span_ms)
        release(sensors, pause)
        return top, other


def _member(table: SensorTable[S], members: dict[tuple[str, str], S], user: str, client_id: str) -> S | None:
    """A quota group's member: its group's sensor, while that one lives (the end of :meth:`SensorKeeper.known`)."""
    sensors = members.get((user, client_id))
    if sensors is not None and sensors.fast and table.sensors.get(sensors.tags) is sensors:
        return sensors
    return None
