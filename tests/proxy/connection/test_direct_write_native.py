"""The connection extension's DirectWrite (proxy/connection/native/direct.c) against the uvloop transport it stands
for: the same writes (single buffers of every size, writelines of few and of many frames, bytes, bytearrays and
memoryview slices, empty ones, and the transport's own write in between) through two connections, one written by
the transport and one by its DirectWrite, each to a reader that stops reading for a while so that sends are partial
and refused; the bytes each reader gets compared, and each call's outcome. Then what a closing transport and
write_eof do. Skipped where the extension or uvloop is missing."""

from __future__ import annotations

import asyncio
import random
import socket

import pytest

from proxy.connection.writer import PLAIN_TCP, writer_of
from quota.primitives.compiled import load_compiled
from tests.twins import outcome

native, _ = load_compiled("proxy.connection._native")
if native is None or PLAIN_TCP is None:
    pytest.skip("the C extension or uvloop is missing here (or the pure path is chosen)", allow_module_level=True)

import uvloop  # noqa: E402


class Reader(asyncio.Protocol):
    def __init__(self) -> None:
        self.data = bytearray()
        self.transport: asyncio.Transport | None = None
        self.ended = asyncio.get_running_loop().create_future()

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.data += data

    def eof_received(self):
        if not self.ended.done():
            self.ended.set_result(None)

    def connection_lost(self, exc) -> None:
        if not self.ended.done():
            self.ended.set_result(None)


async def connected():
    """(the writing transport, the Reader at the other end)."""
    loop = asyncio.get_running_loop()
    readers: list[Reader] = []

    def made() -> Reader:
        readers.append(Reader())
        return readers[-1]

    listening = socket.create_server(("127.0.0.1", 0))
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)  # small: the reader paused soon refuses more
    server = await loop.create_server(made, sock=listening)
    port = listening.getsockname()[1]
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 131072)  # fixed (no autotuning), a few segments
    sock.setblocking(False)
    transport, _ = await loop.create_connection(asyncio.Protocol, sock=sock)
    while not readers:
        await asyncio.sleep(0.001)
    server.close()
    return transport, readers[0]


