"""Byte-rate quotas per topic (``entity: {topic: ...}``), as a pure object: one manager per quota key, each
Kafka's sampled rate per topic (:class:`~quota.managers.client_quota.ClientQuotaManager` over a
:class:`~quota.primitives.topic_quotas.TopicQuotaTable`).

``producer_byte_rate`` counts the record bytes a Produce writes to the topic (every partition's ``records``);
``consumer_byte_rate`` the record bytes a Fetch answer carries from it. Over quota the throttle is Kafka's,
``(rate - limit) / limit * window``, from the same window settings as the client quotas, capped as theirs are; a
request that writes several topics is given the longest of their throttles (and of its client quota's: the proxy
combines them).

Partition quotas (``{topic: NAME, partition: N|<default>}``) are the same measurement per partition
(:class:`PartitionQuotaManager`), beside the topic's: a request is given the longest throttle of its client's, its
topics' and its partitions' quotas.

Only a topic with a quota (its own entry, or ``<default>``) is recorded: a name no entry covers leaves nothing
behind, and names a client makes up under ``<default>`` are bounded by ``quota.max.tracked.entities`` as
``<default>`` client ids are (a full table evicts the topic used least lately, its debt kept; a topic made while
the table is full starts at its limit, with no fresh burst).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Generic, TypeVar

from quota.managers.client_quota import ClientQuotaManager
from quota.primitives.clock import Clock
from quota.primitives.decision import FORWARD, Decision
from quota.primitives.entity import CONSUMER_BYTE_RATE, DEFAULT, PRODUCER_BYTE_RATE, QuotaEntity, ResolvedQuota
from quota.primitives.partition_quotas import PartitionQuotaView
from quota.primitives.rate import QuotaWindow
from quota.primitives.sensor import ClientSensors, EntityStats, summed_stats
from quota.primitives.topic_quotas import PartitionEntity, TopicEntity, TopicQuotaTable

N = TypeVar("N")  # what a quota is per: a topic's name, or (topic, partition)


class NamedRateManager(ClientQuotaManager, Generic[N]):
    """One byte-rate key's sensors and decisions for what is not a client: a topic (:class:`TopicQuotaManager`) or
    a partition (:class:`PartitionQuotaManager`), each counted as a client whose names :meth:`pair` gives; these
    methods say so once, for every caller. ``rejected``: per metric label, the partitions and record bytes
    :meth:`admit` refused; ``shadow_rejected``, those a shadow entry would have refused."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.rejected: dict[str, tuple[int, int]] = {}
        self.shadow_rejected: dict[str, tuple[int, int]] = {}

    def pair(self, name: N) -> tuple[str, str]:
        """The (user, client id) ``name`` is counted as."""
        raise NotImplementedError

    def label_of(self, entity: QuotaEntity | None) -> str | None:
        """The metric label of the entry ``entity`` (None: not one of this manager's, or none)."""
        raise NotImplementedError

    def _rejects(self, name: N) -> bool:
        """Whether the entry that sets ``name``'s ``producer_byte_rate`` says ``on_exceed: reject``."""
        raise NotImplementedError

    def resolve_topic(self, name: N) -> ResolvedQuota:
        return self.resolve(*self.pair(name))

    def record_topic(self, name: N, nbytes: float, now_ms: int | None = None) -> Decision:
        """Record ``nbytes`` of ``name`` and decide (:meth:`record_and_decide`); one no quota covers is not
        recorded at all (no sensor is made for it)."""
        user, client_id = self.pair(name)
        if self.keeper.known(user, client_id) is None and self.resolve(user, client_id).unlimited:
            return FORWARD
        return self.record_and_decide(user, client_id, nbytes, now_ms)

    def rejecting(self, name: N) -> bool:
        """Whether an over-quota write to ``name`` is refused rather than throttled: its ``producer_byte_rate``
        entry says ``on_exceed: reject`` and is enforced (neither it nor the proxy in shadow mode)."""
        return self._rejects(name) and not self._shadowed(name)

    def shadow_rejecting(self, name: N) -> bool:
        """Whether ``name``'s entry says ``on_exceed: reject`` in shadow mode (its own, or the proxy's): what it
        would refuse is counted (:meth:`admit` with ``shadow``), nothing refused."""
        return self._rejects(name) and self._shadowed(name)

    def _shadowed(self, name: N) -> bool:
        return self.shadow or self.resolve_topic(name).shadow

    def admit(self, name: N, sizes: Sequence[int], now_ms: int | None = None, shadow: bool = False) -> tuple[bool, ...]:
        """``on_exceed: reject``: which partitions of one Produce to ``name`` (their record bytes, in request
        order) are written. A partition is admitted while ``name`` is within its quota, as KIP-599's strict mode
        admits a mutation while its bucket has tokens: the one that takes it past its quota goes through, the
        ones after it are refused until the measured rate is back under the quota (so a batch larger than the
        quota still goes through, once). Admitted bytes are recorded, with no throttle; refused ones are counted by
        label (:attr:`rejected`), not recorded: nothing of them is written. ``shadow``: what would be refused is
        counted in :attr:`shadow_rejected` and nothing recorded (the caller records every byte, all written)."""
        now = self._now(now_ms)
        room = self.headroom(name, now)
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
            self.record_no_throttle(*self.pair(name), taken, now)
        if refused_bytes or not all(admitted):
            counts = self.shadow_rejected if shadow else self.rejected
            label = self.label(name) or DEFAULT
            partitions, nbytes = counts.get(label, (0, 0))
            counts[label] = (partitions + admitted.count(False), nbytes + refused_bytes)
        return tuple(admitted)

    def label(self, name: N) -> str | None:
        """``name`` as metrics and the usage log name it: by the entry that sets this quota, so a label's values
        are bounded by the configuration, whatever names clients use; None when no quota covers it."""
        return self.label_of(self.resolve(*self.pair(name)).entity)

    def headroom(self, name: N, now_ms: int | None = None) -> float:
        """What ``name`` may still take now without a throttle (``math.inf`` when no quota covers it)."""
        return self.remaining_in_quota_window(*self.pair(name), now_ms)

    def stats_for_topic(self, name: N, now_ms: int | None = None) -> EntityStats | None:
        return self.stats_for(*self.pair(name), now_ms)

    def grouped_stats(self, now_ms: int | None = None) -> list[tuple[str, EntityStats, float]]:
        """``(label, stats, limit)`` per entry that names its topic (or partition) in full, and one per
        ``<default>`` entry for everything under it together (their counters summed, no rate: measuring each would
        make a scrape grow with the names clients use), for metrics whose labels the configuration bounds. Off the
        request path."""
        now = self._now(now_ms)
        own: list[tuple[str, EntityStats, float]] = []
        defaults: dict[str, list[ClientSensors]] = {}
        for sensors in self.keeper.snapshot():
            label = self.label_of(sensors.entity)
            if label is None:
                continue  # retired: no quota counts in it any more
            if sensors.entity is not None and DEFAULT in (sensors.entity.user, sensors.entity.client_id):
                defaults.setdefault(label, []).append(sensors)
            else:
                own.append((label, sensors.stats(now), sensors.limit))
        for label, group in defaults.items():
            own.append((label, summed_stats([group], now, self.window.span_ms), group[0].limit))
        return own

    def __repr__(self) -> str:
        return f"{type(self).__name__}(quota_key={self.quota_key!r}, tracked={len(self.keeper)})"


