"""Request-rate quotas (``request_rate``): requests per second of the APIs an operator lists, per client entity and
per consumer group, as a pure object.

Kafka's own request quota (``request_percentage``, KIP-124) is a share of the broker's request-handler threads'
time, which a proxy cannot see; what it can count is requests. ``request_rate`` counts one for each request of an
API in ``quota.request.rate.apis`` (default: JoinGroup, SyncGroup, OffsetCommit, Metadata, FindCoordinator,
ListOffsets), in Kafka's sampled rate over the quota window (``quota.window.num`` samples of
``quota.window.size.seconds``), with Kafka's throttle from the overshoot, ``(rate - limit) / limit * window``:

* ``clients``: per ``(user, client-id)`` entity with the same eight-level precedence as the byte rates
  (:mod:`quota.primitives.entity`); a ``<default>`` user quota is shared by every client id of the user, so
  rotating client ids escapes nothing;
* ``groups``: per ``{group: NAME | <default>}`` entity (:mod:`quota.primitives.group_quotas`) for a request that
  names a group: every member's JoinGroup counts against its group, whoever sends it.

A request meeting both is given the longer throttle. The throttle (and the mute of a client that ignores it) is
bounded by ``quota.request.rate.max.throttle.ms`` (and ``quota.mute.max.ms``), as Kafka bounds its request quota's
throttle at one window (``ClientRequestQuotaManager.maxThrottleTimeMs``): a muted connection also carries the
member's heartbeats, so the bound must stay below the consumers' ``session.timeout.ms``. Heartbeat, LeaveGroup and
the group heartbeats of KIP-848 and after are never counted (:mod:`config.request_rate` refuses to list them):
throttling them evicts members (redpanda#10141).

The sensors are the byte-rate manager's (:class:`~quota.managers.client_quota.ClientQuotaManager`): bounded by
``quota.max.tracked.entities``, past which a new ``<default>`` entity evicts one unused lately, its debt kept.
"""

from __future__ import annotations

from quota.managers.client_quota import ClientQuotaManager
from quota.primitives.clock import Clock
from quota.primitives.decision import FORWARD, Decision
from quota.primitives.entity import DEFAULT, REQUEST_RATE
from quota.primitives.group_quotas import GroupEntity, GroupQuotaTable
from quota.primitives.quota_table import QuotaTable
from quota.primitives.rate import QuotaWindow
from quota.primitives.sensor import ClientSensors, EntityStats, summed_stats


class RequestRateQuotas:
    """``clients`` (``request_rate`` per user/client-id) and ``groups`` (per group id); ``api_keys``: the APIs whose
    requests count, and ``counted``: those of them a request-rate quota counts now (none while no entry sets one: a
    request of any API costs one set lookup then). Every method takes an optional ``now_ms``; without it the
    injected clock is read."""

    __slots__ = ("clients", "groups", "group_table", "api_keys", "counted")

    def __init__(
        self,
        table: QuotaTable,
        groups: GroupQuotaTable,
        api_keys: frozenset[int],
        clock: Clock,
        window: QuotaWindow,
        max_throttle_time_ms: int,
        max_tracked: int,
    ) -> None:
        self.api_keys = api_keys
        self.group_table = groups
        self.clients = ClientQuotaManager(
            table, REQUEST_RATE, clock, window, max_throttle_time_ms, max_tracked_entities=max_tracked
        )
        self.groups = ClientQuotaManager(
            groups, REQUEST_RATE, clock, window, max_throttle_time_ms, max_tracked_entities=max_tracked
        )
        self.counted = self._counted()

    def _counted(self) -> frozenset[int]:
        return self.api_keys if self.clients.enabled or self.groups.enabled else frozenset()

    def record_client(self, user: str, client_id: str, now_ms: int | None = None) -> Decision:
        """One request of this client recorded, and the decision (:data:`FORWARD` when no quota applies)."""
        if not self.clients.enabled:
            return FORWARD
        return self.clients.record_and_decide(user, client_id, 1, now_ms)

    def record_group(self, group: str, now_ms: int | None = None) -> Decision:
        """One request naming ``group`` recorded, and the decision; a group no quota covers is not recorded at all
        (no sensor is made for it)."""
        groups = self.groups
        if not groups.enabled or (groups.keeper.known("", group) is None and groups.resolve("", group).unlimited):
            return FORWARD
        return groups.record_and_decide("", group, 1, now_ms)

    def group_label(self, group: str) -> str | None:
        """The group as metrics and the usage log name it: its name when its own entry sets the quota, else
        :data:`DEFAULT` (bounded by the configuration, whatever names clients make up); None when none covers it."""
        entity = self.groups.resolve("", group).entity
        return None if not isinstance(entity, GroupEntity) else entity.group

    def group_stats(self, now_ms: int | None = None) -> list[tuple[str, EntityStats, float]]:
        """``(label, stats, limit)`` per group with its own entry, and one for every group under ``<default>``
        together (counters summed, no rate), for metrics whose labels the configuration bounds. Off the request path."""
        groups = self.groups
        now = groups._now(now_ms)
        own: list[tuple[str, EntityStats, float]] = []
        defaults: list[ClientSensors] = []
        for sensors in groups.keeper.snapshot():
            entity = sensors.entity
            if isinstance(entity, GroupEntity):  # else retired: no quota counts in it any more
                if entity.group == DEFAULT:
                    defaults.append(sensors)
                else:
                    own.append((entity.group, sensors.stats(now), sensors.limit))
        if defaults:
            default_limit = groups.quotas.resolve(REQUEST_RATE, "", DEFAULT).limit
            own.append((DEFAULT, summed_stats([defaults], now, groups.window.span_ms), default_limit))
        return own

    def update_clients(self, table: QuotaTable) -> None:
        """A new client quota table (the dynamic config changed): live sensors take their new limits at once."""
        self.clients.update_quotas(table)
        self.counted = self._counted()

    def reconfigure(self, groups: GroupQuotaTable, api_keys: frozenset[int]) -> None:
        """New group quotas and APIs counted (a new configuration); live sensors take their new limits at once (looked
        at only when the group table is a new one: a config-topic record for another entity keeps it)."""
        self.api_keys = api_keys
        if groups is not self.group_table:
            self.group_table = groups
            self.groups.update_quotas(groups)
        self.counted = self._counted()

    def set_shadow(self, shadow: bool) -> None:
        self.clients.shadow = self.groups.shadow = shadow

    def expire_idle(self, limit: int | None = None) -> int:
        return self.clients.expire_idle_sensors(limit=limit) + self.groups.expire_idle_sensors(limit=limit)
