"""The quota state an explanation is computed from (:mod:`quota.explain.explain`). Pure.

Gathered by the proxy on its event loop and read there at once: references to the managers (read, never changed)
and plain values. Building one costs a few attribute reads plus the client's open connections.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from quota.explain.values import OpenConnection
from quota.managers.volume import VolumeState
from quota.sharing.cluster_peers import PeerView

if TYPE_CHECKING:
    from quota.managers.client_quota import ClientQuotaManager
    from quota.managers.connection import ConnectionQuotas
    from quota.managers.mutation import ControllerMutationQuotaManager
    from quota.managers.producer_ids import ProducerIdQuotaManager
    from quota.managers.request_rate import RequestRateQuotas
    from quota.managers.topic_quota import TopicQuotas
    from quota.primitives.quota_table import QuotaTable


@dataclass(frozen=True, slots=True)
class ByteRateSet:
    """One per-broker budget (``proxy.enforcement.quota_sets``): ``broker`` "" when it is the proxy's only one."""

    broker: str
    produce: ClientQuotaManager
    fetch: ClientQuotaManager
    producer_ids: ProducerIdQuotaManager


@dataclass(frozen=True, slots=True)
class VolumeView:
    """Volume usage as the produce path reads it: the state, and the produce manager whose limits it scales."""

    state: VolumeState
    produce: ClientQuotaManager
    freshness_ms: int
    missing_data_action: str


@dataclass(frozen=True, slots=True)
class QuotaState:
    """``now_ms`` on the quotas' clock; ``wall_ms`` on the wall clock (volume snapshots are dated with it)."""

    table: QuotaTable
    sets: tuple[ByteRateSet, ...]
    mutations: ControllerMutationQuotaManager
    connections: ConnectionQuotas
    listeners: tuple[str, ...]
    now_ms: int
    wall_ms: int = 0
    shadow_mode: bool = False
    scope: str = "broker"
    cluster_mode: bool = False  # a listener fronts the whole cluster (broker_port_base)
    cluster_peers: PeerView | None = None  # quota.scope cluster on sidecars: the other sidecars now
    topics_shared: bool | None = None  # on a usage topic: whether its records carry the topic quotas' usage now
    volume: VolumeView | None = None
    open_connections: tuple[OpenConnection, ...] = ()  # the client's (at most MAX_LISTED_CONNECTIONS)
    connections_open: int = 0  # all of the client's open connections
    workers: int = 1  # settings.workers: this process is one of them when more than 1
    topics: TopicQuotas | None = None  # the topic quotas ({topic: ...} entities)
    requests: RequestRateQuotas | None = None  # request_rate per client entity and per group ({group: ...})
