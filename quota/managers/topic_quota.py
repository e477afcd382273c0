"""Byte-rate quotas per topic (``entity: {topic: ...}``), as a pure object: one manager per quota key, each
Kafka's sampled rate per topic (:class:`~quota.managers.client_quota.ClientQuotaManager` over a
:class:`~quota.primitives.topic_quotas.TopicQuotaTable`).

``producer_byte_rate`` counts the record bytes a Produce writes to the topic (every partition's ``records``);
``consumer_byte_rate`` the record bytes a Fetch answer carries from it. Over quota the throttle is Kafka's,
``(rate - limit) / limit * window``, from the same window settings as the client quotas, capped as theirs are; a
request that writes several topics is given the longest of their throttles (and of its client quota's: the proxy
combines them).

Only a topic with a quota (its own entry, or ``<default>``) is recorded: a name no entry covers leaves nothing
behind, and names a client makes up under ``<default>`` are bounded by ``quota.max.tracked.entities`` as
``<default>`` client ids are (a full table evicts the topic used least lately, its debt kept; a topic made while
the table is full starts at its limit, with no fresh burst).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from quota.managers.client_quota import ClientQuotaManager
from quota.primitives.clock import Clock
from quota.primitives.decision import FORWARD, Decision
from quota.primitives.entity import CONSUMER_BYTE_RATE, DEFAULT, PRODUCER_BYTE_RATE, ResolvedQuota
from quota.primitives.rate import QuotaWindow
from quota.primitives.sensor import ClientSensors, EntityStats, summed_stats
from quota.primitives.topic_quotas import TopicEntity, TopicQuotaTable


class TopicQuotaManager(ClientQuotaManager):
    """One topic quota key's sensors and decisions. A topic is counted as the client id of an anonymous client
    (``("", topic)``: :mod:`quota.primitives.topic_quotas`); these methods say so once, for every caller.
    ``rejected``: per metric label, the partitions and record bytes :meth:`admit` refused; ``shadow_rejected``,
    those a shadow entry would have refused."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.rejected: dict[str, tuple[int, int]] = {}
        self.shadow_rejected: dict[str, tuple[int, int]] = {}

    def resolve_topic(self, topic: str) -> ResolvedQuota:
        return self.resolve("", topic)

    def record_topic(self, topic: str, nbytes: float, now_ms: int | None = None) -> Decision:
        """Record ``nbytes`` of ``topic`` and decide (:meth:`record_and_decide`); a topic no quota covers is not
        recorded at all (no sensor is made for it)."""
        if self.keeper.known("", topic) is None and self.resolve("", topic).unlimited:
            return FORWARD
        return self.record_and_decide("", topic, nbytes, now_ms)

    def rejecting(self, topic: str) -> bool:
        """Whether an over-quota write to ``topic`` is refused rather than throttled: its ``producer_byte_rate``
        entry says ``on_exceed: reject`` and is enforced (neither it nor the proxy in shadow mode)."""
        return self._rejects(topic) and not self._shadowed(topic)

    def shadow_rejecting(self, topic: str) -> bool:
        """Whether ``topic``'s entry says ``on_exceed: reject`` in shadow mode (its own, or the proxy's): what it
        would refuse is counted (:meth:`admit` with ``shadow``), nothing refused."""
        return self._rejects(topic) and self._shadowed(topic)

    def _rejects(self, topic: str) -> bool:
        table = self.quotas
        return isinstance(table, TopicQuotaTable) and table.rejects(topic)

    def _shadowed(self, topic: str) -> bool:
        return self.shadow or self.resolve_topic(topic).shadow

    def admit(
        self, topic: str, sizes: Sequence[int], now_ms: int | None = None, shadow: bool = False
    ) -> tuple[bool, ...]:
        """``on_exceed: reject``: which partitions of one Produce to ``topic`` (their record bytes, in request
        order) are written. A partition is admitted while the topic is within its quota, as KIP-599's strict mode
        admits a mutation while its bucket has tokens: the one that takes the topic past its quota goes through,
        the ones after it are refused until the measured rate is back under the quota (so a batch larger than the
        quota still goes through, once). Admitted bytes are recorded, with no throttle; refused ones are counted by
        label (:attr:`rejected`), not recorded: nothing of them is written. ``shadow``: what would be refused is
        counted in :attr:`shadow_rejected` and nothing recorded (the caller records every byte, all written)."""
        now = self._now(now_ms)
        room = self.headroom(topic, now)
        admitted: list[bool] = []
        taken = refused_bytes = 0
        for size in sizes:
            ok = room > 0 or size == 0
            admitted.append(ok)
            if ok:
                room -= size
                taken += size
            else:
                refused_bytes += size
        if taken and not shadow:
            self.record_no_throttle("", topic, taken, now)
        if refused_bytes or not all(admitted):
            counts = self.shadow_rejected if shadow else self.rejected
            label = self.label(topic) or DEFAULT
            partitions, nbytes = counts.get(label, (0, 0))
            counts[label] = (partitions + admitted.count(False), nbytes + refused_bytes)
        return tuple(admitted)

    def label(self, topic: str) -> str | None:
        """The topic as metrics and the usage log name it: its name when its own entry sets this quota, else
        :data:`DEFAULT` (so a label's values are bounded by the configuration, whatever topics clients name); None
        when no quota covers it."""
        entity = self.resolve("", topic).entity
        return entity.topic if isinstance(entity, TopicEntity) else None

    def headroom(self, topic: str, now_ms: int | None = None) -> float:
        """What ``topic`` may still take now without a throttle (``math.inf`` when no quota covers it)."""
        return self.remaining_in_quota_window("", topic, now_ms)

    def stats_for_topic(self, topic: str, now_ms: int | None = None) -> EntityStats | None:
        return self.stats_for("", topic, now_ms)

    def grouped_stats(self, now_ms: int | None = None) -> list[tuple[str, EntityStats, float]]:
        """``(label, stats, limit)`` per topic with its own entry and one for every topic under ``<default>``
        together (their counters summed, no rate: measuring each would make a scrape grow with the topics), for
        metrics whose labels the configuration bounds. Off the request path."""
        now = self._now(now_ms)
        own: list[tuple[str, EntityStats, float]] = []
        defaults: list[ClientSensors] = []
        for sensors in self.keeper.snapshot():
            entity = sensors.entity
            if not isinstance(entity, TopicEntity):
                continue  # retired: no quota counts in it any more
            if entity.topic == DEFAULT:
                defaults.append(sensors)
            else:
                own.append((entity.topic, sensors.stats(now), sensors.limit))
        if defaults:
            summed = summed_stats([defaults], now, self.window.span_ms)
            own.append((DEFAULT, summed, self.quotas.resolve(self.quota_key, "", DEFAULT).limit))
        return own

    def __repr__(self) -> str:
        return f"TopicQuotaManager(quota_key={self.quota_key!r}, topics={len(self.keeper)})"


