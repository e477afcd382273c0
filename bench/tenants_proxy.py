"""A million tenants, through the proxy: the round trip of a Produce whose client id is one of 10^6 tracked tenants,
against the same with 10 tenants.

Two proxies (real :class:`proxy.app.ProxyApp` on uvloop, in this process, in front of one Tansu broker) with the
quotas of bench/tenants.py: one tracks 10 tenants, the other ``--tenants`` (each produced, fetched and started a
producer id once, recorded in-process as their requests would be). Over PLAINTEXT every client is
``User:ANONYMOUS``, so the requests' tenants differ by client id; the producer-id state of ``--users`` users is there
for its memory and cleanup, not used by these requests (producer id -1). Another process sends ``--samples`` Produce
v7 requests (1 KiB, acks=1) one at a time, each with the client id of a random tenant, alternating between the two
proxies round by round so the machine's load falls on both alike, and times each answer. Prints p50 and p99 of
each and their ratio (target: within 1.2 x).

Usage: ``python bench/tenants_proxy.py [--tenants 1000000] [--users 100000] [--samples 20000]``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import multiprocessing
import os
import random
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import free_port, tansu  # noqa: E402
from bench.kafka_requests import at_broker, create_topics_body, produce_body  # noqa: E402
from proxy.codec.apis import CREATE_TOPICS, PRODUCE  # noqa: E402
from proxy.codec.header import encode_request_header, frame  # noqa: E402

TOPIC = "tenants"
ROUNDS = 10


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("proxy closed the connection")
        data += chunk
    return bytes(data)


def client(ports: dict[str, int], sizes: dict[str, int], samples: int, results) -> None:
    """Alternating rounds; per proxy the nanoseconds of each Produce round trip."""
    body = produce_body(TOPIC, b"x" * 1024)
    rng = random.Random(25)
    socks = {label: socket.create_connection(("127.0.0.1", port)) for label, port in ports.items()}
    for s in socks.values():
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    times: dict[str, list[int]] = {label: [] for label in ports}
    correlation = 0
    for _ in range(ROUNDS):
        for label, sock in socks.items():
            for _ in range(samples // ROUNDS):
                correlation += 1
                client_id = f"tenant-{rng.randrange(sizes[label]):07d}"
                request = frame(encode_request_header(PRODUCE, 7, correlation, client_id) + body)
                began = time.perf_counter_ns()
                sock.sendall(request)
                size = struct.unpack(">i", _read_exactly(sock, 4))[0]
                answer = _read_exactly(sock, size)
                times[label].append(time.perf_counter_ns() - began)
                assert struct.unpack(">i", answer[:4])[0] == correlation
    results.put(times)


def populate(app, tenants: int, users: int) -> None:
    produce, fetch, pids = app.quotas.produce, app.quotas.fetch, app.quotas.producer_ids
    now = app.quotas.clock.now_ms()
    for i in range(tenants):
        client_id = f"tenant-{i:07d}"
        produce.record_and_decide("ANONYMOUS", client_id, 1_000 + i % 997, now)
        fetch.record_and_decide("ANONYMOUS", client_id, 2_000 + i % 991, now)
        pids.record_and_decide(f"user-{i % users:06d}", 1_000_000 + i, now)
    gc.collect()


async def run(args) -> dict:
    from config.loader import parse_config
    from proxy.app import ProxyApp

    broker_port = free_port()
    ports = {"10 tenants": free_port(), f"{args.tenants:,} tenants": free_port()}
    broker = tansu(broker_port, broker_port)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, at_broker, broker_port, [(CREATE_TOPICS, 7, create_topics_body(7, TOPIC))])
    apps = []
    try:
        sizes = {}
        for (label, port), (tenants, users) in zip(ports.items(), ((10, 10), (args.tenants, args.users))):
            config = parse_config(
                {
                    "upstream": {"bootstrap_servers": [f"127.0.0.1:{broker_port}"]},
                    "listeners": [{"name": "PLAINTEXT", "bind": f"127.0.0.1:{port}"}],
                    "metrics": {"bind": "127.0.0.1:0"},
                    "quotas": [
                        {
                            "entity": {"user": "<default>", "client-id": "<default>"},
                            "producer_byte_rate": 10**12,
                            "consumer_byte_rate": 10**12,
                        },
                        {"entity": {"user": "<default>"}, "producer_ids_rate": 10**9},
                    ],
                    "dynamic_config": {"enabled": False},
                }
            )
            app = ProxyApp(config)
            began = time.perf_counter()
            populate(app, tenants, users)
            print(f"{label}: populated in {time.perf_counter() - began:.1f} s", flush=True)
            await app.start()
            apps.append(app)
            sizes[label] = tenants
        ctx = multiprocessing.get_context("spawn")
        results = ctx.Queue()
        proc = ctx.Process(target=client, args=(ports, sizes, args.samples, results))
        proc.start()
        times = await loop.run_in_executor(None, results.get)
        await loop.run_in_executor(None, proc.join)
        return times
    finally:
        for app in apps:
            await app.stop(1000)
        broker.kill()
        broker.wait(10)


def percentile(values: list[int], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tenants", type=int, default=1_000_000)
    parser.add_argument("--users", type=int, default=100_000)
    parser.add_argument("--samples", type=int, default=20_000)
    args = parser.parse_args()
    try:
        import uvloop
    except ImportError:
        times = asyncio.run(run(args))
    else:
        times = uvloop.run(run(args))
    found = {label: (percentile(t, 0.5), percentile(t, 0.99)) for label, t in times.items()}
    for label, (p50, p99) in found.items():
        print(
            f"Produce through the proxy, {label}: p50 {p50 / 1000:.0f} us, p99 {p99 / 1000:.0f} us "
            f"({len(times[label]):,} requests)"
        )
    small, big = found.values()
    for i, name in enumerate(("p50", "p99")):
        ratio = big[i] / small[i]
        print(
            f"Produce round trip {name}: {ratio:.2f} x the one with 10 tenants (target <= 1.2 x): "
            + ("met" if ratio <= 1.2 else "MISSED")
        )


if __name__ == "__main__":
    main()
