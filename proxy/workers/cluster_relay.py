"""``workers: N`` with ``quota.cluster.topic`` (issue 26): the parent is the proxy's one member of the usage topic.

The workers keep sharing one quota state through the parent as without the topic. The parent also adds up every
worker's usage delta (:class:`~quota.sharing.usage_sum.UsageSum`) and publishes the sum as the proxy's ONE record per
``quota.cluster.sync.ms`` under the proxy's id (:class:`~proxy.observers.cluster_usage.ClusterUsage`, the same
publisher and follower one process runs), and early when a worker says one entity's usage is large (``EAGER``). It
follows the topic and passes each fresh peer's delta to every worker as remote usage, as it passes the workers'
deltas to each other, so each worker's next decision sees the tenant's total across the cluster. Staleness and the
fallback are decided here, once for the proxy: while no peer is fresh, the proxy's summed usage times the silent
peers goes to every worker, so the workers together keep to quota / live proxies known. The id, the peers and the
tombstone on a clean stop are the parent's: a worker that restarts changes nothing the peers see. The metrics
(``cluster_usage_*``) are the parent's own, unlabelled in its /metrics; its /readyz carries the fallback note.
A peer's record of thousands of entities is encoded for the workers in a thread (seconds at 10^5), and each worker
decodes it off its loop and records it a step at a time (:mod:`proxy.workers.link`), so neither stalls.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from config.model import ProxyConfig
from proxy.cluster import own_clients
from proxy.cluster.kafka_clients import OwnKafka
from proxy.ground.identity import proxy_id
from proxy.ground.quiet import quiet
from proxy.ground.tasks import cancel_all
from proxy.observers.cluster_usage import ClusterUsage
from proxy.workers.frames import USAGE, pack
from quota.sharing.remote_usage import RECORD_STEP
from quota.sharing.usage_delta import UsageDelta
from quota.sharing.usage_encoding import UsageDeltaError, decode, encode
from quota.sharing.usage_sum import UsageSum

log = logging.getLogger(__name__)


def quiet_encode(delta: UsageDelta) -> bytes:
    with quiet():
        return encode(delta)


class WorkersClusterUsage:
    """The parent's publisher and follower; ``to_workers(frame)`` sends a frame to every serving worker."""

    def __init__(
        self, config: ProxyConfig, registry, ports: dict[str, int], to_workers: Callable[[bytes], None], wall=None
    ) -> None:
        settings = config.settings
        kafka = OwnKafka.of(config.upstream.own_traffic)
        own_id = proxy_id(settings, ports.values())
        self.sum = UsageSum()
        self.usage = ClusterUsage(settings, kafka, registry, own_id, self.sum, self._to_workers, wall)
        self._send = to_workers
        self._encoding: set[asyncio.Task] = set()  # large deltas being encoded off the loop
        # a sidecar's own clients go straight to the broker behind, not through a worker's listener (as one process's)
        self._route = own_clients.sidecar_route(
            config, {ports[lc.name] for lc in config.listeners if lc.sidecar and lc.name in ports}
        )

    @property
    def note(self) -> str | None:
        return self.usage.note

    def worker_usage(self, payload: bytes) -> None:
        """A worker's usage delta (the bytes it sent the parent): part of the proxy's next record."""
        try:
            self.sum.add(decode(payload))
        except UsageDeltaError as exc:
            log.warning("a worker's usage delta left out of the usage topic's record: %s", exc)

    def eager(self) -> None:
        self.usage.wake()

    def _to_workers(self, delta: UsageDelta) -> None:
        if delta.empty:  # a peer's sign of life (an empty record) is the parent's business only
            return
        if delta.entities < RECORD_STEP:
            self._send(pack(USAGE, encode(delta)))
            return
        # thousands of entities take a second or more to encode: off the loop, which keeps relaying the workers'
        # deltas meanwhile (the order of remote usage does not matter: it adds up)
        task = asyncio.get_running_loop().create_task(self._encode_and_send(delta))
        self._encoding.add(task)
        task.add_done_callback(self._encoding.discard)

    async def _encode_and_send(self, delta: UsageDelta) -> None:
        self._send(pack(USAGE, await asyncio.to_thread(quiet_encode, delta)))

    async def start(self) -> None:
        own_clients.track_aiokafka()  # installs the route below into aiokafka
        token = own_clients.ROUTE.set(self._route)
        try:
            await self.usage.start()  # its tasks copy the context: the route holds for them
        finally:
            own_clients.ROUTE.reset(token)

    async def stop(self) -> None:
        await self.usage.stop()
        await cancel_all(list(self._encoding))
