"""Where the per-broker quotas keep their budget (``quota.scope``).

Kafka keeps ``producer_byte_rate``, ``consumer_byte_rate`` and ``producer_ids_rate`` per broker: each broker
measures what reaches it, so a client spread over N brokers gets N x its quota. A :class:`QuotaSet` is one such
budget: the three managers of one broker. The proxy holds one set for its bootstrap ports and sidecar listeners
(the only set in sidecar mode, and under ``quota.scope: cluster``, where every broker port shares it), and, under
``quota.scope: broker`` in cluster mode, one more per broker, made when the broker's first port opens and dropped
when its last port closes: a set per broker, never per connection.

A broker port's connections see a :class:`BrokerQuotas`: that broker's set, and every other manager of the proxy
as it is (the KIP-599 controller mutation bucket, the volume throttle, shadow bookkeeping, the internal topics),
so the request path reads ``scope.quotas`` the same way whichever scope is configured.
"""

from __future__ import annotations

from quota.managers.client_quota import ClientQuotaManager
from quota.managers.producer_ids import ProducerIdQuotaManager
from quota.primitives.entity import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, QuotaTable

BROKER, CLUSTER = "broker", "cluster"  # the values of quota.scope
BOOTSTRAP = "bootstrap"  # the metrics' broker label of the bootstrap ports' set, under quota.scope broker


class QuotaSet:
    """The managers of one per-broker budget: ``produce`` (producer_byte_rate), ``fetch`` (consumer_byte_rate) and
    ``producer_ids`` (producer_ids_rate, KIP-936)."""

    __slots__ = ("produce", "fetch", "producer_ids")

    def __init__(self, table: QuotaTable, settings, clock, window, shadow: bool) -> None:
        mute_max = settings["quota.mute.max.ms"]
        cap = settings["quota.max.tracked.entities"]
        self.produce = ClientQuotaManager(table, PRODUCER_BYTE_RATE, clock, window, mute_max, max_tracked_entities=cap)
        self.fetch = ClientQuotaManager(table, CONSUMER_BYTE_RATE, clock, window, mute_max, max_tracked_entities=cap)
        self.producer_ids = ProducerIdQuotaManager(
            table,
            window_num=settings["producer.id.quota.window.num"],
            window_size_s=settings["producer.id.quota.window.size.seconds"],
            expected_pids=settings["producer.id.quota.bloom.expected.pids"],
            false_positive_rate=settings["producer.id.quota.bloom.false.positive.rate"],
            max_mute_ms=mute_max,
            enforcement=settings["producer.id.quota.enforcement"],
            max_hold_ms=settings["producer.id.quota.max.hold.ms"],
            max_tracked_entities=cap,
        )
        self.producer_ids.issued.max_entries = settings["quota.metrics.max.entities"]
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


class ProducePrefixWanted:
    """Whether Produce requests' body prefixes are read at the header (their producer id and only topic): while a
    producer-id quota is configured, or the proxy has internal topics to exempt."""

    __slots__ = ("_quotas",)

    def __init__(self, quotas) -> None:  # a ByteRateQuotas or a BrokerQuotas
        self._quotas = quotas

    @property
    def enabled(self) -> bool:
        return self._quotas.producer_ids.enabled or bool(self._quotas.internal_topics)


class BrokerQuotas:
    """What a broker port's connections read as ``scope.quotas`` under ``quota.scope: broker``: the broker's own
    :class:`QuotaSet`, and the proxy's one of everything else."""

    __slots__ = ("node_id", "quota_set", "_proxy", "produce_prefix")

    def __init__(self, node_id: int, quota_set: QuotaSet, proxy) -> None:  # proxy: the proxy's ByteRateQuotas
        self.node_id = node_id
        self.quota_set = quota_set
        self._proxy = proxy
        self.produce_prefix = ProducePrefixWanted(self)

    # the broker's own budget
    @property
    def produce(self) -> ClientQuotaManager:
        return self.quota_set.produce

    @property
    def fetch(self) -> ClientQuotaManager:
        return self.quota_set.fetch

    @property
    def producer_ids(self) -> ProducerIdQuotaManager:
        return self.quota_set.producer_ids

    # the proxy's, shared by every broker port
    @property
    def clock(self):
        return self._proxy.clock

    @property
    def mutations(self):
        return self._proxy.mutations  # KIP-599: Kafka keeps one bucket per entity, on the controller

    @property
    def metadata_max_age_ms(self) -> int:
        return self._proxy.metadata_max_age_ms

    @property
    def offset_metadata_max_bytes(self) -> int:
        return self._proxy.offset_metadata_max_bytes

    @property
    def volume(self):
        return self._proxy.volume

    @property
    def held_bytes(self):
        return self._proxy.held_bytes  # the process's memory: one bound for every port

    @property
    def shadow(self) -> bool:
        return self._proxy.shadow

    @property
    def internal_topics(self) -> frozenset[str]:
        return self._proxy.internal_topics

    def is_internal(self, only_topic, topics) -> bool:
        return self._proxy.is_internal(only_topic, topics)

    def note_shadow(self, quota: str, decision, user: str, client_id: str) -> int:
        return self._proxy.note_shadow(quota, decision, user, client_id)
