"""The quota managers of a running proxy (byte rates, controller mutations, producer ids, volume usage).

The managers live in ``quota/`` and are pure; this module builds them from the configuration with the real
clock, switches them between shadow and enforce, swaps their tables, and expires their idle sensors when the
app's housekeeping asks. Prometheus reads them through
:mod:`proxy.ops.quota_metrics`, when it scrapes, never on the request path.
"""

from __future__ import annotations

import logging
import uuid

from config.model import ProxyConfig
from proxy.ground.clock import SystemClock, WallClock
from proxy.ground.logs import LogLimiter
from proxy.quotas.quota_sets import BOOTSTRAP, BROKER, BrokerQuotas, ProducePrefixWanted, QuotaSet
from quota.managers.mutation import ControllerMutationQuotaManager
from quota.primitives.entity import (
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    PRODUCER_BYTE_RATE,
    PRODUCER_IDS_RATE,
    QuotaTable,
)
from quota.primitives.held_bytes import HeldBytes
from quota.primitives.rate import QuotaWindow

log = logging.getLogger(__name__)

OVERFLOW_LOG_INTERVAL_MS = 60_000
"""At most one warning a minute while new entities overflow full sensor tables (``note_overflow``)."""


class ByteRateQuotas:
    """``produce`` (producer_byte_rate, request bytes), ``fetch`` (consumer_byte_rate, response bytes),
    ``producer_ids`` (producer_ids_rate) and ``mutations`` (controller_mutation_rate, partitions created or deleted).

    ``produce``, ``fetch`` and ``producer_ids`` are the bootstrap ports' and sidecar listeners' :class:`QuotaSet`
    (every port's, under ``quota.scope: cluster``); under ``quota.scope: broker`` in cluster mode each broker has
    its own, reached through :meth:`for_broker`. The mutation bucket, the volume throttle and the shadow
    bookkeeping are one per proxy."""

    def __init__(self, config: ProxyConfig, clock=None) -> None:
        settings = config.settings
        self.window = QuotaWindow(settings["quota.window.num"], settings["quota.window.size.seconds"])
        mute_max = settings["quota.mute.max.ms"]
        self.mute_max_ms = mute_max
        self.clock = clock or SystemClock()
        self._settings = settings
        self._table = config.quotas
        self.shadow = settings["quota.mode"] == "shadow"
        # quota.scope broker with a cluster-mode listener: one set per broker port's broker (else one set in all)
        self.per_broker = settings["quota.scope"] == BROKER and any(lc.cluster_mode for lc in config.listeners)
        self.home = QuotaSet(config.quotas, settings, self.clock, self.window, self.shadow)
        self.produce, self.fetch, self.producer_ids = self.home.produce, self.home.fetch, self.home.producer_ids
        self._brokers: dict[int, BrokerQuotas] = {}  # swapped whole (the scrape thread reads it)
        self.mutation_window = QuotaWindow(
            settings["controller.quota.window.num"], settings["controller.quota.window.size.seconds"]
        )
        self.mutations = ControllerMutationQuotaManager(
            config.quotas,
            self.clock,
            self.mutation_window,
            mute_max,
            max_tracked_entities=settings["quota.max.tracked.entities"],
        )
        # other tables bounded by quota.max.tracked.entities: (quota key, what has .overflowed): the app's per-IP rates
        self.overflow_sources: list[tuple[str, object]] = []
        self.metadata_max_age_ms = settings["controller.quota.metadata.max.age.ms"]
        self.offset_metadata_max_bytes = settings["offset.metadata.max.bytes"]  # OffsetCommit metadata, per partition
        # bytes of Produce requests held for their new producer ids (KIP-936 hold): per connection and in this process
        self.held_bytes = HeldBytes(settings["connections.max.held.request.bytes"], settings["max.held.request.bytes"])
        self.max_metric_entities = settings["quota.metrics.max.entities"]
        self.volume = None  # cluster volume usage (proxy.quotas.volume_throttle.VolumeThrottle), when configured
        if config.volume_usage is not None:
            from proxy.quotas.volume_throttle import VolumeThrottle

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
            + ([settings["quota.cluster.topic"]] if settings["quota.cluster.topic"] is not None else [])
        )
        self.produce_prefix = ProducePrefixWanted(self)
        self.shadow_throttles: dict[str, list[int]] = {}  # quota -> [decisions, total ms]: computed, not applied
        self._shadow_log = LogLimiter()
        self._overflow_seen: dict[tuple[str, str], int] = {}  # (quota, broker) -> overflowed at the last look
        self._overflow_logged_ms = -OVERFLOW_LOG_INTERVAL_MS
        self.set_mode(settings["quota.mode"])
        self.set_smoothing(settings["quota.smoothing"])

    def set_smoothing(self, smoothing: str) -> None:
        """``on``: producer_byte_rate and consumer_byte_rate throttle from a token bucket per entity (short, frequent
        delays; :mod:`quota.primitives.smoothing`), in every set; ``off``: Kafka's sampled-rate throttle. Takes effect at the
        next record."""
        self.smoothing = smoothing == "on"
        for _, quota_set in self.quota_sets():
            quota_set.set_smoothing(self.smoothing)

    def set_mode(self, mode: str) -> None:
        """``shadow``: every quota of the proxy computed and metered, none applied; ``enforce``: per entry."""
        shadow = mode == "shadow"
        self.shadow = shadow
        for _, quota_set in self.quota_sets():
            quota_set.set_shadow(shadow)
        self.mutations.shadow = shadow
        if self.volume is not None:
            self.volume.produce.shadow = self.volume.refused.shadow = shadow

    def apply(self, config: ProxyConfig) -> None:
        """A new effective configuration (the dynamic config changed): the mode and every table, in one step of
        the event loop, so no request sees half of it."""
        self.set_mode(config.settings["quota.mode"])
        self.set_smoothing(config.settings["quota.smoothing"])
        self.update(config.quotas)

    def note_shadow(self, quota: str, decision, user: str, client_id: str) -> int:
        """A decision computed but not applied (shadow mode): counted and logged ("would throttle"); returns the
        throttle it would have applied (ms), 0 when there is none."""
        ms = getattr(decision, "throttle_time_ms", 0)
        if not decision.shadow or ms <= 0:
            return 0
        counts = self.shadow_throttles.setdefault(quota, [0, 0])
        counts[0] += 1
        counts[1] += ms
        who = f"{user or '-'}/{client_id or '-'}"
        suppressed = self._shadow_log.allow(who, quota, self.clock.now_ms() / 1000.0)
        if suppressed is not None:
            log.info(
                "shadow mode: would throttle %s %d ms (%s)%s",
                who,
                ms,
                quota,
                f"; {suppressed} more for it in the last 10 s" if suppressed else "",
            )
        return ms

    def is_internal(self, only_topic, topics) -> bool:
        """Whether a Produce that writes only ``only_topic`` (a name, or topic id bytes) writes an internal topic."""
        if isinstance(only_topic, bytes):
            only_topic = topics.name_for(uuid.UUID(bytes=only_topic))
        return only_topic in self.internal_topics

    def update(self, table: QuotaTable) -> None:
        """Swap in a new quota table (dynamic config); live sensors take the new limits at once."""
        self._table = table
        for _, quota_set in self.quota_sets():
            quota_set.update(table)
        self.mutations.update_quotas(table)
        if self.volume is not None:
            self.volume.update_quotas(table)

    def expire_idle(self, limit: int | None = None) -> int:
        """Sensors idle for an hour dropped from every set and the mutation quota (the app's housekeeping), at most
        ``limit`` per manager (the housekeeping calls again while this drops any, between other work of the loop);
        returns how many were dropped."""
        return sum(
            quota_set.expire_idle(limit) for _, quota_set in self.quota_sets()
        ) + self.mutations.expire_idle_sensors(limit=limit)

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
            f"quota.max.tracked.entities ({self._settings['quota.max.tracked.entities']}) reached ({where}): "
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
        for key, source in self.overflow_sources:
            counts[(key, "")] = source.overflowed
        return counts

    def cleanup_producer_ids(self, now_ms: int, limit: int | None = None) -> int:
        """KIP-936's cache cleanup, in every set (``limit`` users at most per set, see ``ProducerIdQuotaManager``)."""
        return sum(quota_set.producer_ids.cleanup(now_ms, limit) for _, quota_set in self.quota_sets())

    def for_broker(self, node_id: int) -> ByteRateQuotas | BrokerQuotas:
        """What the connections of broker ``node_id``'s port read as their quotas: under ``quota.scope: broker`` (in
        cluster mode) the broker's own set, made now if it is the broker's first port; otherwise the proxy's one."""
        if not self.per_broker:
            return self
        scoped = self._brokers.get(node_id)
        if scoped is None:
            scoped = BrokerQuotas(
                node_id, QuotaSet(self._table, self._settings, self.clock, self.window, self.shadow), self
            )
            scoped.quota_set.set_smoothing(self.smoothing)
            self._brokers = {**self._brokers, node_id: scoped}
        return scoped

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
        return [(home, self.home)] + [(str(n), brokers[n].quota_set) for n in sorted(brokers)]
