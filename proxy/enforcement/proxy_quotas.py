"""Every quota manager of a running proxy (byte rates, controller mutations, producer ids, volume usage).

The managers live in ``quota/`` and are pure; :class:`ProxyQuotas` builds them from the configuration with the real
clock, switches them between shadow and enforce, swaps their tables, expires their idle sensors when the app's
housekeeping asks, and hands each port the :class:`~proxy.enforcement.quota_managers.QuotaManagers` record its
connections consult (:meth:`ProxyQuotas.for_broker`, :attr:`ProxyQuotas.home`). Prometheus reads them through
:mod:`proxy.ops.quota_metrics`, when it scrapes, never on the request path.
"""

from __future__ import annotations

import logging
from typing import Protocol

from config.model import ProxyConfig
from config.request_rate import api_keys
from proxy.enforcement.quota_managers import QuotaManagers, QuotaMode
from proxy.enforcement.quota_sets import BOOTSTRAP, BROKER, QuotaSet
from proxy.enforcement.shadow_throttles import ShadowThrottles
from proxy.ground.clock import SystemClock, WallClock
from quota.managers.mutation import ControllerMutationQuotaManager
from quota.managers.request_rate import RequestRateQuotas
from quota.managers.topic_quota import TopicQuotas
from quota.primitives.entity import (
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    PRODUCER_BYTE_RATE,
    PRODUCER_IDS_RATE,
    REQUEST_RATE,
)
from quota.primitives.group_quotas import GROUP_REQUEST_RATE
from quota.primitives.held_bytes import HeldBytes
from quota.primitives.quota_table import QuotaTable
from quota.primitives.rate import QuotaWindow
from quota.primitives.topic_quotas import (
    PARTITION_CONSUMER_BYTE_RATE,
    PARTITION_PRODUCER_BYTE_RATE,
    TOPIC_CONSUMER_BYTE_RATE,
    TOPIC_PRODUCER_BYTE_RATE,
)


class Overflowing(Protocol):
    """A table ``quota.max.tracked.entities`` bounds: how many records it counted in its ``<overflow>`` entity."""

    @property
    def overflowed(self) -> int: ...


log = logging.getLogger(__name__)

OVERFLOW_LOG_INTERVAL_MS = 60_000
"""At most one warning a minute while new entities overflow full sensor tables (``note_overflow``)."""


