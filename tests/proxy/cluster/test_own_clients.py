"""Which addresses the proxy's own clients are sent to directly (sidecar mode), and that only they are."""

from __future__ import annotations

import asyncio

from proxy.cluster import own_clients
from proxy.cluster.own_clients import SidecarRoute


def test_a_sidecar_listener_on_this_machine_is_routed_to_the_upstream_and_nothing_else_is():
    route = SidecarRoute({9092}, ("10.1.2.3", 9093))

    async def check():
        assert await route("127.0.0.1", 9092) == ("10.1.2.3", 9093)
        assert await route("localhost", 9092) == ("10.1.2.3", 9093)
        assert await route("127.0.0.1", 9094) is None  # another port: another proxy's, or a broker's
        assert await route("192.0.2.1", 9092) is None  # TEST-NET: not an address of this machine
        assert await route("no-such-host.invalid", 9092) is None  # aiokafka reports the failure itself

    asyncio.run(check())


def test_only_the_context_the_route_was_set_in_is_routed():
    seen = []

    async def fake_create_conn(host, port, **kwargs):
        seen.append((host, port))

    import aiokafka.client as client

    original = client.create_conn
    try:
        client.create_conn = fake_create_conn
        own_clients._route_aiokafka()  # wraps the fake

        async def check():
            token = own_clients.ROUTE.set(SidecarRoute({9092}, ("10.1.2.3", 9093)))
            try:
                own = asyncio.get_running_loop().create_task(client.create_conn("127.0.0.1", 9092))
            finally:
                own_clients.ROUTE.reset(token)
            await own
            await client.create_conn("127.0.0.1", 9092)  # created outside: a client that is not the proxy's

        asyncio.run(check())
    finally:
        client.create_conn = original
    assert seen == [("10.1.2.3", 9093), ("127.0.0.1", 9092)]


def test_with_own_clients_set_nothing_is_routed_and_they_bootstrap_on_their_listener():
    from config.loader import load_config_text
    from proxy.cluster.kafka_clients import OwnKafka

    base = (
        "upstream:\n  bootstrap_servers: ['127.0.0.1:9092']\n{own}"
        "listeners: [{{name: CLIENT, bind: '0.0.0.0:19092'}}]\n"
    )
    today = load_config_text(base.format(own=""))
    route = own_clients.sidecar_route(today, {19092})
    assert route is not None and route.upstream == ("127.0.0.1", 9092)
    assert OwnKafka.of(today.upstream.own_traffic).options("c")["bootstrap_servers"] == ["127.0.0.1:9092"]
    own = load_config_text(base.format(own="  own_clients: {bootstrap_servers: ['127.0.0.1:9095']}\n"))
    assert own_clients.sidecar_route(own, {19092}) is None  # the PROXIES listener advertises no sidecar
    assert OwnKafka.of(own.upstream.own_traffic).options("c")["bootstrap_servers"] == ["127.0.0.1:9095"]
    assert own_clients.sidecar_route(today, set()) is None  # cluster mode only: no sidecar listener
