"""proxy.connection.splice over real loopback sockets: exactly the bytes asked for, in order, with back-pressure,
an early end, a failing destination, sockets splice(2) refuses, and nothing left open after a cancel."""

from __future__ import annotations

import asyncio
import os
import socket

import pytest

from proxy.connection import splice as splice_module
from proxy.connection.splice import DESTINATION, UNSUPPORTED, open_splice, splice_supported
from tests.harness import new_loop, tcp_pair

pytestmark = pytest.mark.skipif(not splice_supported(), reason="splice(2) is Linux-only")


def fds() -> int:
    return len(os.listdir("/proc/self/fd")) - 2 * len(splice_module._pool)


class Fd:
    def __init__(self, fd: int) -> None:
        self._fd = fd

    def fileno(self) -> int:
        return self._fd


class Run:
    """One splice from ``src`` to ``dst`` on a fresh loop, recording its callbacks."""

    def __init__(self, loop, src: socket.socket, dst: socket.socket, nbytes: int) -> None:
        self.done = loop.create_future()
        self.blocked: list[bool] = []
        self.reads = 0
        self.splice = open_splice(
            loop, src.fileno(), dst.fileno(), nbytes, done=self._done, blocked=self.blocked.append, read=self._read
        )
        assert self.splice is not None

    def _done(self, moved, failure) -> None:
        self.done.set_result((moved, failure))

    def _read(self) -> None:
        self.reads += 1


@pytest.mark.parametrize("loop_kind", ["uvloop", "asyncio"])
def test_moves_exactly_what_was_asked_in_order_through_a_slow_reader(loop_kind: str) -> None:
    loop = new_loop(loop_kind)
    before = fds()
    writer, src = tcp_pair()
    dst, reader = tcp_pair()
    data = os.urandom(6 * 1024 * 1024)
    after = b"the next frame"

    async def main():
        run = Run(loop, src, dst, len(data))
        run.splice.start()
        out = bytearray()
        await loop.sock_sendall(writer, data + after)
        while len(out) < len(data):  # a slow reader: the destination fills up and the splice waits on it
            await asyncio.sleep(0.001)
            out += await loop.sock_recv(reader, 64 * 1024)
        moved, failure = await asyncio.wait_for(run.done, 10)
        return run, out, moved, failure

    run, out, moved, failure = loop.run_until_complete(main())
    assert (moved, failure) == (len(data), None)
    assert bytes(out) == data  # nothing past the frame: the next frame stays in the source for its transport
    assert src.recv(100) == after
    assert True in run.blocked and run.blocked[-1] is False  # back-pressure came and went
    assert run.reads > 0
    for s in (writer, src, dst, reader):
        s.close()
    loop.close()
    assert fds() <= before


def test_an_early_end_of_the_source_stops_it_with_what_moved() -> None:
    loop = new_loop("uvloop")
    writer, src = tcp_pair()
    dst, reader = tcp_pair()

    async def main():
        run = Run(loop, src, dst, 1 << 20)
        run.splice.start()
        await loop.sock_sendall(writer, b"x" * 300_000)
        writer.shutdown(socket.SHUT_WR)
        return await asyncio.wait_for(run.done, 10)

    assert loop.run_until_complete(main()) == (300_000, None)
    reader.setblocking(True)
    got = b""
    while len(got) < 300_000:
        got += reader.recv(1 << 20)
    assert got == b"x" * 300_000
    for s in (writer, src, dst, reader):
        s.close()
    loop.close()


def test_a_destination_that_is_gone_is_a_destination_failure() -> None:
    loop = new_loop("uvloop")
    writer, src = tcp_pair()
    dst, reader = tcp_pair()
    reader.close()

    async def main():
        run = Run(loop, src, dst, 4 << 20)
        run.splice.start()
        for _ in range(40):
            if run.done.done():
                break
            await loop.sock_sendall(writer, b"y" * 100_000)
        return await asyncio.wait_for(run.done, 10)

    moved, failure = loop.run_until_complete(main())
    assert failure is not None and failure[0] == DESTINATION
    for s in (writer, src, dst):
        s.close()
    loop.close()


def test_what_splice_refuses_is_reported_before_anything_moves() -> None:
    loop = new_loop("uvloop")
    source = os.eventfd(1, os.EFD_NONBLOCK)  # readable, and splice(2) cannot read it (EINVAL)
    dst, reader = tcp_pair()

    async def main():
        run = Run(loop, Fd(source), dst, 1000)
        run.splice.start()
        return await asyncio.wait_for(run.done, 10)

    moved, failure = loop.run_until_complete(main())
    assert moved == 0 and failure[0] == UNSUPPORTED
    os.close(source)
    for s in (dst, reader):
        s.close()
    loop.close()


def test_cancel_frees_the_pipe_and_the_duplicates_at_once() -> None:
    loop = new_loop("uvloop")
    writer, src = tcp_pair()
    dst, reader = tcp_pair()
    before = fds()

    async def main():
        run = Run(loop, src, dst, 1 << 20)
        run.splice.start()  # nothing to read: it waits on the source
        assert fds() > before
        run.splice.cancel()
        await asyncio.sleep(0.01)
        return run

    run = loop.run_until_complete(main())
    assert not run.done.done()
    assert fds() <= before
    for s in (writer, src, dst, reader):
        s.close()
    loop.close()