class TopicQuotas:
    """The topic quotas of one proxy: ``produce`` (``producer_byte_rate``) and ``fetch`` (``consumer_byte_rate``)."""

    __slots__ = ("produce", "fetch", "table")

    def __init__(
        self, table: TopicQuotaTable, clock: Clock, window: QuotaWindow, max_throttle_time_ms: int, max_tracked: int
    ) -> None:
        self.table = table
        cap = max_tracked
        self.produce = TopicQuotaManager(
            table, PRODUCER_BYTE_RATE, clock, window, max_throttle_time_ms, max_tracked_entities=cap
        )
        self.fetch = TopicQuotaManager(
            table, CONSUMER_BYTE_RATE, clock, window, max_throttle_time_ms, max_tracked_entities=cap
        )

    @property
    def enabled(self) -> bool:
        return self.produce.enabled or self.fetch.enabled

    def update(self, table: TopicQuotaTable) -> None:
        self.table = table
        self.produce.update_quotas(table)
        self.fetch.update_quotas(table)

    def set_shadow(self, shadow: bool) -> None:
        self.produce.shadow = self.fetch.shadow = shadow

    def set_smoothing(self, on: bool) -> None:
        self.produce.smoothing = self.fetch.smoothing = on

    def expire_idle(self, limit: int | None = None) -> int:
        return self.produce.expire_idle_sensors(limit=limit) + self.fetch.expire_idle_sensors(limit=limit)
