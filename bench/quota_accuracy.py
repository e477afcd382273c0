"""Quota accuracy: how closely the proxy holds real clients to their byte-rate quotas (KIP-13), in steady state.

Each library (confluent-kafka, which ignores throttle_time_ms and is held by muting; kafka-python and aiokafka,
which honour it) runs flat out with 1 KiB messages through the proxy under its own client-id quota, once per
quota variant (default 1 and 4 MiB/s). Producers run first, all at once (one process each); then consumers,
all at once, reading a topic pre-filled with 64 KiB batches. Each phase is measured from the proxy's /metrics
(``kafka_quota_proxy_quota_bytes_total`` of the client's entity), starting one full quota window
(num x size) after the clients start, for ``--duration-windows`` full windows, scraped every sample
(``--window-size`` s). Printed per client and quota: observed rate / quota over the whole measurement; the
min / max of that ratio over every full window (sliding by one sample) and over single samples, which shows
Kafka's sampled-rate oscillation; throttled responses during the measurement (0 means the client never reached
its quota); and the start-up burst: bytes admitted in the first full window against quota x (num - 1) x size,
what a fresh Kafka sensor lets through. Nothing is asserted.

Usage: ``python bench/quota_accuracy.py [--window-num 11] [--window-size 1] [--duration-windows 6] [--quotas 1,4]``
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from bench import common  # noqa: E402
from bench.common import direct_and_proxied  # noqa: E402

MIB = 1024 * 1024
VALUE = b"v" * 1024
KINDS = ("confluent", "kafka-python", "aiokafka")
BYTES, THROTTLED = "kafka_quota_proxy_quota_bytes_total", "kafka_quota_proxy_quota_throttled_responses_total"


def scrape(url: str) -> dict[tuple[str, str, str], float]:
    """{(sample name, quota, client_id): value} of the per-entity byte and throttle counters."""
    with urllib.request.urlopen(url, timeout=5) as r:
        text = r.read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name in (BYTES, THROTTLED):
                out[(s.name, s.labels["quota"], s.labels["client_id"])] = s.value
    return out


def create_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})  # kept alive until the futures are done
    for f in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        f.result(30)


def fill(bootstrap: str, topic: str, nbytes: int) -> None:
    """``nbytes`` of 1 KiB messages in 64 KiB batches (a consumer's rate moves in whole batches)."""
    common.fill(bootstrap, topic, nbytes, VALUE, 65536)


def produce(kind: str, bootstrap: str, topic: str, client_id: str, stop, ready) -> None:
    """Flat out from ``ready()`` until ``stop``; at most ~256 KiB queued in the client, so stopping is quick."""
    if kind == "confluent":
        from confluent_kafka import Producer

        p = Producer(
            {
                "bootstrap.servers": bootstrap,
                "client.id": client_id,
                "linger.ms": 5,
                "acks": 1,
                "batch.size": 65536,
                "queue.buffering.max.kbytes": 256,
            }
        )
        ready()
        while not stop.is_set():
            try:
                p.produce(topic, VALUE)
            except BufferError:
                p.poll(0.01)
            p.poll(0)
        p.flush(60)
    elif kind == "kafka-python":
        from kafka import KafkaProducer

        p = KafkaProducer(
            bootstrap_servers=bootstrap, client_id=client_id, batch_size=65536, linger_ms=5, acks=1, max_block_ms=60000
        )
        pending = []
        ready()
        while not stop.is_set():
            pending.append(p.send(topic, VALUE))
            if len(pending) >= 256:
                pending.pop(0).get(60)
        p.flush(60)
        p.close(10)
    else:
        from aiokafka import AIOKafkaProducer

        async def main():
            p = AIOKafkaProducer(
                bootstrap_servers=bootstrap, client_id=client_id, linger_ms=5, acks=1, max_batch_size=65536
            )
            await p.start()
            ready()
            try:
                pending = []
                while not stop.is_set():
                    pending.append(await p.send(topic, VALUE))
                    if len(pending) >= 256:
                        await asyncio.wait_for(pending.pop(0), 60)
            finally:
                await asyncio.wait_for(p.stop(), 60)

        asyncio.run(main())


def consume(kind: str, bootstrap: str, topic: str, client_id: str, stop, ready) -> None:
    """Reads ``topic`` from the beginning, from ``ready()`` until ``stop``."""
    if kind == "confluent":
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        c = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": client_id, "client.id": client_id, "enable.auto.commit": False}
        )
        ready()  # assign starts fetching in the background
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        while not stop.is_set():
            c.consume(500, 0.2)
        c.close()
    elif kind == "kafka-python":
        from kafka import KafkaConsumer, TopicPartition

        c = KafkaConsumer(
            bootstrap_servers=bootstrap, client_id=client_id, enable_auto_commit=False, fetch_max_bytes=MIB
        )
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        ready()
        while not stop.is_set():
            c.poll(200)
        c.close()
    else:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        async def main():
            c = AIOKafkaConsumer(bootstrap_servers=bootstrap, client_id=client_id, enable_auto_commit=False)
            await c.start()
            try:
                tp = TopicPartition(topic, 0)
                ready()  # assign starts fetching in the background
                c.assign([tp])
                await c.seek_to_beginning(tp)
                while not stop.is_set():
                    await c.getmany(timeout_ms=200)
            finally:
                await asyncio.wait_for(c.stop(), 30)

        asyncio.run(main())


