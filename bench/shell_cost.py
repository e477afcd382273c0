"""Cost of one request and its response through the whole connection, sockets and event loop included, in process.

bench/pipeline_cost.py feeds frames to the connection's pure core; this runs them through real loopback sockets: a
listener of the proxy (:class:`proxy.connection.listener.Listener`, its context made as the running proxy makes it)
in front of a stand-in broker that answers every request frame at once with the same canned answer (its correlation
id patched in), ``--connections`` clients each sending one request, waiting for its answer, sending the next
(``--in-flight K``: keeping K requests in flight, a new one at each answer, as a pipelining producer does; at the
proxy's default bound of 5 in flight, 5 reaches it at nearly every request), all on one uvloop event loop in this
process. ``--relay floor`` puts the minimal relay of bench/relay_floor.py (each read
copied out and written to the other side, nothing parsed) in the proxy's place: what the proxy costs beyond the
floor is the difference of the two, the clients, the stand-in broker and the loop being the same. The pairs are
pipeline_cost.py's (``--api``, ``--quotas``: issue 46's configuration, cluster mode).

Printed: CPU microseconds per pair (the process's, so load moves it less than wall time) and the wall time.
``--instructions``: instructions per pair instead, counted by callgrind with collection switched on around the
measured pairs only (about 20 s; runs agree within a few tens of instructions; needs valgrind). ``--profile FILE``:
cProfile of the measured pairs. Usage: ``python bench/shell_cost.py [--relay proxy|floor] [--api fetch] [--quotas]
[--pairs 20000] [--connections 10] [--in-flight 1] [--instructions [--callgrind-out FILE]] [--profile FILE]``.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

import uvloop

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.callgrind import instrument, total  # noqa: E402
from bench.pipeline_cost import DEFAULT_VERSIONS, bodies, scope_for  # noqa: E402
from config.loader import parse_config  # noqa: E402
from config.model import Address  # noqa: E402
from proxy.codec.header import encode_request_header, encode_response_header, frame  # noqa: E402
from proxy.connection.descriptors import DescriptorBudget  # noqa: E402
from proxy.connection.listener import Listener  # noqa: E402
from proxy.connection.open_gate import OpenGate  # noqa: E402
from proxy.ground.clock import SystemClock  # noqa: E402
from proxy.listener_contexts import ListenerContexts  # noqa: E402
from proxy.ops.metrics import ProxyMetrics  # noqa: E402
from quota.managers.connection import ConnectionQuotas  # noqa: E402
from quota.primitives.rate import QuotaWindow  # noqa: E402

_ID = struct.Struct(">i")


class Frames(asyncio.Protocol):
    """Splits what a socket brings into frames and hands each to ``on_frame``."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._pending = b""

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        buf = self._pending + data if self._pending else data
        at = 0
        while len(buf) - at >= 4:
            size = _ID.unpack_from(buf, at)[0] + 4
            if len(buf) - at < size:
                break
            self.on_frame(buf, at)
            at += size
        self._pending = buf[at:]

    def on_frame(self, buf: bytes, at: int) -> None:
        raise NotImplementedError


class Broker(Frames):
    """Answers each request with ``answer``, the request's correlation id patched in."""

    answer: bytearray

    def on_frame(self, buf: bytes, at: int) -> None:
        answer = self.answer
        answer[4:8] = buf[at + 8 : at + 12]
        self.transport.write(bytes(answer))


class Client(Frames):
    """Sends a request, waits for its answer, sends the next, until the shared count is done."""

    def __init__(self, request: bytes, run: Run) -> None:
        super().__init__()
        self.request = bytearray(request)
        self.run = run
        self.next_id = 0

    def send(self) -> None:
        self.next_id += 1
        self.request[8:12] = _ID.pack(self.next_id)
        self.transport.write(bytes(self.request))

    def on_frame(self, buf: bytes, at: int) -> None:
        if self.run.answered():
            self.send()


class Run:
    def __init__(self, pairs: int, done: asyncio.Future) -> None:
        self.pairs = pairs
        self.left = pairs  # answers still to come before the run is done
        self.sent = 0
        self.done = done

    def answered(self) -> bool:
        """An answer came; True if its client should send another."""
        self.left -= 1
        if not self.left:
            self.done.set_result(None)
        if self.sent < self.pairs:
            self.sent += 1
            return True
        return False


class FloorSide(asyncio.BufferedProtocol):
    """bench/relay_floor.py's relay (``copy_out``): one kept 64 KiB buffer per side, each read copied out."""

    def __init__(self) -> None:
        self.buffer = memoryview(bytearray(65536))
        self.transport = self.peer = None
        self.pending: list[bytes] = []

    def connection_made(self, transport) -> None:
        self.transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.buffer

    def buffer_updated(self, nbytes: int) -> None:
        data = bytes(self.buffer[:nbytes])
        if self.peer is None:
            self.pending.append(data)
        else:
            self.peer.transport.write(data)

    def connection_lost(self, exc) -> None:
        if self.peer is not None:
            self.peer.transport.close()


async def floor_relay(broker_port: int) -> tuple[str, int]:
    loop = asyncio.get_running_loop()

    class FloorClient(FloorSide):
        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            loop.create_task(self.connect())

        async def connect(self) -> None:
            _, broker = await loop.create_connection(FloorSide, "127.0.0.1", broker_port)
            broker.peer, self.peer = self, broker
            for data in self.pending:
                broker.transport.write(data)

    server = await loop.create_server(FloorClient, "127.0.0.1", 0)
    return server.sockets[0].getsockname()[:2]


