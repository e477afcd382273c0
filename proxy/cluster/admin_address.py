"""The admin listener's own address: the one broker address its clients are given.

Kafka's AdminClient sends a request to whichever broker the Metadata answer names (DescribeClientQuotas and
AlterClientQuotas to the least loaded one), so a client of the admin listener that was handed the brokers' real
addresses (or, behind sidecars, the other sidecars' public listeners, where it is a tenant) would leave the admin
listener after its first request. Every broker address in the answers it gets is therefore this listener's own
(:mod:`proxy.apis.addresses` rewrites them, as in cluster mode): its clients stay on it, and every request reaches
the broker behind it. The proxy answers the client-quota APIs itself and writes its config topic, which every proxy
follows, so one admin listener is enough for the whole cluster.
"""

from __future__ import annotations


class AdminAddress:
    """``advertise`` as :class:`proxy.cluster.broker_ports.BrokerPorts` has it: here every broker is ``host:port``."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port  # the configured port; the bound one once the listener is open (a configured 0)

    def advertise(self, node_id: int, host: str, port: int) -> tuple[str, int]:
        return self.host, self.port
