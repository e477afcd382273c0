"""Cluster mode: learn the cluster's brokers from the upstream, so every broker port is open from start-up.

Clients that only talk to broker addresses they already know (kafka-python, aiokafka after a reconnect) need the
port of every broker open as soon as the proxy is back, not once some client happens to send Metadata through the
bootstrap port. So, at start-up and then every ``cluster.metadata.refresh.ms``, the proxy asks the bootstrap
servers for Metadata itself (no topics: just the brokers), bounded by ``upstream.connect.timeout.ms``, retrying with
backoff while the cluster is unreachable, and opens the port of every broker it names. ``/readyz`` is not ready
until that has happened once.

A broker missing from every answer for ``cluster.broker.removal.ms`` has its port closed and its connections closed
(reason ``broker_removed``); a broker that comes back gets the same port (``broker_port_base + node id``).
Responses that name a broker not seen yet still open its port at once (:class:`proxy.cluster.broker_ports.BrokerPorts`).
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Callable

from config.model import Address
from proxy.codec.apis import METADATA, OWN_METADATA_VERSION
from proxy.codec.header import encode_request_header, frame, response_header_length
from proxy.codec.messages import decode_response, encode_request, new_request
from proxy.tasks import cancel_and_wait

log = logging.getLogger(__name__)

CLIENT_ID = "kafka-quota-proxy-discovery"
MAX_RESPONSE = 64 << 20
BACKOFF_START_S, BACKOFF_MAX_S = 0.2, 10.0


async def ask(address: Address, api_key: int, version: int, request, timeout_s: float,
              client_id: str = CLIENT_ID, ssl_context=None):
    """One request of the proxy's own on a fresh connection to ``address``; its decoded answer. Bounded by
    ``timeout_s``; raises OSError, asyncio.TimeoutError, asyncio.IncompleteReadError or ValueError."""
    async def exchange():
        reader, writer = await asyncio.open_connection(address.host, address.port, ssl=ssl_context,
                                                       server_hostname=address.host if ssl_context else None)
        try:
            writer.write(frame(encode_request_header(api_key, version, 1, client_id)
                               + encode_request(api_key, version, request)))
            await writer.drain()
            size = struct.unpack(">i", await reader.readexactly(4))[0]
            if not 4 <= size <= MAX_RESPONSE:
                raise ValueError(f"a response of {size} bytes")
            whole = struct.pack(">i", size) + await reader.readexactly(size)
            if struct.unpack(">i", whole[4:8])[0] != 1:
                raise ValueError("a response with another correlation id")
            return decode_response(api_key, version,
                                   memoryview(whole)[response_header_length(api_key, version, whole):])
        finally:
            writer.close()

    return await asyncio.wait_for(exchange(), timeout_s)


async def fetch_brokers(address: Address, timeout_s: float, ssl_context=None) -> dict[int, Address]:
    """The brokers (node id -> host:port) a bootstrap server names in a Metadata answer for no topics."""
    msg = await ask(address, METADATA, OWN_METADATA_VERSION,
                    new_request(METADATA, OWN_METADATA_VERSION, topics=[], allow_auto_topic_creation=False), timeout_s,
                    ssl_context=ssl_context)
    return {b.node_id: Address(b.host, b.port) for b in msg.brokers}


class BrokerDiscovery:
    """Keeps every cluster-mode listener's broker ports in step with the cluster's brokers."""

    def __init__(self, bootstrap: tuple[Address, ...], clusters: list, timeout_s: float, refresh_s: float,
                 removal_s: float, close_broker: Callable[[str, int], None], now: Callable[[], float],
                 ssl_context=None) -> None:
        self._ssl = ssl_context
        self._bootstrap = bootstrap
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
        for address in self._bootstrap:
            try:
                brokers = await fetch_brokers(address, self._timeout_s, self._ssl)
            except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError) as exc:
                log.info("cluster discovery: %s did not answer Metadata: %s", address, exc or type(exc).__name__)
                continue
            self.learn(brokers)
            return True
        return False

    def learn(self, brokers: dict[int, Address]) -> None:
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
                        log.warning("listener %s: broker %d absent from the cluster for %.0f s: port %d closed",
                                    cluster.listener, node_id, now - seen, cluster.port_for(node_id))
                        self._close_broker(cluster.listener, node_id)
        if not self.ready:
            log.info("cluster discovery: brokers %s, every port open", sorted(brokers))
        self.ready = True

    def start(self) -> None:
        if self._clusters:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        backoff = BACKOFF_START_S
        if self.ready:  # start-up already learnt the brokers
            await asyncio.sleep(self._refresh_s)
        while True:
            if await self.discover_once():
                backoff = BACKOFF_START_S
                await asyncio.sleep(self._refresh_s)
            else:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX_S)

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