class ProxyQuotas:
    """``produce`` (producer_byte_rate, request bytes), ``fetch`` (consumer_byte_rate, response bytes),
    ``producer_ids`` (producer_ids_rate), ``mutations`` (controller_mutation_rate, partitions created or deleted)
    and ``topics`` (producer_byte_rate and consumer_byte_rate per topic, record bytes).

    ``produce``, ``fetch`` and ``producer_ids`` are the bootstrap ports' and sidecar listeners' :class:`QuotaSet`
    (every port's, under ``quota.scope: cluster``; :attr:`home` is their ports' record); under ``quota.scope:
    broker`` in cluster mode each broker has its own, whose ports get the record :meth:`for_broker` makes. The
    mutation bucket, the volume throttle and the shadow bookkeeping are one per proxy."""

    def __init__(self, config: ProxyConfig, clock=None) -> None:
        settings = config.settings
        self.window = QuotaWindow(settings.quota_window_num, settings.quota_window_size_seconds)
        mute_max = settings.quota_mute_max_ms
        self.mute_max_ms = mute_max
        self.clock = clock or SystemClock()
        self._settings = settings
        self._table = config.quotas
        self.mode = QuotaMode(shadow=settings.quota_mode == "shadow")
        # quota.scope broker with a cluster-mode listener: one set per broker port's broker (else one set in all)
        self.per_broker = settings.quota_scope == BROKER and any(lc.cluster_mode for lc in config.listeners)
        self.home_set = QuotaSet(config.quotas, settings, self.clock, self.window, self.mode.shadow)
        self.produce, self.fetch, self.producer_ids = (
            self.home_set.produce,
            self.home_set.fetch,
            self.home_set.producer_ids,
        )
        self._brokers: dict[int, tuple[QuotaSet, QuotaManagers]] = {}  # swapped whole (the scrape thread reads it)
        self.mutation_window = QuotaWindow(
            settings.controller_quota_window_num, settings.controller_quota_window_size_seconds
        )
        self.mutations = ControllerMutationQuotaManager(
            config.quotas,
            self.clock,
            self.mutation_window,
            mute_max,
            max_tracked_entities=settings.quota_max_tracked_entities,
        )
        # other tables bounded by quota.max.tracked.entities: (quota key, what has .overflowed): the app's per-IP rates
        self.overflow_sources: list[tuple[str, Overflowing]] = []
        self.metadata_max_age_ms = settings.controller_quota_metadata_max_age_ms
        self.offset_metadata_max_bytes = settings.offset_metadata_max_bytes  # OffsetCommit metadata, per partition
        # bytes of Produce requests held for their new producer ids (KIP-936 hold): per connection and in this process
        self.held_bytes = HeldBytes(settings.connections_max_held_request_bytes, settings.max_held_request_bytes)
        self.max_metric_entities = settings.quota_metrics_max_entities
        self.volume = None  # cluster volume usage (proxy.enforcement.volume_throttle.VolumeThrottle), when configured
        if config.volume_usage is not None:
            from proxy.enforcement.volume_throttle import VolumeThrottle

            # snapshots are dated in wall time (they cross hosts); a test's fake clock stands for both
            self.volume = VolumeThrottle(
                config.volume_usage,
                config.quotas,
                self.clock,
                self.window,
                mute_max,
                wall=WallClock() if clock is None else self.clock,
            )
        # The proxy's own topics (volume usage, dynamic config, cluster usage): produce to them alone is exempt from
        # every quota and from PAUSE, so the proxy never throttles or pauses what it publishes itself.
        self.internal_topics: frozenset[str] = frozenset(
            ([config.volume_usage.topic] if config.volume_usage is not None else [])
            + ([config.dynamic_config.topic] if config.dynamic_config is not None else [])
            + ([settings.quota_cluster_topic] if settings.quota_cluster_topic is not None else [])
        )
        # producer_byte_rate and consumer_byte_rate per topic ({topic: ...} entities): one per proxy, every port's
        self.topics = TopicQuotas(
            config.topic_quotas, self.clock, self.window, mute_max, settings.quota_max_tracked_entities
        )
        # request_rate per client entity and per group ({group: ...} entities): one per proxy, every port's
        self.requests = RequestRateQuotas(
            config.quotas,
            config.group_quotas,
            api_keys(settings.quota_request_rate_apis),
            self.clock,
            self.window,
            min(settings.quota_request_rate_max_throttle_ms, mute_max),
            settings.quota_max_tracked_entities,
        )
        self.shadows = ShadowThrottles(self.clock)  # computed, not applied: counted and logged
        self.home = self._record(self.home_set)  # the bootstrap ports' and sidecar listeners' record
        self._overflow_seen: dict[tuple[str, str], int] = {}  # (quota, broker) -> overflowed at the last look
        self._overflow_logged_ms = -OVERFLOW_LOG_INTERVAL_MS
        self.set_mode(settings.quota_mode)
        self.set_smoothing(settings.quota_smoothing)

    def set_smoothing(self, smoothing: str) -> None:
        """``on``: producer_byte_rate and consumer_byte_rate throttle from a token bucket per entity (short, frequent
        delays; :mod:`quota.primitives.smoothing`), in every set; ``off``: Kafka's sampled-rate throttle. Takes effect at the
        next record."""
        self.mode.smoothing = smoothing == "on"
        for _, quota_set in self.quota_sets():
            quota_set.set_smoothing(self.mode.smoothing)
        self.topics.set_smoothing(self.mode.smoothing)

    def set_mode(self, mode: str) -> None:
        """``shadow``: every quota of the proxy computed and metered, none applied; ``enforce``: per entry."""
        shadow = mode == "shadow"
        self.mode.shadow = shadow
        for _, quota_set in self.quota_sets():
            quota_set.set_shadow(shadow)
        self.mutations.shadow = shadow
        self.topics.set_shadow(shadow)
        self.requests.set_shadow(shadow)
        if self.volume is not None:
            self.volume.produce.shadow = self.volume.refused.shadow = shadow

    def apply(self, config: ProxyConfig) -> None:
        """A new effective configuration (the dynamic config changed): the mode and every table, in one step of
        the event loop, so no request sees half of it."""
        self.set_mode(config.settings.quota_mode)
        self.set_smoothing(config.settings.quota_smoothing)
        self.update(config.quotas)
        if config.topic_quotas is not self.topics.table:
            self.topics.update(config.topic_quotas)
        self.requests.reconfigure(config.group_quotas, api_keys(config.settings.quota_request_rate_apis))

    @property
    def table(self) -> QuotaTable:
        """The client quota table in force (with its quota groups)."""
        return self._table

    def update(self, table: QuotaTable) -> None:
        """Swap in a new quota table (dynamic config); live sensors take the new limits at once."""
        self._table = table
        for _, quota_set in self.quota_sets():
            quota_set.update(table)
        self.mutations.update_quotas(table)
        self.requests.update_clients(table)
        if self.volume is not None:
            self.volume.update_quotas(table)

    def expire_idle(self, limit: int | None = None) -> int:
        """Sensors idle for an hour dropped from every set and the mutation quota (the app's housekeeping), at most
        ``limit`` per manager (the housekeeping calls again while this drops any, between other work of the loop);
        returns how many were dropped."""
        return (
            sum(quota_set.expire_idle(limit) for _, quota_set in self.quota_sets())
            + self.mutations.expire_idle_sensors(limit=limit)
            + self.topics.expire_idle(limit)
            + self.requests.expire_idle(limit)
        )

    def note_overflow(self, interval_ms: int = OVERFLOW_LOG_INTERVAL_MS) -> str | None:
        """A warning, at most once per ``interval_ms``, while new entities find their tables full
        (``quota.max.tracked.entities``): how many were evicted (or, producer-id users, overflowed) since the last one.
        Returns the line logged (None when none was). Called by the housekeeping."""
        now = self.clock.now_ms()
        if now - self._overflow_logged_ms < interval_ms:
            return None
        counts = self.overflow_counts()
        grown = {key: n - self._overflow_seen.get(key, 0) for key, n in counts.items()}
        self._overflow_seen = counts
        grown = {key: n for key, n in grown.items() if n > 0}
        if not grown:
            return None
        self._overflow_logged_ms = now
        where = ", ".join(
            f"{key}{' broker ' + broker if broker else ''}: {n}" for (key, broker), n in sorted(grown.items())
        )
        line = (
            f"quota.max.tracked.entities ({self._settings.quota_max_tracked_entities}) reached ({where}): "
            f"room made for new entities by evicting unused and idle ones, what they used carried over "
            f"(producer ids: new users counted together in the <overflow> user); tenants in use keep their own"
        )
        log.warning("%s", line)
        return line

    def overflow_counts(self) -> dict[tuple[str, str], int]:
        """(quota key, broker label) -> records counted in that quota's ``<overflow>`` entity so far, for every table
        ``quota.max.tracked.entities`` bounds: byte rates and producer ids per set, the volume-scaled produce quota,
        the mutation buckets, and :attr:`overflow_sources` (the per-IP connection rates)."""
        counts = {}
        for broker, quota_set in self.quota_sets():
            for key, manager in (
                (PRODUCER_BYTE_RATE, quota_set.produce),
                (CONSUMER_BYTE_RATE, quota_set.fetch),
                (PRODUCER_IDS_RATE, quota_set.producer_ids),
            ):
                counts[(key, broker)] = manager.overflowed
        if self.volume is not None:
            counts[("volume_usage", "")] = self.volume.produce.overflowed
        counts[(CONTROLLER_MUTATION_RATE, "")] = self.mutations.overflowed
        counts[(TOPIC_PRODUCER_BYTE_RATE, "")] = self.topics.produce.overflowed
        counts[(TOPIC_CONSUMER_BYTE_RATE, "")] = self.topics.fetch.overflowed
        counts[(PARTITION_PRODUCER_BYTE_RATE, "")] = self.topics.partition_produce.overflowed
        counts[(PARTITION_CONSUMER_BYTE_RATE, "")] = self.topics.partition_fetch.overflowed
        counts[(REQUEST_RATE, "")] = self.requests.clients.overflowed
        counts[(GROUP_REQUEST_RATE, "")] = self.requests.groups.overflowed
        for key, source in self.overflow_sources:
            counts[(key, "")] = source.overflowed
        return counts

    def cleanup_producer_ids(self, now_ms: int, limit: int | None = None) -> int:
        """KIP-936's cache cleanup, in every set (``limit`` users at most per set, see ``ProducerIdQuotaManager``)."""
        return sum(quota_set.producer_ids.cleanup(now_ms, limit) for _, quota_set in self.quota_sets())

    def _record(self, quota_set: QuotaSet, node_id: int | None = None) -> QuotaManagers:
        """The record a port's connections consult: ``quota_set``'s budget and the proxy's one of the rest."""
        return QuotaManagers(
            produce=quota_set.produce,
            fetch=quota_set.fetch,
            producer_ids=quota_set.producer_ids,
            mutations=self.mutations,
            volume=self.volume,
            held_bytes=self.held_bytes,
            clock=self.clock,
            mode=self.mode,
            shadows=self.shadows,
            internal_topics=self.internal_topics,
            metadata_max_age_ms=self.metadata_max_age_ms,
            offset_metadata_max_bytes=self.offset_metadata_max_bytes,
            topics=self.topics,
            requests=self.requests,
            node_id=node_id,
        )

    def for_broker(self, node_id: int) -> QuotaManagers:
        """What the connections of broker ``node_id``'s port read as their quotas, chosen when the port opens: under
        ``quota.scope: broker`` (in cluster mode) the broker's own set, made now if it is the broker's first port;
        otherwise the proxy's one (:attr:`home`)."""
        if not self.per_broker:
            return self.home
        scoped = self._brokers.get(node_id)
        if scoped is None:
            quota_set = QuotaSet(self._table, self._settings, self.clock, self.window, self.mode.shadow)
            quota_set.set_smoothing(self.mode.smoothing)
            scoped = quota_set, self._record(quota_set, node_id)
            self._brokers = {**self._brokers, node_id: scoped}
        return scoped[1]

    def drop_broker(self, node_id: int) -> None:
        """The broker's last port closed (it left the cluster): its set goes; if it comes back it starts afresh, as a
        restarted Kafka broker does."""
        if node_id in self._brokers:
            self._brokers = {n: b for n, b in self._brokers.items() if n != node_id}

    def quota_sets(self) -> list[tuple[str, QuotaSet]]:
        """Every set, each once, with the metrics' ``broker`` label (``bootstrap`` for the proxy's own set; "" when it
        is the only one)."""
        brokers = self._brokers
        home = BOOTSTRAP if self.per_broker else ""
        return [(home, self.home_set)] + [(str(n), brokers[n][0]) for n in sorted(brokers)]
