"""Cluster mode's broker ports as listeners: the port of a broker opened the first time the cluster names it, with
the broker's own quota set and usage rows (``quota.scope: broker``), and closed with its connections when the broker
has left the cluster (:mod:`proxy.cluster.discovery`)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Mapping

from config.model import Address, ListenerConfig
from proxy.apis import ConnectionScope
from proxy.connection.client_socket import ClientConnection, ListenerContext
from proxy.connection.listener import Listener
from proxy.enforcement.proxy_quotas import ProxyQuotas

log = logging.getLogger(__name__)

# (listener name, where its connections go, what they share, the broker's node id) -> the context
MakeContext = Callable[[str, Callable[[], tuple[Address, ...]], ConnectionScope, int], ListenerContext]


class BrokerListeners:
    """The open broker ports, by (listener name, node id). ``scopes``: each cluster-mode listener's scope, which a
    broker's port narrows to the broker."""

    def __init__(
        self,
        scopes: Mapping[str, ConnectionScope],
        make_context: MakeContext,
        quotas: ProxyQuotas,
        connections: set[ClientConnection],
        reuse_port: bool,
    ) -> None:
        self._scopes = scopes
        self._make_context = make_context
        self._quotas = quotas
        self._connections = connections
        self._reuse_port = reuse_port
        self.listeners: dict[tuple[str, int], Listener] = {}
        self._closing: set[asyncio.Task] = set()  # ports closing: held, so a task is not collected mid-close

    def open(self, lc: ListenerConfig, node_id: int) -> bool:
        """Start serving broker ``node_id`` on its own port (first time it is seen); False when the port cannot be
        opened (the next answer naming the broker tries again)."""
        key = (lc.name, node_id)
        if key in self.listeners:
            return True
        # quota.scope broker: the broker's own byte-rate and producer-id managers (made with its first port)
        scope = dataclasses.replace(self._scopes[lc.name], quotas=self._quotas.for_broker(node_id))
        cluster = scope.cluster
        assert cluster is not None  # a cluster-mode listener's scope has its broker ports
        listener = Listener(
            self._make_context(lc.name, lambda: cluster.upstream_for(node_id), scope, node_id),
            lc.bind.host,
            cluster.port_for(node_id),
            self._reuse_port,
        )
        try:
            listener.start_now()
        except OSError as exc:
            log.error(
                "listener %s: cannot open port %d for broker %d: %s", lc.name, cluster.port_for(node_id), node_id, exc
            )
            return False
        self.listeners[key] = listener
        return True

    def close(self, listener_name: str, node_id: int) -> None:
        """A broker left the cluster: its port and the connections made through it close."""
        listener = self.listeners.pop((listener_name, node_id), None)
        if listener is None:
            return
        for conn in [c for c in self._connections if c.ctx is listener.ctx]:
            conn.close("broker_removed")
        if not any(node == node_id for _, node in self.listeners):
            self._quotas.drop_broker(node_id)  # its last port: the broker's quota set goes (bounded by live brokers)
        task = asyncio.get_running_loop().create_task(listener.close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)
