"""Cluster mode when a broker's port is held by another process: the proxy is not ready (/readyz, the ready gauge)
while it cannot serve that broker, tries the port again, and serves it once it is free. Before, the failed bind was
logged, discovery said "every port open", /readyz said ready, and that broker's clients were refused for good."""

import socket

import pytest

from tests.harness import Tansu, cluster_config, cluster_ports, free_port, start_proxy, wait_until
from tests.integration import clients as c

pytestmark = pytest.mark.integration


def test_a_taken_broker_port_keeps_the_proxy_not_ready_until_it_is_served():
    from kafka.admin import KafkaAdminClient

    broker_port = free_port()
    broker = Tansu(broker_port, advertised=f"127.0.0.1:{broker_port}").start()
    holder = socket.socket()
    proxy = None
    try:
        admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{broker_port}")
        try:
            (node_id,) = [b["broker_id"] for b in admin.describe_cluster()["brokers"]]
        finally:
            admin.close()
        bootstrap_port, base = cluster_ports(node_id + 1)
        holder.bind(("127.0.0.1", base + node_id))
        holder.listen()
        proxy = start_proxy(
            cluster_config([f"127.0.0.1:{broker_port}"], bootstrap_port, base, dynamic_config={"enabled": False})
        )
        assert proxy.metric("kafka_quota_proxy_ready") == 0
        assert proxy.call(_not_ready(proxy.app)) == "the cluster's broker ports are not open yet"
        holder.close()  # the other process lets the port go: the proxy's next try opens it
        wait_until(lambda: proxy.metric("kafka_quota_proxy_ready") == 1, 30, "ready once the port is served")
        topic = f"port-taken-{node_id}"
        c.kp_produce(proxy.bootstrap, topic, 5)  # every message acknowledged, through the broker's port
    finally:
        holder.close()
        if proxy is not None:
            proxy.stop()
        broker.stop()


async def _not_ready(app):
    return app.not_ready()
