"""Where the per-broker quotas keep their budget (``quota.scope``).

Kafka keeps ``producer_byte_rate``, ``consumer_byte_rate`` and ``producer_ids_rate`` per broker: each broker
measures what reaches it, so a client spread over N brokers gets N x its quota. A :class:`QuotaSet` is one such
budget: the three managers of one broker. The proxy holds one set for its bootstrap ports and sidecar listeners
(the only set in sidecar mode, and under ``quota.scope: cluster``, where every broker port shares it), and, under
``quota.scope: broker`` in cluster mode, one more per broker, made when the broker's first port opens and dropped
when its last port closes: a set per broker, never per connection.

A broker port's connections see a :class:`~proxy.enforcement.quota_managers.QuotaManagers` record: that broker's
set, and every other manager of the proxy as it is (the KIP-599 controller mutation bucket, the volume throttle,
shadow bookkeeping, the internal topics), so the request path reads ``scope.quotas`` the same way whichever scope
is configured.
"""

from __future__ import annotations

from config.typed_settings import Settings
from quota.managers.client_quota import ClientQuotaManager
from quota.managers.producer_ids import ProducerIdQuotaManager
from quota.primitives.entity import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE
from quota.primitives.quota_table import QuotaTable

BROKER, CLUSTER = "broker", "cluster"  # the values of quota.scope
BOOTSTRAP = "bootstrap"  # the metrics' broker label of the bootstrap ports' set, under quota.scope broker


class QuotaSet:
    """The managers of one per-broker budget: ``produce`` (producer_byte_rate), ``fetch`` (consumer_byte_rate) and
    ``producer_ids`` (producer_ids_rate, KIP-936)."""

    __slots__ = ("produce", "fetch", "producer_ids")

    def __init__(self, table: QuotaTable, settings: Settings, clock, window, shadow: bool) -> None:
        mute_max = settings.quota_mute_max_ms
        cap = settings.quota_max_tracked_entities
        self.produce = ClientQuotaManager(table, PRODUCER_BYTE_RATE, clock, window, mute_max, max_tracked_entities=cap)
        self.fetch = ClientQuotaManager(table, CONSUMER_BYTE_RATE, clock, window, mute_max, max_tracked_entities=cap)
        self.producer_ids = ProducerIdQuotaManager(
            table,
            window_num=settings.producer_id_quota_window_num,
            window_size_s=settings.producer_id_quota_window_size_seconds,
            expected_pids=settings.producer_id_quota_bloom_expected_pids,
            false_positive_rate=settings.producer_id_quota_bloom_false_positive_rate,
            max_mute_ms=mute_max,
            enforcement=settings.producer_id_quota_enforcement,
            max_hold_ms=settings.producer_id_quota_max_hold_ms,
            max_tracked_entities=cap,
        )
        self.producer_ids.issued.max_entries = settings.quota_metrics_max_entities
        self.set_shadow(shadow)

    def set_shadow(self, shadow: bool) -> None:
        for manager in (self.produce, self.fetch, self.producer_ids):
            manager.shadow = shadow

    def set_smoothing(self, on: bool) -> None:
        """``quota.smoothing``: the byte-rate managers throttle from a token bucket per entity (quota.smoothing)."""
        self.produce.smoothing = self.fetch.smoothing = on

    def update(self, table: QuotaTable) -> None:
        self.produce.update_quotas(table)
        self.fetch.update_quotas(table)
        self.producer_ids.update_quotas(table)

    def expire_idle(self, limit: int | None = None) -> int:
        return self.produce.expire_idle_sensors(limit=limit) + self.fetch.expire_idle_sensors(limit=limit)