def child(target, kind: str, bootstrap: str, topic: str, client_id: str, stop, barrier) -> None:
    target(kind, bootstrap, topic, client_id, stop, lambda: barrier.wait(120))


def run_phase(target, clients: dict[str, tuple[str, str]], metrics_url: str, quota_key: str, args) -> dict:
    """One process per client (no GIL shared between clients); scrape every sample until the measurement ends.

    ``clients`` maps client_id to (kind, topic). The clock starts when every client is connected and about to
    go flat out. Returns {client_id: [(t, bytes, throttled), ...]}: the first point just before that, the
    second one full window later (the measurement start), then one per sample."""
    ctx = multiprocessing.get_context("spawn")
    stop, barrier = ctx.Event(), ctx.Barrier(len(clients) + 1)
    procs = {
        cid: ctx.Process(target=child, args=(target, kind, args.bootstrap, topic, cid, stop, barrier), daemon=True)
        for cid, (kind, topic) in clients.items()
    }
    series = {cid: [] for cid in clients}

    def record():
        snap, t = scrape(metrics_url), time.monotonic()
        for cid in clients:
            series[cid].append((t, snap.get((BYTES, quota_key, cid), 0.0), snap.get((THROTTLED, quota_key, cid), 0.0)))

    span = args.window_num * args.window_size
    for proc in procs.values():
        proc.start()
    try:
        record()  # before the barrier: the clients have connected but not produced or fetched yet
        try:
            barrier.wait(120)
        except threading.BrokenBarrierError:
            print("  warning: not every client started (see its traceback); measuring the others")
        start = time.monotonic()
        time.sleep(max(0.0, start + span - time.monotonic()))
        record()
        for i in range(1, args.duration_windows * args.window_num + 1):
            time.sleep(max(0.0, start + span + i * args.window_size - time.monotonic()))
            record()
    finally:
        stop.set()
        deadline = time.monotonic() + 90
        for cid, proc in procs.items():
            proc.join(max(0.1, deadline - time.monotonic()))
            if proc.is_alive():
                print(f"  warning: {cid} did not stop within 90 s; killed")
                proc.kill()
            elif proc.exitcode:
                print(f"  warning: {cid} exited with code {proc.exitcode}")
    return series


