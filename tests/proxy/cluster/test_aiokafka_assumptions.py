"""What proxy.cluster.own_clients assumes of aiokafka's internals (aiokafka has no public hook for either), checked
against the installed aiokafka; pyproject.toml pins aiokafka to the range these pass on."""

from __future__ import annotations

import asyncio

from proxy.cluster import own_clients


def test_aiokafka_clients_connect_where_the_route_says():
    """An AIOKafkaClient bootstrapping from one address reaches the address ROUTE gives instead: aiokafka's client
    still opens its connections through ``aiokafka.client.create_conn``."""
    from aiokafka.client import AIOKafkaClient

    assert own_clients.track_aiokafka()

    async def scenario():
        reached = {"advertised": 0, "routed": 0}

        def server(name):
            def accepted(reader, writer):
                reached[name] += 1
                writer.close()

            return asyncio.start_server(accepted, "127.0.0.1", 0)

        advertised, routed = await server("advertised"), await server("routed")
        routed_port = routed.sockets[0].getsockname()[1]

        async def route(host, port):
            return ("127.0.0.1", routed_port)

        token = own_clients.ROUTE.set(route)
        try:
            client = AIOKafkaClient(
                bootstrap_servers=f"127.0.0.1:{advertised.sockets[0].getsockname()[1]}",
                request_timeout_ms=1000,
                connections_max_idle_ms=10_000,
            )
            try:
                await asyncio.wait_for(client.bootstrap(), 2)
            except Exception:  # noqa: BLE001 - nothing answers as a broker; only where it connected matters
                pass
            finally:
                await client.close()
        finally:
            own_clients.ROUTE.reset(token)
            advertised.close()
            routed.close()
        return reached

    reached = asyncio.run(scenario())
    assert reached["advertised"] == 0 and reached["routed"] >= 1, reached


def test_aiokafka_connections_are_made_with_the_noted_protocol():
    """aiokafka's connection builds its transport with ``aiokafka.conn.AIOKafkaProtocol``, looked up when it
    connects, so the subclass track_aiokafka installs notes every connection's addresses."""
    import aiokafka.conn as conn

    assert own_clients.track_aiokafka()
    assert getattr(conn.AIOKafkaProtocol, "noted_by_the_proxy", False)

    async def scenario():
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        connection = conn.AIOKafkaConnection("127.0.0.1", port, request_timeout_ms=1000)
        connecting = asyncio.ensure_future(connection.connect())  # no broker behind it: it never completes
        noted = set()
        for _ in range(200):
            noted = {pair for pair in own_clients.NOTED if pair[1] == ("127.0.0.1", port)}
            if noted or connecting.done():
                break
            await asyncio.sleep(0.01)
        connecting.cancel()
        connection.close()
        server.close()
        return noted

    assert len(asyncio.run(scenario())) == 1
