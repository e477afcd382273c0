"""Smooth throttling (issue 25): per-second rates of throttled clients with ``quota.smoothing`` off and on.

For each mode a fresh broker and proxy start (``bench.common``), and four clients run flat out at once, each under
its own client-id quota (``--quota`` KiB/s, the same for every client): a confluent-kafka and a kafka-python
producer of 1 KiB messages, each to its own topic, and a confluent-kafka and a kafka-python consumer reading a topic
filled beforehand. Every client has its library's default settings. The filled topic is written in 16 KiB record
batches (kafka-python's default batch size): a consumer's bytes come in whole batches, so that is the consumer's
granularity, as a producer's is one request (librdkafka's default is up to 1 MB).

The proxy's ``kafka_quota_proxy_quota_bytes_total`` (the bytes admitted for the entity) is scraped every second.
After the first window span (``quota.window.num`` x ``quota.window.size.seconds``, default 11 s, the start-up
burst) the script prints, per client and mode, the rate of each second / quota, the share of seconds within
0.5-1.5 x (target with smoothing on: >= 90 %) and the average over the measurement (target: 0.95-1.05 x).

Usage: ``python bench/smoothing.py [--quota 256] [--seconds 40] [--modes off,on]``
"""

from __future__ import annotations

import argparse
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

KIB = 1024
VALUE = b"v" * 1024
BYTES = "kafka_quota_proxy_quota_bytes_total"
CLIENTS = {  # client-id: (library, role, quota key)
    "p-confluent": ("confluent", "produce", "producer_byte_rate"),
    "p-kafka-python": ("kafka-python", "produce", "producer_byte_rate"),
    "c-confluent": ("confluent", "consume", "consumer_byte_rate"),
    "c-kafka-python": ("kafka-python", "consume", "consumer_byte_rate"),
}
FILLED = "filled"
BAND, IN_BAND_TARGET, AVERAGE_TARGET = (0.5, 1.5), 0.9, (0.95, 1.05)


def scrape(url: str) -> dict[str, float]:
    """{client_id: bytes admitted} for the bench's clients."""
    with urllib.request.urlopen(url, timeout=5) as r:
        text = r.read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == BYTES and s.labels["client_id"] in CLIENTS:
                if s.labels["quota"] == CLIENTS[s.labels["client_id"]][2]:
                    out[s.labels["client_id"]] = s.value
    return out