def report(title: str, series: dict, quotas: dict[str, int], args) -> None:
    num, size = args.window_num, args.window_size
    print(
        f"{title}: ratio = observed bytes/s / quota, measured over {args.duration_windows} x {num * size} s "
        f"after the first {num * size} s (window {num} x {size} s)"
    )
    print(
        f"  {'client-id':16} {'quota':>11} {'ratio':>6} {'window min/max':>14} {'sample min/max':>15} "
        f"{'throttled':>9} {'burst':>6}  first window bytes / quota x (num-1) x size"
    )
    for cid, points in series.items():
        q = quotas[cid]
        meas = points[1:]

        def ratio(a, b):
            return (b[1] - a[1]) / (b[0] - a[0]) / q

        whole = ratio(meas[0], meas[-1])
        windows = [ratio(meas[i], meas[i + num]) for i in range(len(meas) - num)]
        samples = [ratio(meas[i], meas[i + 1]) for i in range(len(meas) - 1)]
        burst_bytes = points[1][1] - points[0][1]
        allowance = q * (num - 1) * size
        throttled = meas[-1][2] - meas[0][2]
        w = f"{min(windows):.3f}/{max(windows):.3f}" if windows else "-"
        smp = f"{min(samples):.3f}/{max(samples):.3f}"
        slow = "  (never throttled: the client is slower than its quota)" if not throttled else ""
        print(
            f"  {cid:16} {q / MIB:>5g} MiB/s {whole:6.3f} {w:>14} {smp:>15} {throttled:>9.0f} "
            f"{burst_bytes / allowance:6.3f}  {burst_bytes / MIB:.1f} MiB / {allowance / MIB:.1f} MiB{slow}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--window-num", type=int, default=11, help="quota.window.num (Kafka default 11)")
    parser.add_argument("--window-size", type=int, default=1, help="quota.window.size.seconds (Kafka default 1)")
    parser.add_argument("--duration-windows", type=int, default=6, help="full windows measured after the first")
    parser.add_argument("--quotas", default="1,4", help="quota variants in MiB/s, comma-separated")
    parser.add_argument("--phases", default="produce,consume", help="produce, consume or both")
    args = parser.parse_args()
    variants = [float(v) for v in args.quotas.split(",")]
    quotas = {f"{kind}-{v:g}m": int(v * MIB) for kind in KINDS for v in variants}
    entries = "".join(
        f"  - {{entity: {{client-id: {cid}}}, producer_byte_rate: {q}, consumer_byte_rate: {q}}}\n"
        for cid, q in quotas.items()
    )
    extra = (
        f"settings: {{quota.window.num: {args.window_num}, quota.window.size.seconds: {args.window_size}}}\n"
        f"quotas:\n{entries}"
    )
    phases = args.phases.split(",")
    started = time.monotonic()
    with direct_and_proxied(extra) as (_, proxied, metrics_url):
        args.bootstrap = proxied
        results = []
        if "consume" in phases:  # filled first, so the producer phase runs on a quiet proxy
            create_topic(proxied, "filled")
            seconds = (args.duration_windows + 1) * args.window_num * args.window_size + 5
            t = time.monotonic()
            fill(proxied, "filled", int(max(quotas.values()) * seconds * 1.2))
            print(
                f"filled 'filled' with {max(quotas.values()) * seconds * 1.2 / MIB:.0f} MiB in "
                f"{time.monotonic() - t:.1f} s"
            )
        if "produce" in phases:
            clients = {cid: (cid.rsplit("-", 1)[0], f"p-{cid}") for cid in quotas}
            for _, topic in clients.values():
                create_topic(proxied, topic)
            results.append(
                (
                    "producers, all at once (producer_byte_rate)",
                    run_phase(produce, clients, metrics_url, "producer_byte_rate", args),
                )
            )
        if "consume" in phases:
            clients = {cid: (cid.rsplit("-", 1)[0], "filled") for cid in quotas}
            results.append(
                (
                    "consumers, all at once (consumer_byte_rate)",
                    run_phase(consume, clients, metrics_url, "consumer_byte_rate", args),
                )
            )
    for title, series in results:
        report(title, series, quotas, args)
    print(f"total {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