def proxy_listener(broker_port: int, quotas: bool) -> Listener:
    """A listener of the proxy in front of the stand-in broker, its context made as proxy.app makes it."""
    config = parse_config(
        {"upstream": {"bootstrap_servers": ["127.0.0.1:1"]}, "listeners": [{"name": "P", "bind": "h:1"}]}
    )
    scope = scope_for(quotas)
    contexts = ListenerContexts(
        config,
        metrics=ProxyMetrics(),
        on_upstream_result=lambda ok: None,
        connections=set(),
        connection_quotas=ConnectionQuotas(["P"], QuotaWindow(11, 1)),
        clock=SystemClock(),
        upstream_ssl=None,
        open_gate=OpenGate(),
        descriptors=DescriptorBudget(set()),
    )
    upstream = (Address("127.0.0.1", broker_port),)
    listener = Listener(contexts.make("P", lambda: upstream, scope), "127.0.0.1", 0)
    listener.start_now()
    return listener


async def measure(args: argparse.Namespace) -> tuple[float, float]:
    loop = asyncio.get_running_loop()
    version = DEFAULT_VERSIONS[args.api]
    api_key, request_body, response_body = bodies(args.api, version)
    request = frame(encode_request_header(api_key, version, 0, "bench") + request_body)
    answer = bytearray(frame(encode_response_header(api_key, version, 0) + response_body))

    def broker() -> Broker:
        b = Broker()
        b.answer = bytearray(answer)
        return b

    server = await loop.create_server(broker, "127.0.0.1", 0)
    broker_port = server.sockets[0].getsockname()[1]
    if args.relay == "floor":
        address = await floor_relay(broker_port)
    else:
        address = proxy_listener(broker_port, args.quotas).address
    results = []
    for pairs in (500, args.pairs):  # a warm-up, then the measured pairs
        done = loop.create_future()
        run = Run(pairs, done)
        clients = [
            (await loop.create_connection(lambda: Client(request, run), *address))[1] for _ in range(args.connections)
        ]
        measured = pairs == args.pairs
        profile = cProfile.Profile() if args.profile and measured else None
        if args.toggle and measured:
            instrument("on")
        cpu, wall = time.process_time(), time.perf_counter()
        if profile is not None:
            profile.enable()
        for _ in range(args.in_flight):
            for client in clients:
                if run.sent < pairs:
                    run.sent += 1
                    client.send()
        await done
        if profile is not None:
            profile.disable()
            profile.dump_stats(args.profile)
        if args.toggle and measured:
            instrument("off")
        results = [time.process_time() - cpu, time.perf_counter() - wall]
        for client in clients:
            client.transport.close()
    return results[0] / args.pairs, results[1] / args.pairs


def instructions(argv: list[str], pairs: int, keep: str | None = None) -> float:
    """This script run again under callgrind, counting the measured pairs alone: instructions per pair (callgrind's
    counts kept in ``keep`` if given, for callgrind_annotate)."""
    with tempfile.TemporaryDirectory(prefix="callgrind-") as work:
        out = os.path.join(work, "callgrind.out")
        subprocess.run(
            ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}", sys.executable]
            + [os.path.abspath(__file__), *argv, "--toggle"],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONHASHSEED": "0"},
        )
        if keep:
            shutil.copyfile(out, keep)
        return total(out) / pairs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--relay", choices=("proxy", "floor"), default="proxy")
    parser.add_argument("--api", choices=sorted(DEFAULT_VERSIONS), default="fetch")
    parser.add_argument("--quotas", action="store_true", help="issue 46's quotas, never binding, in cluster mode")
    parser.add_argument("--pairs", type=int, default=20_000)
    parser.add_argument("--connections", type=int, default=10)
    parser.add_argument(
        "--in-flight", type=int, default=1, help="requests each client keeps in flight (5: librdkafka's idempotent)"
    )
    parser.add_argument("--profile", metavar="FILE", help="cProfile the measured pairs into FILE")
    parser.add_argument("--instructions", action="store_true", help="count instructions per pair under callgrind")
    parser.add_argument("--callgrind-out", metavar="FILE", help="with --instructions: keep callgrind's counts in FILE")
    parser.add_argument("--toggle", action="store_true", help=argparse.SUPPRESS)  # (run by --instructions)
    args = parser.parse_args()
    what = (
        f"{args.pairs} pairs, {args.api}, {args.relay}"
        f"{', issue 46 quotas, cluster mode' if args.quotas and args.relay == 'proxy' else ''}, "
        f"{args.connections} connections{f', {args.in_flight} in flight each' if args.in_flight > 1 else ''}"
    )
    if args.instructions:
        argv = [a for a in sys.argv[1:] if a != "--instructions"]
        if args.callgrind_out:
            argv = argv[: argv.index("--callgrind-out")] + argv[argv.index("--callgrind-out") + 2 :]
        print(f"{instructions(argv, args.pairs, args.callgrind_out):,.0f} instructions per request + response ({what})")
        return
    cpu, wall = uvloop.run(measure(args))
    if not args.toggle:
        print(f"{cpu * 1e6:.2f} us CPU per request + response ({wall * 1e6:.2f} wall; {what})")


if __name__ == "__main__":
    main()
