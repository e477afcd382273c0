"""A client connection's lifecycle (proxy.connection.lifecycle): the table itself, then each move as the socket code
makes it, over real loopback sockets on port 0: the proxy's own Listener and ClientConnection in front of a plain TCP
peer that stands for the broker's socket (who opens, half-closes and closes first is what is tested; no Kafka
behaviour decides it). The requests are ListOffsets v5 frames, which no handler decodes, answered by the peer with a
response of the same correlation id.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from prometheus_client import CollectorRegistry

from config.loader import parse_config
from config.model import Address
from proxy.apis import ConnectionScope
from proxy.cluster.topics import Topics
from proxy.codec.apis import LIST_OFFSETS
from proxy.codec.header import encode_request_header, encode_response_header, frame
from proxy.connection.buffers import SharedReadBuffer
from proxy.connection.client_context import ApiMetricsCache
from proxy.connection.client_socket import ClientConnection, ListenerContext
from proxy.connection.lifecycle import TRANSITIONS, ConnectionState, Event, IllegalTransition, Lifecycle
from proxy.connection.listener import SETUPS_PER_NETWORK, Listener
from proxy.enforcement.proxy_quotas import ProxyQuotas
from proxy.ops.metrics import ProxyMetrics
from quota.managers.connection import ConnectionQuotas
from quota.primitives.clock import ManualClock
from quota.primitives.rate import QuotaWindow
from tests.harness import free_port, new_loop

State = ConnectionState
WAIT_S = 10  # a bound on each wait, never reached unless the behaviour is wrong


# -- the table ----------------------------------------------------------------------------------------------------


def test_every_event_moves_as_the_table_says_and_any_other_raises_leaving_the_state():
    for state, moves in TRANSITIONS.items():
        for event in Event:
            life = Lifecycle()
            life.state = state
            if event in moves:
                assert life.on(event) is moves[event] and life.state is moves[event]
            else:
                with pytest.raises(IllegalTransition, match=f"{state.name} cannot take {event.name}"):
                    life.on(event)
                assert life.state is state


def test_every_state_is_reached_from_admitted_and_every_state_but_closed_can_close():
    reached, frontier = {State.ADMITTED}, [State.ADMITTED]
    while frontier:
        for new in TRANSITIONS[frontier.pop()].values():
            if new not in reached:
                reached.add(new)
                frontier.append(new)
    assert reached == set(State)
    assert TRANSITIONS[State.CLOSED] == {}
    assert all(moves[Event.CLOSE] is State.CLOSED for state, moves in TRANSITIONS.items() if state is not State.CLOSED)


def test_a_second_close_does_nothing_and_keeps_the_first_reason():
    life = Lifecycle()
    assert life.close("upstream_unreachable") and life.closed and life.closed_reason == "upstream_unreachable"
    assert not life.close("client_closed") and life.closed_reason == "upstream_unreachable"


# -- over loopback sockets ------------------------------------------------------------------------------------------


def request(corr: int) -> bytes:
    return frame(encode_request_header(LIST_OFFSETS, 5, corr, "lifecycle") + b"\x00" * 64)


def response(corr: int) -> bytes:
    return frame(encode_response_header(LIST_OFFSETS, 5, corr) + b"\x00" * 16)


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    size = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), WAIT_S))[0]
    return await asyncio.wait_for(reader.readexactly(size), WAIT_S)


def request_id(body: bytes) -> int:
    return struct.unpack_from(">i", body, 4)[0]  # after the API key and version


def response_id(body: bytes) -> int:
    return struct.unpack_from(">i", body)[0]


class Peer:
    """The broker's side of each connection the proxy opens: its streams, in the order they were accepted."""

    def __init__(self) -> None:
        self.accepted: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = asyncio.Queue()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await self.accepted.put((reader, writer))

    async def next(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.wait_for(self.accepted.get(), WAIT_S)


def context(broker_port: int) -> ListenerContext:
    config = parse_config(
        {"upstream": {"bootstrap_servers": ["127.0.0.1:1"]}, "listeners": [{"name": "L", "bind": "h:2"}]}
    )
    return ListenerContext(
        name="L",
        upstreams=lambda: (Address("127.0.0.1", broker_port),),
        scope=ConnectionScope(None, Topics(), ProxyQuotas(config).home),
        max_request_bytes=1 << 20,
        max_response_bytes=1 << 20,
        max_inflight_requests=10,
        max_buffered_response_bytes=1 << 20,
        connect_timeout_s=WAIT_S,
        metrics=ProxyMetrics(CollectorRegistry()),
        request_buffer=SharedReadBuffer(),
        response_buffer=SharedReadBuffer(),
        on_upstream_result=lambda ok: None,
        connections=set(),
        connection_quotas=ConnectionQuotas(["L"], QuotaWindow(11, 1)),
        clock=ManualClock(),
    )


async def until(condition, what: str) -> None:
    """Wait (on the loop, in small steps) for ``condition()``, failing after WAIT_S."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    while not condition():
        assert loop.time() < deadline, what
        await asyncio.sleep(0.005)


@asynccontextmanager
async def served(broker_port: int | None = None) -> AsyncIterator[tuple[Listener, Peer, ListenerContext]]:
    """A listener in front of a fresh peer, or of ``broker_port`` where nothing listens."""
    peer = Peer()
    server = await asyncio.start_server(peer.serve, "127.0.0.1", 0)
    ctx = context(broker_port or server.sockets[0].getsockname()[1])
    listener = Listener(ctx, "127.0.0.1", 0)
    listener.start_now()
    try:
        yield listener, peer, ctx
    finally:
        for conn in list(ctx.connections):
            conn.abort()
        await listener.close()
        server.close()


async def the_connection(ctx: ListenerContext, state: ConnectionState) -> ClientConnection:
    await until(lambda: any(c.life.state is state for c in ctx.connections), f"a connection in {state.name}")
    return next(c for c in ctx.connections if c.life.state is state)


def closed_for(ctx: ListenerContext, reason: str) -> float:
    return ctx.metrics.connections_closed.labels("L", reason)._value.get()


def test_a_client_that_half_closes_gets_every_answer_then_the_brokers_close_ends_it_as_client_closed():
    async def run() -> None:
        async with served() as (listener, peer, ctx):
            reader, writer = await asyncio.open_connection(*listener.address)
            conn = await the_connection(ctx, State.OPEN)  # broker first, then the client socket: OPEN
            broker_reader, broker_writer = await peer.next()
            writer.write(request(1) + request(2))
            writer.write_eof()
            assert [request_id(await read_frame(broker_reader)) for _ in range(2)] == [1, 2]
            assert await asyncio.wait_for(broker_reader.read(), WAIT_S) == b""  # the half-close, after both
            assert conn.life.state is State.HALF_CLOSED
            broker_writer.write(response(1) + response(2))
            await broker_writer.drain()
            assert [response_id(await read_frame(reader)) for _ in range(2)] == [1, 2]
            broker_writer.close()
            await until(lambda: conn.closed, "closed once the broker closed")
            assert conn.life.closed_reason == "client_closed" and closed_for(ctx, "client_closed") == 1
            assert await asyncio.wait_for(reader.read(), WAIT_S) == b""
            writer.close()

    new_loop().run_until_complete(run())


def test_a_broker_that_closes_first_closes_the_client_as_upstream_closed():
    async def run() -> None:
        async with served() as (listener, peer, ctx):
            reader, writer = await asyncio.open_connection(*listener.address)
            conn = await the_connection(ctx, State.OPEN)
            _, broker_writer = await peer.next()
            broker_writer.close()
            assert await asyncio.wait_for(reader.read(), WAIT_S) == b""
            assert conn.life.closed_reason == "upstream_closed" and closed_for(ctx, "upstream_closed") == 1
            writer.close()

    new_loop().run_until_complete(run())


def test_a_client_whose_broker_cannot_be_reached_is_closed_from_admitted():
    async def run() -> None:
        async with served(broker_port=free_port()) as (listener, _, ctx):  # reserved for this test, not listened on
            reader, writer = await asyncio.open_connection(*listener.address)
            assert await asyncio.wait_for(reader.read(), WAIT_S) == b""
            assert closed_for(ctx, "upstream_unreachable") == 1 and not ctx.connections
            writer.close()

    new_loop().run_until_complete(run())


@pytest.mark.parametrize("loop_kind", ["uvloop", "asyncio"])
def test_a_client_wrapped_before_its_broker_is_open_is_read_only_once_it_is(loop_kind):
    """A TLS client's order (its socket wrapped after the handshake, then its broker dialled), without TLS: what it
    sent meanwhile waits in the kernel and reaches the broker once the broker connection is open; wrapping it again
    is illegal."""

    async def run() -> None:
        async with served() as (_, peer, ctx):
            with socket.create_server(("127.0.0.1", 0)) as listening:
                client = socket.create_connection(listening.getsockname()[:2])
                sock, address = listening.accept()
            sock.setblocking(False)
            client.sendall(request(7))
            conn = ClientConnection(ctx)
            conn.accepted(address)
            transport, _ = await asyncio.get_running_loop().connect_accepted_socket(lambda: conn, sock)
            assert conn.life.state is State.AWAITING_BROKER and peer.accepted.empty()
            with pytest.raises(IllegalTransition):
                conn.connection_made(transport)
            assert await conn.connect_upstream() and conn.life.state is State.OPEN
            broker_reader, _ = await peer.next()
            assert request_id(await read_frame(broker_reader)) == 7
            client.close()

    new_loop(loop_kind).run_until_complete(run())


# -- the listener: admitted connections set up in turn (proxy.connection.setup_queue) ------------------------------

FLOOD = 200  # connections queued in the kernel at once, under its backlog of 1,024


@pytest.mark.parametrize("loop_kind", ["uvloop", "asyncio"])
def test_a_newcomer_queued_behind_a_flood_from_one_address_is_set_up_among_the_first(loop_kind):
    """200 connections from 127.0.0.1, each with a request sent, wait in the kernel's accept queue; a newcomer from
    127.0.0.250 connects after them. Taken first come first served, the newcomer's broker connection was the 201st.
    Now the listener takes them all at once and sets them up in turn: its network (127.0.0.0/24, the flood's too)
    has SETUPS_PER_NETWORK under way, each until the broker's first reply (this peer never replies: until
    SETUP_SLOT_S), then the flood's next and the newcomer take turns."""

    async def run() -> None:
        async with served() as (listener, peer, ctx):
            clients = []
            try:
                for n in range(FLOOD + 1):  # blocking connects: the listener does not run until all are queued
                    client = socket.socket()
                    clients.append(client)
                    client.bind(("127.0.0.250" if n == FLOOD else "127.0.0.1", 0))
                    client.connect(listener.address)
                    client.sendall(request(n))
                order = []
                while FLOOD not in order:
                    broker_reader, _ = await peer.next()
                    order.append(request_id(await read_frame(broker_reader)))
                assert len(order) <= SETUPS_PER_NETWORK + 2, order
                assert order[: len(order) - 1] == list(range(len(order) - 1))  # the flood in its own order
            finally:
                for client in clients:
                    client.close()

    new_loop(loop_kind).run_until_complete(run())


def test_a_connections_per_api_metrics_are_the_listeners_fetched_once_per_key():
    metrics = ProxyMetrics(CollectorRegistry())
    cache = ApiMetricsCache(metrics, "L")
    assert cache[LIST_OFFSETS] is metrics.api("L", LIST_OFFSETS) and cache[LIST_OFFSETS] is cache[LIST_OFFSETS]
    assert cache[999] is metrics.api("L", 999) and list(cache) == [LIST_OFFSETS, 999]  # an unknown key: shared
