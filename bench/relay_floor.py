"""The floor for any Python relay: confluent-kafka through a minimal uvloop TCP relay that parses nothing.

Same measurement as ``bench/passthrough.py`` (1 KiB messages, direct and relayed paths alternating), with the
proxy replaced by the smallest relay asyncio allows: one ``BufferedProtocol`` per side, each read written to the
other side at once. What this relay costs against the direct path is what one extra user-space TCP hop costs on
this machine, whatever the relay does with the bytes; compare ``passthrough.py``'s ratios with these.
Usage: ``python bench/relay_floor.py [--messages N] [--rounds R]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import free_port, tansu, wait_for_port  # noqa: E402
from bench.passthrough import consume, create_topic, produce  # noqa: E402

READ_SIZE = 1024 * 1024


def relay_source(read_size: int, copy_out: bool) -> str:
    """The relay's source, run as its own process as the proxy is: ``python -c SOURCE <listen port> <broker port>``.
    ``copy_out``: one read buffer of ``read_size`` per side, kept, each read's bytes copied out to the other side
    (the floor per small request: bench/relay_floor_requests.py); else a fresh buffer after every read, handed to the
    transport as it is (the floor per byte: no copy of large reads)."""
    if copy_out:
        read = """        data = bytes(self.buffer[:nbytes])
        if self.peer is None:
            self.pending.append(data)
        else:
            self.peer.transport.write(data)"""
    else:
        read = f"""        if self.peer is None:
            self.pending.append(bytes(self.buffer[:nbytes]))
            return
        self.peer.transport.write(self.buffer[:nbytes])
        self.buffer = memoryview(bytearray({read_size}))  # the transport may keep the bytes it could not send"""
    return f"""
import asyncio, sys, uvloop

class Side(asyncio.BufferedProtocol):
    def __init__(self):
        self.buffer = memoryview(bytearray({read_size}))
        self.transport = self.peer = None
        self.pending = []  # read before the other side connected

    def connection_made(self, transport):
        self.transport = transport

    def get_buffer(self, sizehint):
        return self.buffer

    def buffer_updated(self, nbytes):
{read}

    def connection_lost(self, exc):
        if self.peer is not None:
            self.peer.transport.close()


async def main(listen_port, broker_port):
    loop = asyncio.get_running_loop()

    class Client(Side):
        def connection_made(self, transport):
            super().connection_made(transport)
            loop.create_task(self.connect())

        async def connect(self):
            _, broker = await loop.create_connection(Side, "127.0.0.1", broker_port)
            broker.peer, self.peer = self, broker
            for data in self.pending:
                broker.transport.write(data)

    server = await loop.create_server(Client, "127.0.0.1", listen_port)
    await server.serve_forever()

uvloop.run(main(int(sys.argv[1]), int(sys.argv[2])))
"""


RELAY = relay_source(READ_SIZE, copy_out=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    direct_port, broker_port, relay_port = free_port(), free_port(), free_port()
    procs = [tansu(direct_port, direct_port), tansu(broker_port, relay_port)]
    procs.append(subprocess.Popen([sys.executable, "-c", RELAY, str(relay_port), str(broker_port)]))
    try:
        wait_for_port(relay_port)
        paths = {"direct": f"127.0.0.1:{direct_port}", "relayed": f"127.0.0.1:{relay_port}"}
        results = {name: {"produce": [], "consume": []} for name in paths}
        for r in range(args.rounds):
            order = list(paths.items()) if r % 2 == 0 else list(paths.items())[::-1]  # alternate who goes first
            for name, bootstrap in order:
                topic = f"floor-{name}-{r}"
                create_topic(bootstrap, topic)
                results[name]["produce"].append(produce(bootstrap, topic, args.messages))
                results[name]["consume"].append(consume(bootstrap, topic, args.messages))
    finally:
        for proc in procs:
            proc.terminate()
    print(
        f"confluent-kafka through a minimal uvloop relay, 1 KiB messages, {args.messages} per round, "
        f"{args.rounds} rounds (median)"
    )
    for kind in ("produce", "consume"):
        d = statistics.median(results["direct"][kind])
        p = statistics.median(results["relayed"][kind])
        print(f"  {kind:8} direct {d:10.0f} msg/s  relayed {p:10.0f} msg/s  ratio {p / d:.3f}")


if __name__ == "__main__":
    main()
