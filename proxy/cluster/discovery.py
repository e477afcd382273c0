"""Cluster mode: learn the cluster's brokers from the upstream, so every broker port is open from start-up.

Clients that only talk to broker addresses they already know (kafka-python, aiokafka after a reconnect) need the
port of every broker open as soon as the proxy is back, not once some client happens to send Metadata through the
bootstrap port. So, at start-up and then every ``cluster.metadata.refresh.ms``, the proxy asks the bootstrap
servers for Metadata itself (no topics: just the brokers), bounded by ``upstream.connect.timeout.ms``, retrying with
backoff while the cluster is unreachable, and opens the port of every broker it names. ``/readyz`` is not ready
until every broker of the last answer is served on its port: a port that cannot be opened (another process holds
it) keeps the proxy not ready, and discovery tries again with backoff, not after a whole refresh interval.

A broker missing from every answer for ``cluster.broker.removal.ms`` has its port closed and its connections closed
(reason ``broker_removed``); a broker that comes back gets the same port (``broker_port_base + node id``).
Responses that name a broker not seen yet still open its port at once (:class:`proxy.cluster.broker_ports.BrokerPorts`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from config.model import Address
from proxy.cluster.kafka_clients import Backoff, OwnKafka
from proxy.ground.tasks import cancel_and_wait

log = logging.getLogger(__name__)

CLIENT_ID = "kafka-quota-proxy-discovery"
BACKOFF_START_S, BACKOFF_MAX_S = 0.2, 10.0


class BrokerDiscovery:
    """Keeps every cluster-mode listener's broker ports in step with the cluster's brokers."""

    def __init__(
        self,
        kafka: OwnKafka,
        clusters: list,
        timeout_s: float,
        refresh_s: float,
        removal_s: float,
        close_broker: Callable[[str, int], None],
        now: Callable[[], float],
    ) -> None:
        self._kafka = kafka
        self._clusters = clusters  # BrokerPorts, one per cluster-mode listener
        self._timeout_s = timeout_s
        self._refresh_s = refresh_s
        self._removal_s = removal_s
        self._close_broker = close_broker  # (listener, node id): close its port and its connections
        self._now = now
        self.last_seen: dict[int, float] = {}
        self.ready = not clusters  # nothing to learn without a cluster-mode listener
        self._task: asyncio.Task | None = None

    async def discover_once(self) -> bool:
        """One round: ask each bootstrap server in turn until one answers; True when brokers were learnt."""
        if not self._clusters:
            return True
        found = await self._kafka.look((), self._timeout_s, CLIENT_ID)
        if found is None:
            return False
        return self.learn(found.brokers)

    def learn(self, brokers: dict[int, Address]) -> bool:
        """Take the cluster's brokers; whether every one of them is served on its port now."""
        now = self._now()
        for node_id, address in brokers.items():
            self.last_seen[node_id] = now
            for cluster in self._clusters:
                cluster.advertise(node_id, address.host, address.port)
        for node_id, seen in list(self.last_seen.items()):
            if node_id not in brokers and now - seen >= self._removal_s:
                del self.last_seen[node_id]
                for cluster in self._clusters:
                    if cluster.forget(node_id):
                        log.warning(
                            "listener %s: broker %d absent from the cluster for %.0f s: port %d closed",
                            cluster.listener,
                            node_id,
                            now - seen,
                            cluster.port_for(node_id),
                        )
                        self._close_broker(cluster.listener, node_id)
        unserved = sorted(
            {node_id for node_id in brokers for cluster in self._clusters if node_id not in cluster.brokers}
        )
        if unserved:
            log.warning("cluster discovery: brokers %s have no port open yet (retried): not ready", unserved)
        elif not self.ready:
            log.info("cluster discovery: brokers %s, every port open", sorted(brokers))
        self.ready = not unserved
        return self.ready

    def start(self) -> None:
        if self._clusters:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        backoff = Backoff(BACKOFF_START_S, BACKOFF_MAX_S)
        if self.ready:  # start-up already learnt the brokers
            await asyncio.sleep(self._refresh_s)
        while True:
            if await self.discover_once():
                backoff.succeeded()
                await asyncio.sleep(self._refresh_s)
            else:
                await backoff.wait()

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
