"""The broker behind the proxy of a test written once over two brokers (the ``upstream`` fixture,
tests/integration/conftest.py): Tansu, or Apache Kafka's shared one-node cluster ``kafka1``.

The test says what it needs in the same words on both: a sidecar proxy bound where the broker advertises it
(:meth:`sidecar`, or :meth:`ports` for a test starting its own proxy), topics made past the proxy's quotas
(:meth:`topics`), an address reaching the broker past every quota (:meth:`direct`). On Tansu each sidecar has a
broker of its own, started for it and stopped with it; on Kafka the cluster is shared by the worker's Kafka tests, so
the sidecar's dynamic config is off (a quota another test left in the config topic changes nothing here, as in
tests/integration/kafka/quotas_common.py) and topics have unique names and are deleted at the end.

What Tansu does not do, so a step needing it runs on Kafka only (``upstream.kafka``): CreatePartitions,
AlterConfigs, DescribeLogDirs, the client-quota APIs, SASL, replication (one node, no replication factor above 1 to
refuse); InitProducerId v0-v2 (aiokafka's) fails; it answers an ``acks=0`` Produce; ListOffsets "latest" answers
below the true end.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager

from tests.harness import RunningProxy, Tansu, free_port, proxy_config, start_proxy
from tests.integration import clients as c
from tests.integration.kafka import quotas_common
from tests.kafka_cluster import KafkaCluster, unique_topic


class Upstream:
    """What both brokers offer a test; :class:`TansuUpstream` and :class:`KafkaUpstream` say how."""

    name: str
    kafka: bool  # Apache Kafka: the steps Tansu cannot do (above) run

    def ports(self) -> AbstractContextManager[tuple[int, int]]:
        raise NotImplementedError

    def topics(
        self, bootstrap: str, prefix: str, count: int = 1, partitions: int = 1
    ) -> AbstractContextManager[list[str]]:
        raise NotImplementedError

    def direct(self, bootstrap: str) -> str:
        raise NotImplementedError

    def delete_topics(self, names) -> None:
        """Delete ``names`` (those that exist) at the broker, where it outlives the test."""

    def config(self, proxy_port: int, broker_port: int, quotas: list | None = None, **settings) -> dict:
        raise NotImplementedError

    @contextmanager
    def sidecar(self, quotas: list | None = None, **settings) -> Iterator[RunningProxy]:
        """A sidecar proxy in front of the broker with ``quotas`` and ``settings``, stopped (and on Tansu its broker
        too) when the block ends."""
        with self.ports() as (proxy_port, broker_port):
            proxy = start_proxy(self.config(proxy_port, broker_port, quotas, **settings))
            try:
                yield proxy
            finally:
                proxy.stop()


class TansuUpstream(Upstream):
    name = "tansu"
    kafka = False

    @contextmanager
    def ports(self) -> Iterator[tuple[int, int]]:
        """(the port a sidecar proxy binds, the broker's port it forwards to): a Tansu broker of its own, advertising
        the proxy's port, stopped when the block ends."""
        proxy_port, broker_port = free_port(), free_port()
        broker = Tansu(broker_port, advertised=f"127.0.0.1:{proxy_port}").start()
        try:
            yield proxy_port, broker_port
        finally:
            broker.stop()

    def config(self, proxy_port: int, broker_port: int, quotas: list | None = None, **settings) -> dict:
        return proxy_config(proxy_port, broker_port, quotas, **settings)

    @contextmanager
    def topics(self, bootstrap: str, prefix: str, count: int = 1, partitions: int = 1) -> Iterator[list[str]]:
        """``count`` new topics of ``partitions`` each, made through the proxy at ``bootstrap`` by a client under no
        quota (Tansu's one listener is advertised as the proxy); gone with the broker."""
        names = [unique_topic(f"{prefix}{i}" if count > 1 else prefix) for i in range(count)]
        for name in names:
            c.kp_create_topic(bootstrap, name, partitions)
        yield names

    def direct(self, bootstrap: str) -> str:
        """Where a client reaches the broker past every quota: through the proxy at ``bootstrap``, under no quota
        (Tansu's one listener is advertised as the proxy, so a client bootstrapped at Tansu ends up there anyway)."""
        return bootstrap


class KafkaUpstream(Upstream):
    kafka = True

    def __init__(self, cluster: KafkaCluster) -> None:
        self.cluster = cluster
        self.name = cluster.name

    @contextmanager
    def ports(self) -> Iterator[tuple[int, int]]:
        """(the port a sidecar proxy binds, the broker's port it forwards to): where the cluster's one node advertises
        its CLIENT listener, and that listener."""
        (node,) = self.cluster.nodes
        yield node.proxy_port, node.client_port

    def config(self, proxy_port: int, broker_port: int, quotas: list | None = None, **settings) -> dict:
        config = proxy_config(proxy_port, broker_port, quotas, **settings)
        config["dynamic_config"] = {"enabled": False}  # the cluster's config topic is every Kafka test's
        return config

    @contextmanager
    def topics(self, bootstrap: str, prefix: str, count: int = 1, partitions: int = 1) -> Iterator[list[str]]:
        """``count`` new topics of ``partitions`` each, made directly at the brokers (not through the proxy at
        ``bootstrap``); deleted when the block ends."""
        with quotas_common.topics(self.cluster, prefix, count, partitions) as names:
            yield names

    def direct(self, bootstrap: str) -> str:
        """Where a client reaches the broker past every quota: the DIRECT listener, advertised as itself (not the
        proxy at ``bootstrap``)."""
        return self.cluster.direct_bootstrap

    def delete_topics(self, names) -> None:
        quotas_common.delete_topics(self.cluster, names)
