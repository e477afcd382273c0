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
from proxy.clock import SystemClock, WallClock
from proxy.ops.logs import LogLimiter
from quota.client_quota import ClientQuotaManager
from quota.entity import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, QuotaTable
from quota.mutation import ControllerMutationQuotaManager
from quota.producer_ids import ProducerIdQuotaManager
from quota.rate import QuotaWindow

log = logging.getLogger(__name__)


class _ProducePrefixWanted:
    """Whether Produce requests' body prefixes are read at the header (their producer id and only topic): while a
    producer-id quota is configured, or the proxy has internal topics to exempt."""

    __slots__ = ("_quotas",)

    def __init__(self, quotas: "ByteRateQuotas") -> None:
        self._quotas = quotas

    @property
    def enabled(self) -> bool:
        return self._quotas.producer_ids.enabled or bool(self._quotas.internal_topics)


class ByteRateQuotas:
    """``produce`` (producer_byte_rate, request bytes), ``fetch`` (consumer_byte_rate, response bytes) and
    ``mutations`` (controller_mutation_rate, partitions created or deleted)."""

    def __init__(self, config: ProxyConfig, clock=None) -> None:
        settings = config.settings
        self.window = QuotaWindow(settings["quota.window.num"], settings["quota.window.size.seconds"])
        mute_max = settings["quota.mute.max.ms"]
        self.mute_max_ms = mute_max
        self.clock = clock or SystemClock()
        self.produce = ClientQuotaManager(config.quotas, PRODUCER_BYTE_RATE, self.clock, self.window, mute_max)
        self.fetch = ClientQuotaManager(config.quotas, CONSUMER_BYTE_RATE, self.clock, self.window, mute_max)
        self.mutation_window = QuotaWindow(settings["controller.quota.window.num"],
                                           settings["controller.quota.window.size.seconds"])
        self.mutations = ControllerMutationQuotaManager(config.quotas, self.clock, self.mutation_window, mute_max)
        self.metadata_max_age_ms = settings["controller.quota.metadata.max.age.ms"]
        self.producer_ids = ProducerIdQuotaManager(
            config.quotas, window_num=settings["producer.id.quota.window.num"],
            window_size_s=settings["producer.id.quota.window.size.seconds"],
            expected_pids=settings["producer.id.quota.bloom.expected.pids"],
            false_positive_rate=settings["producer.id.quota.bloom.false.positive.rate"], max_mute_ms=mute_max,
            enforcement=settings["producer.id.quota.enforcement"], max_hold_ms=settings["producer.id.quota.max.hold.ms"])
        self.max_metric_entities = settings["quota.metrics.max.entities"]
        self.volume = None  # cluster volume usage (proxy.enforce.volume_throttle.VolumeThrottle), when configured
        if config.volume_usage is not None:
            from proxy.enforce.volume_throttle import VolumeThrottle

            # snapshots are dated in wall time (they cross hosts); a test's fake clock stands for both
            self.volume = VolumeThrottle(config.volume_usage, config.quotas, self.clock, self.window, mute_max,
                                         wall=WallClock() if clock is None else self.clock)
        self.producer_ids.issued.max_entries = self.max_metric_entities
        # The proxy's own topics (volume usage, dynamic config): produce to them alone is exempt from every quota and
        # from PAUSE, so the proxy never throttles or pauses what it publishes itself.
        self.internal_topics: frozenset[str] = frozenset(
            ([config.volume_usage.topic] if config.volume_usage is not None else [])
            + ([config.dynamic_config.topic] if config.dynamic_config is not None else []))
        self.produce_prefix = _ProducePrefixWanted(self)
        self.shadow_throttles: dict[str, list[int]] = {}  # quota -> [decisions, total ms]: computed, not applied
        self._shadow_log = LogLimiter()
        self.set_mode(settings["quota.mode"])

    def set_mode(self, mode: str) -> None:
        """``shadow``: every quota of the proxy computed and metered, none applied; ``enforce``: per entry."""
        shadow = mode == "shadow"
        self.shadow = shadow
        for manager in (self.produce, self.fetch, self.mutations, self.producer_ids):
            manager.shadow = shadow
        if self.volume is not None:
            self.volume.produce.shadow = shadow

    def apply(self, config: ProxyConfig) -> None:
        """A new effective configuration (the dynamic config changed): the mode and every table, in one step of
        the event loop, so no request sees half of it."""
        self.set_mode(config.settings["quota.mode"])
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
            log.info("shadow mode: would throttle %s %d ms (%s)%s", who, ms, quota,
                     f"; {suppressed} more for it in the last 10 s" if suppressed else "")
        return ms

    def is_internal(self, only_topic, topics) -> bool:
        """Whether a Produce that writes only ``only_topic`` (a name, or topic id bytes) writes an internal topic."""
        if isinstance(only_topic, bytes):
            only_topic = topics.name_for(uuid.UUID(bytes=only_topic))
        return only_topic in self.internal_topics

    def update(self, table: QuotaTable) -> None:
        """Swap in a new quota table (dynamic config); live sensors take the new limits at once."""
        self.produce.update_quotas(table)
        self.fetch.update_quotas(table)
        self.mutations.update_quotas(table)
        self.producer_ids.update_quotas(table)
        if self.volume is not None:
            self.volume.update_quotas(table)

    def expire_idle(self) -> int:
        return (self.produce.expire_idle_sensors() + self.fetch.expire_idle_sensors()
                + self.mutations.expire_idle_sensors())

    def managers(self) -> tuple[tuple[str, ClientQuotaManager], ...]:
        return ((PRODUCER_BYTE_RATE, self.produce), (CONSUMER_BYTE_RATE, self.fetch))
