"""Cluster mode: one proxy in front of many brokers, one proxy port per broker.

The broker with node id N is served on ``broker_port_base + N``, so ports are stable across restarts. Broker
addresses are learnt from the responses that carry them; the first time a node id is seen its port is opened
(a broker that appears later gets its port without a restart). A port that cannot be opened (taken by another
process) leaves its broker unknown, so the next answer naming it tries again, and discovery is not ready meanwhile. The request path reads the published mapping;
only :meth:`BrokerPorts.advertise` changes it, swapping in a new dict.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from config.model import Address
from proxy.codec.errors import ProtocolError

log = logging.getLogger(__name__)

MAX_PORT = 65535


class BrokerPorts:
    def __init__(self, listener: str, advertised_host: str, port_base: int, open_port: Callable[[int], bool]) -> None:
        self.listener = listener
        self.advertised_host = advertised_host
        self.port_base = port_base
        self._open_port = open_port  # opens the proxy port for a node id (idempotent); False: it could not
        self.brokers: dict[int, Address] = {}
        # version -> (a Metadata answer's head, as the broker wrote it, rewritten, the brokers it was rewritten with):
        # the same head with the same brokers is rewritten the same way (proxy.apis.metadata)
        self.metadata_heads: dict[int, tuple[bytes, bytes, dict[int, Address]]] = {}

    def port_for(self, node_id: int) -> int:
        port = self.port_base + node_id
        if port > MAX_PORT:
            raise ProtocolError(
                f"listener {self.listener}: broker node id {node_id} maps to port {port}, past {MAX_PORT}; "
                "lower broker_port_base"
            )
        return port

    def advertise(self, node_id: int, host: str, port: int) -> tuple[str, int]:
        """Record where broker ``node_id`` really is; return the proxy address to hand clients instead."""
        proxy_port = self.port_for(node_id)
        address = Address(host, port)
        known = self.brokers.get(node_id)
        if known != address:
            if known is None:
                if not self._open_port(node_id):
                    return self.advertised_host, proxy_port  # not served yet: unknown, tried again next time
                log.info(
                    "listener %s: broker %d at %s is served on port %d", self.listener, node_id, address, proxy_port
                )
            else:
                log.info("listener %s: broker %d moved from %s to %s", self.listener, node_id, known, address)
            self.brokers = {**self.brokers, node_id: address}
        return self.advertised_host, proxy_port

    def forget(self, node_id: int) -> bool:
        """The broker left the cluster: new connections to its port have nowhere to go. False if unknown."""
        if node_id not in self.brokers:
            return False
        self.brokers = {n: a for n, a in self.brokers.items() if n != node_id}
        return True

    def upstream_for(self, node_id: int) -> tuple[Address, ...]:
        address = self.brokers.get(node_id)
        return () if address is None else (address,)
