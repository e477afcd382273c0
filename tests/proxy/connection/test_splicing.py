"""proxy.connection.splicing.Splicer on its own, over real loopback sockets: handed only a core with the six members
of ``StreamingCore``, transports and the five ``SpliceEvents``, it splices a large frame's rest, holds the writes to
the socket a splice owns and sends them after, tells the core how many bytes passed, counts them, reports a lost side
as the connection's, and on close stops everything and lets go of the connection."""

from __future__ import annotations

import asyncio
import gc
import os
import socket

import pytest

from proxy.connection.splice import BOUNDARY_READ_BYTES, SPLICE_MIN_BYTES, splice_supported
from proxy.connection.splicing import Splicer
from proxy.connection.write_batch import PureWriteBatch
from proxy.connection.writer import writer_of
from tests.harness import new_loop, tcp_pair

pytestmark = pytest.mark.skipif(not splice_supported(), reason="splice(2) is Linux-only")


class Core:
    """Only what ``StreamingCore`` declares (slots: anything else the splicer touched would be an AttributeError)."""

    __slots__ = ("request_streaming", "response_streaming", "passed")

    def __init__(self) -> None:
        self.request_streaming = self.response_streaming = 0
        self.passed: list[tuple[str, int]] = []

    def requests_passed(self, nbytes: int) -> None:
        self.passed.append(("request", nbytes))

    def responses_passed(self, nbytes: int) -> None:
        self.passed.append(("response", nbytes))


class Transport:
    """A socket transport as far as the splicer uses one: its socket, writes, reading on or off."""

    __slots__ = ("sock", "reading")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.reading = True

    def get_extra_info(self, name: str):
        return self.sock if name == "socket" else None

    def write(self, data) -> None:
        self.sock.setblocking(True)
        self.sock.sendall(data)
        self.sock.setblocking(False)

    def writelines(self, frames) -> None:
        for data in frames:
            self.write(data)

    def pause_reading(self) -> None:
        self.reading = False


class Upstream:
    __slots__ = ("transport", "writer")

    def __init__(self, transport: Transport) -> None:
        self.transport = transport
        self.writer = writer_of(transport)  # as UpstreamConnection.connection_made makes it


class Events:
    __slots__ = ("log", "ended")

    def __init__(self, loop) -> None:
        self.log: list[tuple] = []
        self.ended = loop.create_future()

    def spliced_client_read(self) -> None:
        if not self.log or self.log[-1] != ("read",):
            self.log.append(("read",))

    def pause_writing(self) -> None:
        self.log.append(("backpressure", True))

    def resume_writing(self) -> None:
        self.log.append(("backpressure", False))

    def splice_ended(self, direction: str) -> None:
        self.log.append(("ended", direction))
        self.ended.set_result(direction)

    def splice_lost(self, client: bool, exc: OSError) -> None:
        self.log.append(("lost", "client" if client else "broker"))
        self.ended.set_result("lost")


class Counter:
    def __init__(self) -> None:
        self.counts: dict[tuple, int] = {}

    def labels(self, *labels):
        counts = self.counts

        class Child:
            def inc(self, n):
                counts[labels] = counts.get(labels, 0) + n

        return Child()


class Wired:
    """A splicer between a client socket and a broker socket; ``client_peer``/``broker_peer`` are the far ends."""

    def __init__(self, loop, enabled: bool = True, writes: bool = False) -> None:
        self.client_peer, client = tcp_pair()
        broker, self.broker_peer = tcp_pair()
        self.client, self.broker = Transport(client), Transport(broker)
        self.core, self.events, self.counter = Core(), Events(loop), Counter()
        self.splicer = Splicer(loop, self.events, enabled=enabled, spliced_bytes=self.counter, listener="L")
        self.splicer.attach_core(self.core)
        if writes:  # the connection's write batch, as the client connection makes and attaches it
            splicer = self.splicer
            self.writes = PureWriteBatch(
                splicer.write_client, splicer.write_broker, splicer.send_client, splicer.send_broker
            )
            splicer.attach_writes(self.writes)
        self.splicer.attach_client(self.client)
        self.splicer.attach_broker(Upstream(self.broker))

    def close(self) -> None:
        for s in (self.client_peer, self.client.sock, self.broker.sock, self.broker_peer):
            s.close()


