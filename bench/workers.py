"""``settings.workers``: the ceiling of one proxy process and of N, and quota accuracy with N workers against one.

Ceilings: ``--clients`` producer processes (confluent-kafka), each flat out, against Tansu directly and through
the proxy with 1 worker and with each N of ``--workers``, each for ``--seconds`` after a warm-up:

* requests/s: 100-byte messages, one per request (one partition, ``batch.num.messages=1``, ``linger.ms=0``),
  acknowledged (``acks=1``): acknowledged messages per second is produce requests per second;
* MB/s: 1 KiB messages in 64 KiB batches over 4 partitions.

Counted client-side (acknowledged messages in the measured interval), so direct and proxied are counted alike.

Accuracy: ``--tenant-clients`` producers of one client-id under a 1 MiB/s ``producer_byte_rate`` (windows
``3 x 1 s``), their connections spread over the workers by SO_REUSEPORT; the bytes admitted (the proxy's
``quota_bytes_total``, summed over workers) over ``--accuracy-seconds`` after the first window span, as a ratio
of the quota, with 1 worker and with ``--accuracy-workers``; target: the N-worker ratio within 0.9-1.1 x of the
1-worker ratio. Prints every figure against its target. The machine's core count is printed beside them: clients,
broker and proxy share those cores.

Usage: ``python bench/workers.py [--workers 2,4] [--clients 8] [--seconds 8]``
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import contextmanager

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import ROOT, free_port, stop_processes, tansu, wait_for_port, wait_ready  # noqa: E402

QUOTA = 1024 * 1024
SMALL, LARGE = b"s" * 100, b"x" * 1024


@contextmanager
def broker_and_proxy(workers: int | None, extra_settings: str = "", quotas: str = ""):
    """Yield (bootstrap, metrics port): Tansu advertising itself (workers None: the direct path) or the proxy."""
    broker_port, proxy_port, metrics_port = free_port(), free_port(), free_port()
    procs = [tansu(broker_port, broker_port if workers is None else proxy_port)]
    path = None
    try:
        if workers is None:
            yield f"127.0.0.1:{broker_port}", None
            return
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            f.write(
                f"upstream: {{bootstrap_servers: ['127.0.0.1:{broker_port}']}}\n"
                f"listeners: [{{name: PLAINTEXT, bind: '127.0.0.1:{proxy_port}'}}]\n"
                f"metrics: {{bind: '127.0.0.1:{metrics_port}'}}\n"
                f"settings: {{workers: {workers}, shutdown.grace.period.ms: 1000{extra_settings}}}\n{quotas}"
            )
            path = f.name
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "proxy.cli", "run", "--config", path, "--log-level", "WARNING"], cwd=ROOT
            )
        )
        wait_for_port(metrics_port, 30)
        wait_ready(metrics_port)
        yield f"127.0.0.1:{proxy_port}", metrics_port
    finally:
        stop_processes(list(reversed(procs)), 15)
        if path:
            os.unlink(path)


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result(30)


def producer(bootstrap: str, topic: str, mode: str, start: float, stop: float, client_id: str, out) -> None:
    """Flat out until ``stop`` (wall time); puts the acknowledged messages and bytes between ``start`` and ``stop``."""
    from confluent_kafka import Producer

    config = {"bootstrap.servers": bootstrap, "client.id": client_id, "acks": 1}
    if mode == "requests":
        config.update({"linger.ms": 0, "batch.num.messages": 1, "queue.buffering.max.messages": 2000})
        value = SMALL
    else:
        config.update({"linger.ms": 5, "batch.size": 65536, "queue.buffering.max.kbytes": 1024})
        value = LARGE
    counted = [0, 0]

    def delivered(err, msg):
        if err is None and start <= time.time() < stop:
            counted[0] += 1
            counted[1] += len(msg.value())

    p = Producer(config)
    while time.time() < stop:
        try:
            p.produce(topic, value, on_delivery=delivered)
        except BufferError:
            p.poll(0.001)
        p.poll(0)
    p.flush(30)
    out.put(tuple(counted))


def run_clients(
    bootstrap: str, topic: str, mode: str, clients: int, warm_s: float, seconds: float, client_id: str = "bench"
) -> tuple[float, float]:
    """Acknowledged messages/s and MB/s of ``clients`` producer processes over ``seconds`` after ``warm_s``."""
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    start = time.time() + warm_s
    stop = start + seconds
    procs = [
        ctx.Process(target=producer, args=(bootstrap, topic, mode, start, stop, client_id, out)) for _ in range(clients)
    ]
    for p in procs:
        p.start()
    results = [out.get(timeout=seconds + warm_s + 120) for _ in procs]
    for p in procs:
        p.join(30)
    messages, nbytes = sum(r[0] for r in results), sum(r[1] for r in results)
    return messages / seconds, nbytes / seconds / 1e6


def ceilings(args) -> None:
    paths = [("direct", None), ("1 worker", 1)] + [(f"{n} workers", n) for n in args.workers]
    print(
        f"ceilings: {args.clients} producer processes, {args.seconds:g} s each, {os.cpu_count()} cores shared by "
        "clients, broker and proxy"
    )
    figures: dict[str, dict[str, float]] = {}
    for name, workers in paths:
        figures[name] = {}
        for mode, partitions in (("requests", 1), ("bytes", 4)):
            with broker_and_proxy(workers) as (bootstrap, _):
                create_topic(bootstrap, f"t-{mode}", partitions)
                rate, mbs = run_clients(bootstrap, f"t-{mode}", mode, args.clients, 3.0, args.seconds)
            figures[name][mode] = rate if mode == "requests" else mbs
        direct = figures["direct"]
        print(
            f"  {name:>10}: {figures[name]['requests']:8.0f} requests/s ({figures[name]['requests'] / direct['requests']:.2f} x direct)"
            f"   {figures[name]['bytes']:6.1f} MB/s ({figures[name]['bytes'] / direct['bytes']:.2f} x direct)",
            flush=True,
        )
    one = figures["1 worker"]
    for n in args.workers:
        f = figures[f"{n} workers"]
        print(
            f"  {n} workers / 1 worker: requests/s {f['requests'] / one['requests']:.2f} x, "
            f"MB/s {f['bytes'] / one['bytes']:.2f} x  (at most the cores free for the proxy on this machine)"
        )


def quota_bytes(metrics_port: int) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    total = 0.0
    for line in text.splitlines():
        if (
            line.startswith("kafka_quota_proxy_quota_bytes_total{")
            and 'client_id="tenant"' in line
            and 'quota="producer_byte_rate"' in line
        ):
            total += float(line.rsplit(" ", 1)[1])
    return total


def accuracy(args) -> None:
    quotas = f"quotas: [{{entity: {{client-id: tenant}}, producer_byte_rate: {QUOTA}}}]\n"
    settings = f", quota.window.num: 3, quota.window.size.seconds: 1, quota.workers.sync.ms: {args.sync_ms}"
    print(
        f"accuracy: {args.tenant_clients} producers of one client-id under {QUOTA // 1024} KiB/s, windows 3 x 1 s, "
        f"measured {args.accuracy_seconds:g} s after the first span, sync every {args.sync_ms} ms"
    )
    ratios = {}
    for workers in (1, args.accuracy_workers):
        with broker_and_proxy(workers, settings, quotas) as (bootstrap, metrics_port):
            create_topic(bootstrap, "tenant", 4)
            import threading

            result = {}
            clients = threading.Thread(
                target=lambda: result.update(
                    rates=run_clients(
                        bootstrap, "tenant", "bytes", args.tenant_clients, 0.0, args.accuracy_seconds + 5, "tenant"
                    )
                )
            )
            clients.start()
            time.sleep(4)  # the first window span (3 s) and the clients' start
            b0, t0 = quota_bytes(metrics_port), time.monotonic()
            time.sleep(args.accuracy_seconds)
            b1, t1 = quota_bytes(metrics_port), time.monotonic()
            clients.join()
        ratios[workers] = (b1 - b0) / (t1 - t0) / QUOTA
        print(f"  {workers} worker(s): {ratios[workers]:.2f} x quota", flush=True)
    relative = ratios[args.accuracy_workers] / ratios[1]
    verdict = "met" if 0.9 <= relative <= 1.1 else "NOT met"
    print(f"  {args.accuracy_workers} workers / 1 worker: {relative:.2f} x (target 0.9-1.1: {verdict})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="2,4", help="worker counts to measure besides 1 (comma-separated)")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--tenant-clients", type=int, default=8)
    parser.add_argument("--accuracy-workers", type=int, default=4)
    parser.add_argument("--accuracy-seconds", type=float, default=18.0)
    parser.add_argument("--sync-ms", type=int, default=100, help="quota.workers.sync.ms for the accuracy runs")
    parser.add_argument("--skip", choices=("ceilings", "accuracy"), default=None)
    args = parser.parse_args()
    args.workers = [int(n) for n in args.workers.split(",") if n]
    if args.skip != "ceilings":
        ceilings(args)
    if args.skip != "accuracy":
        accuracy(args)


if __name__ == "__main__":
    main()