class TopicQuotaManager(NamedRateManager[str]):
    """One topic quota key's sensors and decisions. A topic is counted as the client id of an anonymous client
    (``("", topic)``: :mod:`quota.primitives.topic_quotas`); its label is its name when its own entry sets the
    quota, else :data:`DEFAULT`."""

    def pair(self, name: str) -> tuple[str, str]:
        return ("", name)

    def label_of(self, entity: QuotaEntity | None) -> str | None:
        return entity.topic if isinstance(entity, TopicEntity) else None

    # A Produce's path calls these for each topic it writes: ("", name) written out rather than built by pair(),
    # a call less each (the partition quotas' go through pair()).

    def record_topic(self, name: str, nbytes: float, now_ms: int | None = None) -> Decision:
        if self.keeper.known("", name) is None and self.resolve("", name).unlimited:
            return FORWARD
        return self.record_and_decide("", name, nbytes, now_ms)

    def label(self, name: str) -> str | None:
        entity = self.resolve("", name).entity
        return entity.topic if isinstance(entity, TopicEntity) else None

    def _rejects(self, name: str) -> bool:
        table = self.quotas
        return isinstance(table, TopicQuotaTable) and table.rejects(name)


class PartitionQuotaManager(NamedRateManager[tuple[str, int]]):
    """One partition quota key's sensors and decisions (``{topic: NAME, partition: N|<default>}``): a partition
    ``(topic, index)`` is counted as the client ``(topic, "index")`` (:mod:`quota.primitives.partition_quotas`); its
    label is ``topic/index`` when its own entry sets the quota, else ``topic/<default>`` (one per topic with such an
    entry: bounded by the configuration)."""

    def pair(self, name: tuple[str, int]) -> tuple[str, str]:
        return (name[0], str(name[1]))

    def label_of(self, entity: QuotaEntity | None) -> str | None:
        return f"{entity.topic}/{entity.partition}" if isinstance(entity, PartitionEntity) else None

    def _rejects(self, name: tuple[str, int]) -> bool:
        view = self.quotas
        return isinstance(view, PartitionQuotaView) and view.rejects(name[0], str(name[1]))


