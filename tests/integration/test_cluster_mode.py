"""Cluster mode against Tansu: the broker advertises its own address, and only the proxy's rewriting keeps
clients on the proxy.

Tansu listens on a hidden port; its advertised address is a recording relay in front of it, so any connection
that reaches the advertised address is recorded. Every such connection must be one of the proxy's own upstream
connections: no client ever goes to the broker directly."""

import asyncio

import pytest

from proxy import app as proxy_app
from proxy.cluster import own_clients
from proxy.codec.apis import DESCRIBE_CLUSTER, FIND_COORDINATOR, METADATA
from proxy.connection.broker_socket import UpstreamConnection
from tests.harness import Tansu, cluster_config, cluster_ports, free_port, start_proxy
from tests.integration import clients as c
from tests.integration import raw
from tests.relay import RecordingRelay

pytestmark = pytest.mark.integration


@pytest.fixture
def cluster(monkeypatch):
    upstream_socknames: list = []
    original = UpstreamConnection.connection_made

    def recording(self, transport):
        upstream_socknames.append(transport.get_extra_info("sockname")[:2])
        original(self, transport)

    monkeypatch.setattr(UpstreamConnection, "connection_made", recording)
    original_open = asyncio.open_connection

    async def recording_open(*args, **kwargs):  # the readiness probe's connections are the proxy's too
        reader, writer = await original_open(*args, **kwargs)
        upstream_socknames.append(writer.get_extra_info("sockname")[:2])
        return reader, writer

    monkeypatch.setattr(proxy_app.asyncio, "open_connection", recording_open)

    class Recording(set):  # the proxy's own aiokafka clients (dynamic config) reach the broker directly too
        def add(self, pair):
            upstream_socknames.append(pair[0])
            super().add(pair)

    monkeypatch.setattr(own_clients, "NOTED", Recording(own_clients.NOTED))
    hidden = free_port()
    relay = RecordingRelay("127.0.0.1", ("127.0.0.1", hidden)).start()
    broker = Tansu(hidden, advertised=f"127.0.0.1:{relay.port}").start()
    bootstrap_port, base = cluster_ports()
    proxy = start_proxy(cluster_config([f"127.0.0.1:{relay.port}"], bootstrap_port, base))
    yield proxy, relay, upstream_socknames, base
    proxy.stop()
    broker.stop()
    relay.stop()


def assert_no_direct_connections(relay, upstream_socknames):
    direct = [p for p in relay.peers if p not in upstream_socknames]
    assert relay.peers, "nothing reached the broker"
    assert not direct, f"clients connected to the broker directly from {direct}"


def test_clients_stay_on_the_proxy(cluster):
    proxy, relay, socknames, base = cluster
    c.kp_create_topic(proxy.bootstrap, "cm", 3)
    c.kp_produce(proxy.bootstrap, "cm", 2000, enable_idempotence=True, acks="all")
    c.assert_exactly_once_in_order(c.kp_consume(proxy.bootstrap, "cm", 2000), 2000)
    c.ck_produce(proxy.bootstrap, "cm", 2000)
    assert sum(len(v) for v in c.ck_consume(proxy.bootstrap, "cm", 4000).values()) == 4000

    async def aio():
        await c.aio_produce(proxy.bootstrap, "cm", 1000)
        return await c.aio_consume(proxy.bootstrap, "cm", 5000)

    assert sum(len(v) for v in asyncio.run(aio()).values()) == 5000
    assert_no_direct_connections(relay, socknames)
    with raw.connect(proxy.port) as sock:  # every broker the proxy advertises has its port open on the proxy
        brokers = raw.exchange(sock, METADATA, 12, topics=[]).brokers
    assert brokers, "no broker advertised"
    for b in brokers:
        assert (b.host, b.port) == ("127.0.0.1", base + b.node_id)
        with raw.connect(b.port) as sock:
            assert [x.node_id for x in raw.exchange(sock, METADATA, 12, topics=[]).brokers] == [b.node_id]


def test_metadata_and_coordinator_show_only_proxy_addresses(cluster):
    proxy, relay, socknames, base = cluster
    from confluent_kafka.admin import AdminClient

    c.ck_create_topic(proxy.bootstrap, "addr", 1)
    meta = AdminClient({"bootstrap.servers": proxy.bootstrap}).list_topics(timeout=10)
    for broker in meta.brokers.values():
        assert (broker.host, broker.port) == ("127.0.0.1", base + broker.id)
    sock = raw.connect(proxy.port)
    try:
        for version in (0, 1):
            described = raw.exchange(sock, DESCRIBE_CLUSTER, version)
            assert described.error_code == 0 and described.brokers
            for b in described.brokers:
                assert (b.host, b.port) == ("127.0.0.1", base + b.broker_id)
        for version in (1, 3):  # single coordinator
            found = raw.exchange(sock, FIND_COORDINATOR, version, key="g1", key_type=0)
            assert found.error_code == 0
            assert (found.host, found.port) == ("127.0.0.1", base + found.node_id)
        for version in (4, 5):  # batched
            found = raw.exchange(sock, FIND_COORDINATOR, version, key_type=0, coordinator_keys=["g1", "g2"])
            assert len(found.coordinators) == 2
            for co in found.coordinators:
                assert co.error_code == 0
                assert (co.host, co.port) == ("127.0.0.1", base + co.node_id)
        for version in (0, 4, 9, 12):
            meta = raw.exchange(sock, METADATA, version, topics=None if version else [])
            for b in meta.brokers:
                assert (b.host, b.port) == ("127.0.0.1", base + b.node_id)
    finally:
        sock.close()
    assert_no_direct_connections(relay, socknames)