def create_topics(bootstrap: str, names: list[str]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    for f in admin.create_topics([NewTopic(n, 1, 1) for n in names]).values():
        f.result(30)


def fill(bootstrap: str, nbytes: int) -> None:
    """``nbytes`` of 1 KiB messages in 16 KiB batches, through the proxy (no quota for this client-id)."""
    common.fill(bootstrap, FILLED, nbytes, VALUE, 16384)


def run_client(client_id: str, bootstrap: str, stop, ready) -> None:
    """One client, default settings, flat out until ``stop``."""
    library, role, _ = CLIENTS[client_id]
    if library == "confluent" and role == "produce":
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": bootstrap, "client.id": client_id})
        ready()
        while not stop.is_set():
            try:
                p.produce(client_id, VALUE)
            except BufferError:  # the queue is full: the client is being held
                p.poll(0.01)
            p.poll(0)
        p.purge()
        p.flush(5)
    elif library == "kafka-python" and role == "produce":
        from kafka import KafkaProducer

        p = KafkaProducer(bootstrap_servers=bootstrap, client_id=client_id)
        pending = []
        ready()
        while not stop.is_set():  # at most 256 KiB waiting in the client, so closing is quick
            pending.append(p.send(client_id, VALUE))
            if len(pending) >= 256:
                pending.pop(0).get(60)
        p.close(30)
    elif library == "confluent":
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        c = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": client_id, "client.id": client_id, "enable.auto.commit": False}
        )
        ready()
        c.assign([TopicPartition(FILLED, 0, OFFSET_BEGINNING)])
        while not stop.is_set():
            c.consume(500, 0.2)
        c.close()
    else:
        from kafka import KafkaConsumer, TopicPartition

        c = KafkaConsumer(bootstrap_servers=bootstrap, client_id=client_id, enable_auto_commit=False)
        tp = TopicPartition(FILLED, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        ready()
        while not stop.is_set():
            c.poll(200)
        c.close()


def child(client_id: str, bootstrap: str, stop, barrier) -> None:
    run_client(client_id, bootstrap, stop, lambda: barrier.wait(120))


def run_mode(mode: str, args) -> dict[str, list[float]]:
    """One broker and proxy with ``quota.smoothing: mode``; returns {client_id: [bytes admitted each second]}."""
    quota = args.quota * KIB
    entries = "".join(f"  - {{entity: {{client-id: {cid}}}, {key}: {quota}}}\n" for cid, (_, _, key) in CLIENTS.items())
    extra = f"settings: {{quota.smoothing: {mode}, quota.window.num: {args.window_num}}}\nquotas:\n{entries}"
    with direct_and_proxied(extra) as (_, proxied, metrics_url):
        consumers = any(role == "consume" for _, role, _ in CLIENTS.values())
        create_topics(proxied, [FILLED] + [cid for cid, (_, role, _) in CLIENTS.items() if role == "produce"])
        if consumers:  # enough for the first window span's burst and every second after it at twice the quota
            fill(proxied, int(quota * args.window_num + 2 * quota * args.seconds))
        ctx = multiprocessing.get_context("spawn")
        stop, barrier = ctx.Event(), ctx.Barrier(len(CLIENTS) + 1)
        procs = [ctx.Process(target=child, args=(cid, proxied, stop, barrier), daemon=True) for cid in CLIENTS]
        for proc in procs:
            proc.start()
        try:
            barrier.wait(120)
        except threading.BrokenBarrierError:
            print("  warning: not every client started (see its traceback)")
        start = time.monotonic()
        points = [scrape(metrics_url)]
        try:
            for i in range(1, args.window_num + args.seconds + 1):
                time.sleep(max(0.0, start + i - time.monotonic()))
                points.append(scrape(metrics_url))
        finally:
            stop.set()
            for proc in procs:
                proc.join(30)
                if proc.is_alive():
                    proc.kill()
    return {cid: [b.get(cid, 0.0) - a.get(cid, 0.0) for a, b in zip(points, points[1:])] for cid in CLIENTS}


def report(mode: str, series: dict[str, list[float]], args) -> None:
    quota = args.quota * KIB
    print(
        f"quota.smoothing: {mode}; quota {args.quota} KiB/s per client; seconds after the first "
        f"{args.window_num} s (window span), rate / quota:"
    )
    for cid, per_second in series.items():
        ratios = [b / quota for b in per_second[args.window_num :]]
        in_band = sum(BAND[0] <= r <= BAND[1] for r in ratios) / len(ratios)
        average = sum(ratios) / len(ratios)
        verdict = ""
        if mode == "on":
            met = in_band >= IN_BAND_TARGET and AVERAGE_TARGET[0] <= average <= AVERAGE_TARGET[1]
            verdict = "  target met" if met else "  target NOT met"
        print(
            f"  {cid:15} in 0.5-1.5 x: {in_band:4.0%} (target >= 90 %)  average {average:.3f} x "
            f"(target 0.95-1.05)  min {min(ratios):.2f} max {max(ratios):.2f}{verdict}"
        )
        print("    " + " ".join(f"{r:.2f}" for r in ratios))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quota", type=int, default=256, help="each client's quota, KiB/s (default 256)")
    parser.add_argument("--seconds", type=int, default=40, help="seconds measured after the first window span")
    parser.add_argument("--window-num", type=int, default=11, help="quota.window.num (Kafka's default 11)")
    parser.add_argument("--modes", default="off,on", help="quota.smoothing values to run, in order")
    parser.add_argument("--clients", default=",".join(CLIENTS), help="which of the four clients run")
    args = parser.parse_args()
    for cid in [c for c in CLIENTS if c not in args.clients.split(",")]:
        del CLIENTS[cid]
    print(f"load average before: {' '.join(open('/proc/loadavg').read().split()[:3])}; {os.cpu_count()} cores")
    started = time.monotonic()
    results = [(mode, run_mode(mode, args)) for mode in args.modes.split(",")]
    for mode, series in results:
        report(mode, series, args)
    print(
        f"load average after: {' '.join(open('/proc/loadavg').read().split()[:3])}; "
        f"total {time.monotonic() - started:.0f} s"
    )


if __name__ == "__main__":
    main()