class TopicQuotas:
    """The topic quotas of one proxy: ``produce`` (``producer_byte_rate``) and ``fetch`` (``consumer_byte_rate``)
    per topic, and ``partition_produce`` and ``partition_fetch`` per partition, all from one table."""

    __slots__ = (
        "produce",
        "fetch",
        "partition_produce",
        "partition_fetch",
        "table",
        "produce_enabled",
        "fetch_enabled",
    )

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
        view = PartitionQuotaView(table)
        self.partition_produce = PartitionQuotaManager(
            view, PRODUCER_BYTE_RATE, clock, window, max_throttle_time_ms, max_tracked_entities=cap
        )
        self.partition_fetch = PartitionQuotaManager(
            view, CONSUMER_BYTE_RATE, clock, window, max_throttle_time_ms, max_tracked_entities=cap
        )
        self._enabled()

    @property
    def managers(self) -> tuple[NamedRateManager[Any], ...]:
        return (self.produce, self.fetch, self.partition_produce, self.partition_fetch)

    @property
    def enabled(self) -> bool:
        return self.produce_enabled or self.fetch_enabled

    def _enabled(self) -> None:
        """``produce_enabled`` and ``fetch_enabled``: whether a Produce's (a Fetch answer's) record bytes are charged
        to a topic or a partition quota; attributes, read by every Produce and Fetch, set when the table changes."""
        self.produce_enabled = self.produce.enabled or self.partition_produce.enabled
        self.fetch_enabled = self.fetch.enabled or self.partition_fetch.enabled

    def update(self, table: TopicQuotaTable) -> None:
        self.table = table
        self.produce.update_quotas(table)
        self.fetch.update_quotas(table)
        view = PartitionQuotaView(table)
        self.partition_produce.update_quotas(view)
        self.partition_fetch.update_quotas(view)
        self._enabled()

    def set_shadow(self, shadow: bool) -> None:
        for manager in self.managers:
            manager.shadow = shadow

    def set_smoothing(self, on: bool) -> None:
        for manager in self.managers:
            manager.smoothing = on

    def expire_idle(self, limit: int | None = None) -> int:
        return sum(manager.expire_idle_sensors(limit=limit) for manager in self.managers)