async def recv_exactly(loop, sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        out += await loop.sock_recv(sock, n - len(out))
    return bytes(out)


def test_a_request_rest_is_spliced_writes_wait_for_it_and_the_core_is_told() -> None:
    loop = new_loop("uvloop")
    wired = Wired(loop)
    rest = os.urandom(2 * SPLICE_MIN_BYTES + 12345)

    async def main():
        wired.core.request_streaming = len(rest)
        wired.splicer.after_client_read()
        assert wired.splicer.request is not None and not wired.client.reading  # the splice reads the client now
        wired.splicer.write_broker(b"next")  # the broker's socket is the splice's: this waits
        await loop.sock_sendall(wired.client_peer, rest)
        assert await asyncio.wait_for(wired.events.ended, 10) == "request"
        return await recv_exactly(loop, wired.broker_peer, len(rest) + 4)

    got = loop.run_until_complete(asyncio.wait_for(main(), 30))
    assert got == rest + b"next"  # the held write after the frame's rest, never inside it
    assert wired.core.passed == [("request", len(rest))]
    assert wired.counter.counts == {("L", "request"): len(rest)}
    assert wired.events.log == [("read",), ("ended", "request")]
    assert wired.splicer.request is None
    wired.close()
    loop.close()


def test_writes_go_straight_to_each_transport_and_through_the_splicer_only_while_a_splice_owns_the_socket() -> None:
    loop = new_loop("uvloop")
    wired = Wired(loop, writes=True)
    batch, splicer = wired.writes, wired.splicer
    rest = os.urandom(2 * SPLICE_MIN_BYTES + 12345)

    async def main():
        assert batch._write_broker == wired.broker.write and batch._write_client == wired.client.write
        assert batch._send_broker == wired.broker.writelines and batch._send_client == wired.client.writelines
        wired.core.request_streaming = len(rest)
        splicer.after_client_read()
        assert batch._write_broker == splicer.write_broker and batch._send_broker == splicer.send_broker
        assert batch._write_client == wired.client.write  # the client's socket is not the splice's
        batch.broker(b"next")  # waits for the splice
        assert batch.start(False)
        batch.broker(b"more")  # so does a batch of writes
        batch.broker(b"again")
        batch.send()
        await loop.sock_sendall(wired.client_peer, rest)
        assert await asyncio.wait_for(wired.events.ended, 10) == "request"
        assert batch._write_broker == wired.broker.write  # straight again
        batch.broker(b"then")
        return await recv_exactly(loop, wired.broker_peer, len(rest) + 17)

    got = loop.run_until_complete(asyncio.wait_for(main(), 30))
    assert got == rest + b"nextmoreagainthen"
    wired.close()
    loop.close()


def test_reads_are_bounded_at_a_boundary_only_while_splicing_is_possible() -> None:
    loop = new_loop("uvloop")
    on, off = Wired(loop), Wired(loop, enabled=False)
    assert on.splicer.possible and not off.splicer.possible
    # the bound the core applies to a read at a frame boundary (tests/proxy/connection/test_flow.py)
    assert on.splicer.boundary_read_bytes == BOUNDARY_READ_BYTES and off.splicer.boundary_read_bytes == 0
    off.core.request_streaming = 1 << 20
    off.splicer.after_client_read()
    assert off.splicer.request is None and off.client.reading  # copied, as connections.splice off says
    on.close()
    off.close()
    loop.close()


def test_a_client_gone_under_a_response_splice_is_the_client_lost() -> None:
    loop = new_loop("uvloop")
    wired = Wired(loop)
    wired.client_peer.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    wired.client_peer.close()  # a reset: the response's destination is gone

    async def main():
        wired.core.response_streaming = 4 << 20
        wired.splicer.after_broker_read()
        assert wired.splicer.response is not None and not wired.broker.reading
        for _ in range(40):
            if wired.events.ended.done():
                break
            await asyncio.wait_for(loop.sock_sendall(wired.broker_peer, b"r" * 100_000), 5)
        return await asyncio.wait_for(wired.events.ended, 10)

    assert loop.run_until_complete(asyncio.wait_for(main(), 30)) == "lost"
    assert wired.events.log[-1] == ("lost", "client")
    assert wired.core.passed == []  # the frame never ended: the connection closes
    for s in (wired.client.sock, wired.broker.sock, wired.broker_peer):
        s.close()
    loop.close()


def test_close_stops_the_splice_counts_what_moved_and_lets_go_of_the_connection() -> None:
    loop = new_loop("uvloop")
    wired = Wired(loop)

    async def main():
        wired.core.request_streaming = 4 << 20
        wired.splicer.after_client_read()
        await loop.sock_sendall(wired.client_peer, b"q" * 200_000)
        got = await recv_exactly(loop, wired.broker_peer, 200_000)  # moved by the splice, which waits for more
        wired.splicer.close()
        await asyncio.sleep(0)
        return got

    assert loop.run_until_complete(asyncio.wait_for(main(), 30)) == b"q" * 200_000
    assert wired.splicer.request is None and not wired.splicer.possible
    assert wired.counter.counts == {("L", "request"): 200_000}
    assert not wired.events.ended.done() and wired.core.passed == []  # cancelled: nothing ends, nothing is passed
    held = gc.get_referents(wired.splicer)  # what its slots hold
    assert all(o is not wired.events and o is not wired.core for o in held)  # no cycle back to the connection
    wired.splicer.after_client_read()  # a late read event starts nothing
    assert wired.splicer.request is None
    wired.close()
    loop.close()
