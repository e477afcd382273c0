"""Does a Prometheus scrape stall traffic? A proxy holding 10^6 tenants' quota state, a bystander, and scrapes.

The proxy (a real :class:`proxy.app.ProxyApp` on uvloop, in this process, in front of a Tansu broker) is given
``--tenants`` client ids' producer_byte_rate and consumer_byte_rate sensors by recording for each in-process (as
their produce and fetch requests would). Two other processes then run for ``--duration`` seconds:

* a bystander that sends a small request (ApiVersions v0, answered by the broker through the proxy) every 10 ms and
  times each answer;
* a scraper that GETs /metrics every ``--scrape-every`` seconds (``--back-to-back``: one after the other).

Prints the bystander's worst and p99 wait during scrapes, during background builds of the per-entity series (from
2026-11-25, above 10^5 quota entities, every ``quota.metrics.refresh.ms``), and outside both, each scrape's time and
size, each build's time, and the
full garbage collections the proxy process ran meanwhile (a stall of their own, not a scrape's). Run from a
checkout of an older commit, it measures that commit's proxy (before 769df95 scrapes ran on the event loop).

Usage: ``python bench/scrape.py [--tenants 1000000] [--duration 60] [--scrape-every 15] [--back-to-back]
[--top 1000] [--dynamic-config]``. The dynamic config is off unless asked: its first read is applied
to every sensor on the loop, a stall of its own.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import multiprocessing
import os
import socket
import struct
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import free_port, tansu  # noqa: E402

TICK_S = 0.010


# -- the bystander and the scraper (other processes, so they never wait for the proxy's GIL) -------------------


def _api_versions(correlation_id: int) -> bytes:
    client_id = b"bystander"
    body = struct.pack(">hhih", 18, 0, correlation_id, len(client_id)) + client_id
    return struct.pack(">i", len(body)) + body


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("proxy closed the connection")
        data += chunk
    return data


def bystander(port: int, duration_s: float, results) -> None:
    """Every 10 ms one ApiVersions through the proxy; (sent at, wait) for each, in monotonic seconds."""
    waits = []
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        end = time.monotonic() + duration_s
        next_at = time.monotonic()
        correlation_id = 0
        while next_at < end:
            time.sleep(max(0.0, next_at - time.monotonic()))
            correlation_id += 1
            sent = time.monotonic()
            sock.sendall(_api_versions(correlation_id))
            size = struct.unpack(">i", _read_exactly(sock, 4))[0]
            answer = _read_exactly(sock, size)
            waited = time.monotonic() - sent
            assert struct.unpack(">i", answer[:4])[0] == correlation_id
            waits.append((sent, waited))
            next_at = max(next_at + TICK_S, time.monotonic())  # a late answer delays the next request, not a burst
    results.put(("bystander", waits))


def scraper(url: str, duration_s: float, every_s: float, back_to_back: bool, results) -> None:
    """GET /metrics from 5 s in, every ``every_s`` (or back to back); (started, took, bytes) for each."""
    scrapes = []
    start = time.monotonic()
    end = start + duration_s
    next_at = start + (0.0 if back_to_back else 5.0)
    while True:
        time.sleep(max(0.0, next_at - time.monotonic()))
        if time.monotonic() >= end - 1.0:
            break
        began = time.monotonic()
        with urllib.request.urlopen(url, timeout=60) as response:
            size = len(response.read())
        scrapes.append((began, time.monotonic() - began, size))
        next_at = time.monotonic() if back_to_back else next_at + every_s
    results.put(("scraper", scrapes))


# -- the proxy (this process) ---------------------------------------------------------------------------------


def populate(app, tenants: int) -> float:
    """Each tenant produced and fetched once: a producer_byte_rate and a consumer_byte_rate sensor each."""
    began = time.perf_counter()
    produce, fetch = app.quotas.produce, app.quotas.fetch
    for i in range(tenants):
        client_id = f"tenant-{i:07d}"
        produce.record_and_decide("", client_id, 1_000 + (i * 7919) % 1_000_003)
        fetch.record_and_decide("", client_id, 2_000 + (i * 104_729) % 1_000_003)
    gc.collect()  # the set-up's garbage is not the measurement's
    return time.perf_counter() - began


async def run(args) -> dict:
    from config.loader import parse_config
    from proxy.app import ProxyApp

    broker_port, proxy_port = free_port(), free_port()
    broker = tansu(broker_port, proxy_port)
    try:
        config = parse_config(
            {
                "upstream": {"bootstrap_servers": [f"127.0.0.1:{broker_port}"]},
                "listeners": [{"name": "PLAINTEXT", "bind": f"127.0.0.1:{proxy_port}"}],
                "metrics": {"bind": "127.0.0.1:0"},
                "quotas": [
                    {"entity": {"client-id": "<default>"}, "producer_byte_rate": 10**12, "consumer_byte_rate": 10**12}
                ],
                "settings": {"quota.metrics.max.entities": args.top},
                # off unless asked: applying the config topic's first read walks every sensor on the loop (2.8 s at
                # 10^6 tenants), a stall of its own that would hide what scrapes do
                "dynamic_config": {"enabled": args.dynamic_config},
            }
        )
        app = ProxyApp(config)
        populate_s = populate(app, args.tenants)
        builds: list[tuple[float, float]] = []  # (began, took) of each build of the per-entity series
        series = getattr(app.ops, "_series", None)
        if series is not None:  # from 2026-11-25: built in the background above 10^5 entities
            render = series._render

            def timed_render() -> bytes:
                began = time.monotonic()
                try:
                    return render()
                finally:
                    builds.append((began, time.monotonic() - began))

            series._render = timed_render
        await app.start()
        url = "http://%s:%d/metrics" % app.ops_address
        collections: list[tuple[float, float]] = []  # (began, took) of each full collection in this process
        began_gc: list[float] = []

        def on_gc(phase: str, info: dict) -> None:
            if info.get("generation") == 2:
                if phase == "start":
                    began_gc.append(time.monotonic())
                elif began_gc:
                    collections.append((began_gc[-1], time.monotonic() - began_gc[-1]))

        gc.callbacks.append(on_gc)
        ctx = multiprocessing.get_context("spawn")
        results = ctx.Queue()
        procs = [
            ctx.Process(target=bystander, args=(proxy_port, args.duration, results)),
            ctx.Process(target=scraper, args=(url, args.duration, args.scrape_every, args.back_to_back, results)),
        ]
        for p in procs:
            p.start()
        loop = asyncio.get_running_loop()
        out = dict([await loop.run_in_executor(None, results.get) for _ in procs])
        for p in procs:
            await loop.run_in_executor(None, p.join)
        gc.callbacks.remove(on_gc)
        await app.stop(1000)
        out.update(
            populate_s=populate_s,
            collections=collections,
            builds=builds,
            sensors=len(app.quotas.produce) + len(app.quotas.fetch),
        )
        return out
    finally:
        broker.terminate()
        broker.wait(10)


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


def report(args, out: dict) -> None:
    waits, scrapes, builds = out["bystander"], out["scraper"], out["builds"]
    windows = [(began, began + took) for began, took, _ in scrapes]
    build_windows = [(began, began + took) for began, took in builds]
    during = [w for sent, w in waits if any(a <= sent + w and sent <= b for a, b in windows)]
    building = [w for sent, w in waits if any(a <= sent + w and sent <= b for a, b in build_windows)]
    outside = [w for sent, w in waits if not any(a <= sent + w and sent <= b for a, b in windows + build_windows)]
    ms = 1000.0
    print(
        f"tenants {args.tenants:,} ({out['sensors']:,} quota sensors, populated in {out['populate_s']:.1f} s); "
        f"quota.metrics.max.entities {args.top}"
    )
    print(
        f"scrapes: {len(scrapes)} ({'back to back' if args.back_to_back else f'every {args.scrape_every:g} s'}); "
        + ", ".join(f"{took:.2f} s / {size / 1024:.0f} KiB" for _, took, size in scrapes)
    )
    print(
        f"bystander: {len(waits)} requests every {TICK_S * ms:.0f} ms; "
        f"during scrapes: {len(during)}, worst {max(during, default=0) * ms:.1f} ms, "
        f"p99 {percentile(during, 0.99) * ms:.1f} ms, p50 {percentile(during, 0.5) * ms:.2f} ms; "
        f"during background builds of the per-entity series ({len(builds)}, "
        + ", ".join(f"{took:.2f} s" for _, took in builds[:8])
        + f"): {len(building)}, "
        f"worst {max(building, default=0) * ms:.1f} ms, p99 {percentile(building, 0.99) * ms:.1f} ms; "
        f"outside both: {len(outside)}, worst {max(outside, default=0) * ms:.1f} ms, "
        f"p99 {percentile(outside, 0.99) * ms:.1f} ms, p50 {percentile(outside, 0.5) * ms:.2f} ms"
    )
    worst_sent, worst = max(waits, key=lambda x: x[1])
    first = waits[0][0]
    print(
        f"worst bystander wait {worst * ms:.1f} ms; the five worst (at s from the first request): "
        + ", ".join(f"{w * ms:.1f} ms at {sent - first:.2f} s" for sent, w in sorted(waits, key=lambda x: -x[1])[:5])
        + "; scrapes began at "
        + ", ".join(f"{began - first:.2f} s" for began, _, _ in scrapes[:10])
    )
    full = out["collections"]
    overlapping = [took for began, took in full if began <= worst_sent + worst and worst_sent <= began + took]
    print(
        f"full garbage collections in the proxy process meanwhile: {len(full)}"
        + (f" (longest {max(t for _, t in full) * ms:.0f} ms)" if full else "")
        + ("; the worst wait overlapped one" if overlapping else "")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tenants", type=int, default=1_000_000)
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--scrape-every", type=float, default=15.0)
    parser.add_argument("--back-to-back", action="store_true")
    parser.add_argument("--top", type=int, default=1000, help="quota.metrics.max.entities")
    parser.add_argument("--dynamic-config", action="store_true", help="follow the config topic (off by default)")
    args = parser.parse_args()
    try:
        import uvloop
    except ImportError:
        out = asyncio.run(run(args))
    else:
        out = uvloop.run(run(args))
    report(args, out)


if __name__ == "__main__":
    main()
