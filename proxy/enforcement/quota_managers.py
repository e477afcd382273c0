"""The quota managers one port's connections consult: one typed record, chosen per port once.

A running proxy holds every manager (:class:`proxy.enforcement.proxy_quotas.ProxyQuotas`); what a listener's
connections read as ``scope.quotas`` is a :class:`QuotaManagers`: the per-broker budget that port counts in
(``producer_byte_rate``, ``consumer_byte_rate``, ``producer_ids_rate``: the proxy's one set, or under
``quota.scope: broker`` in cluster mode the broker's own, :mod:`proxy.enforcement.quota_sets`) and the proxy's one
of everything else (the KIP-599 controller mutation bucket, the volume throttle, the held-byte bounds, the mode).
It is made once when the port opens (Kafka's ``QuotaFactory.QuotaManagers``): nothing is looked up or forwarded per
request, and the request path reads the same record whichever scope is configured.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from quota.managers.client_quota import ClientQuotaManager
from quota.managers.mutation import ControllerMutationQuotaManager
from quota.managers.producer_ids import ProducerIdQuotaManager
from quota.managers.request_rate import RequestRateQuotas
from quota.managers.topic_quota import TopicQuotas
from quota.primitives.clock import Clock
from quota.primitives.held_bytes import HeldBytes

if TYPE_CHECKING:
    from proxy.cluster.topics import Topics
    from proxy.enforcement.shadow_throttles import ShadowThrottles
    from proxy.enforcement.volume_throttle import VolumeThrottle


class QuotaMode:
    """Whether the proxy's quotas are applied (``quota.mode``) and smoothed (``quota.smoothing``): one per proxy,
    switched whole by a dynamic update and read by every port's record."""

    __slots__ = ("shadow", "smoothing")

    def __init__(self, shadow: bool = False, smoothing: bool = False) -> None:
        self.shadow = shadow  # every quota computed and metered, none applied
        self.smoothing = smoothing


@dataclass(frozen=True, slots=True)
class QuotaManagers:
    produce: ClientQuotaManager  # producer_byte_rate (request bytes): this port's budget
    fetch: ClientQuotaManager  # consumer_byte_rate (response bytes): this port's budget
    producer_ids: ProducerIdQuotaManager  # producer_ids_rate (KIP-936): this port's budget
    mutations: (
        ControllerMutationQuotaManager  # controller_mutation_rate: one bucket per entity, as on Kafka's controller
    )
    volume: VolumeThrottle | None  # cluster volume usage, when configured
    held_bytes: HeldBytes  # bytes of Produce requests held for their producer ids: the process's one bound
    clock: Clock
    mode: QuotaMode
    shadows: ShadowThrottles  # throttles computed and not applied: the proxy's one count
    # the proxy's own topics (volume usage, dynamic config, cluster usage): writing only them is exempt from every
    # quota and from PAUSE, so the proxy never throttles or pauses what it publishes itself
    internal_topics: frozenset[str]
    metadata_max_age_ms: int  # how old a partition count may be for a mutation's charge
    offset_metadata_max_bytes: int  # OffsetCommit metadata, per partition
    topics: TopicQuotas  # producer_byte_rate and consumer_byte_rate per topic: the proxy's one set, every port's
    requests: RequestRateQuotas  # request_rate per client entity and per group: the proxy's one set, every port's
    node_id: int | None = None  # the broker whose budget this is (quota.scope broker); None: the proxy's one set

    @property
    def reads_produce_prefix(self) -> bool:
        """Whether a Produce's body prefix (its producer ids and only topic) is read at its header: while a
        producer-id quota is configured, or the proxy has internal topics to exempt (read per request: the quota
        table changes with the dynamic config)."""
        return self.producer_ids.enabled or bool(self.internal_topics)

    def is_internal(self, only_topic: str | bytes | None, topics: Topics) -> bool:
        """Whether a Produce that writes only ``only_topic`` (a name, or topic id bytes) writes an internal topic."""
        if isinstance(only_topic, bytes):
            only_topic = topics.name_for(uuid.UUID(bytes=only_topic))
        return only_topic in self.internal_topics