def script(seed: int) -> list[tuple]:
    """A random sequence of writes: ("write", data), ("lines", [frames]), ("own", data) (the transport's own write),
    ("pause",) and ("resume",) of the reader."""
    rng = random.Random(seed)
    steps: list[tuple] = []
    counter = 0

    def data(sizes=(0, 1, 7, 100, 4096, 65536, 200_000)) -> bytes | bytearray | memoryview:
        nonlocal counter
        counter += 1
        size = rng.choice(sizes)
        body = (b"%08d" % counter) * (size // 8 + 1)
        body = body[:size]
        kind = rng.randrange(3)
        if kind == 1:
            return bytearray(body)
        if kind == 2:
            return memoryview(b"xx" + body + b"yy")[2 : 2 + size]
        return body

    for _ in range(40):
        roll = rng.random()
        if roll < 0.4:
            steps.append(("write", data()))
        elif roll < 0.7:
            count = rng.choice([1, 2, 5, 64, 65, 100])  # DIRECT_IOV_MAX is 64
            steps.append(("lines", [data((0, 1, 100, 4096, 20_000)) for _ in range(count)]))
        elif roll < 0.8:
            steps.append(("own", data()))
        elif roll < 0.9:
            steps.append(("pause",))
        else:
            steps.append(("resume",))
    return steps


async def run(steps: list[tuple], direct: bool) -> tuple[bytes, list, int]:
    transport, reader = await connected()
    writer = writer_of(transport) if direct else transport
    assert isinstance(writer, native.DirectWrite) == direct
    outcomes = []
    held = 0  # writes after which the transport held something: the socket had refused some of it
    for step in steps:
        if step[0] == "write":
            outcomes.append(outcome(writer.write, step[1]))
        elif step[0] == "lines":
            outcomes.append(outcome(writer.writelines, step[1]))
        elif step[0] == "own":
            outcomes.append(outcome(transport.write, step[1]))
        elif step[0] == "pause":
            reader.transport.pause_reading()
        else:
            reader.transport.resume_reading()
        held += transport.get_write_buffer_size() > 0
        await asyncio.sleep(0)
    reader.transport.resume_reading()
    writer.write_eof()
    await asyncio.wait_for(reader.ended, 30)
    transport.close()
    return bytes(reader.data), outcomes, held


def expected(steps: list[tuple]) -> bytes:
    out = bytearray()
    for step in steps:
        if step[0] in ("write", "own"):
            out += step[1]
        elif step[0] == "lines":
            for frame in step[1]:
                out += frame
    return bytes(out)


@pytest.mark.parametrize("seed", range(6))
def test_the_same_writes_reach_the_reader_alike_in_order(seed):
    steps = script(seed)

    async def both():
        return await run(steps, direct=False), await run(steps, direct=True)

    (plain, plain_outcomes, _), (direct, direct_outcomes, held) = uvloop.run(both())
    assert plain == expected(steps)
    assert direct == plain
    assert direct_outcomes == plain_outcomes
    assert held > 0  # some sends were refused, in part or whole, and left to the transport


def test_partial_sends_happened():
    """The scripts above do make the socket refuse: a write larger than both buffers, the reader paused, is sent in
    part and the rest left to the transport (its buffer then holds it)."""

    async def go():
        transport, reader = await connected()
        reader.transport.pause_reading()
        writer = writer_of(transport)
        writer.write(b"a" * 2_000_000)
        waiting = transport.get_write_buffer_size()
        writer.write(b"b" * 10)  # goes behind the rest, through the transport
        reader.transport.resume_reading()
        writer.write_eof()
        await asyncio.wait_for(reader.ended, 30)
        transport.close()
        return waiting, bytes(reader.data)

    waiting, got = uvloop.run(go())
    assert 0 < waiting < 2_000_000
    assert got == b"a" * 2_000_000 + b"b" * 10


def test_after_write_eof_and_close_it_does_what_the_transport_does():
    async def go(direct: bool):
        transport, reader = await connected()
        writer = writer_of(transport) if direct else transport
        writer.write(b"before")
        writer.write_eof()
        after_eof = [outcome(writer.write, b"after eof"), outcome(writer.writelines, [b"x", b"y"])]
        await asyncio.wait_for(reader.ended, 30)
        transport.close()
        after_close = [outcome(writer.write, b"after close"), outcome(writer.writelines, [b"z"])]
        await asyncio.sleep(0.01)
        return bytes(reader.data), after_eof, after_close

    async def both():
        return await go(False), await go(True)

    plain, direct = uvloop.run(both())
    assert plain[0] == b"before"
    assert direct == plain


def test_after_close_nothing_more_is_sent_though_the_socket_is_still_open():
    """close() lets the loop close the socket on a later turn: a write in between is dropped by the transport, and
    must not reach the socket directly."""

    async def go(direct: bool):
        transport, reader = await connected()
        writer = writer_of(transport) if direct else transport
        writer.write(b"before")
        transport.close()
        got = [outcome(writer.write, b"after close"), outcome(writer.writelines, [b"z"])]
        await asyncio.wait_for(reader.ended, 30)
        return bytes(reader.data), got

    async def both():
        return await go(False), await go(True)

    plain, direct = uvloop.run(both())
    assert plain[0] == b"before"
    assert direct == plain


def test_what_is_not_bytes_like_is_refused_as_the_transport_refuses_it():
    async def go(direct: bool):
        transport, reader = await connected()
        writer = writer_of(transport) if direct else transport
        got = [outcome(writer.write, "text"), outcome(writer.writelines, [b"a", "text"]), outcome(writer.write, 5)]
        writer.write(b"end")
        writer.write_eof()
        await asyncio.wait_for(reader.ended, 30)
        transport.close()
        return got, bytes(reader.data)

    async def both():
        return await go(False), await go(True)

    plain, direct = uvloop.run(both())
    assert direct == plain


def test_other_transports_are_written_by_themselves():
    async def go():
        loop = asyncio.get_running_loop()
        server = await loop.create_server(asyncio.Protocol, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        transport, _ = await loop.create_connection(asyncio.Protocol, "127.0.0.1", port)
        chosen = writer_of(transport)
        transport.close()
        server.close()
        return chosen is transport

    assert asyncio.run(go())  # the standard library's loop: its transport
