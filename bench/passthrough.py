"""Pass-through cost: confluent-kafka with 1 KiB messages, directly against Tansu and through the proxy.

Prints, for one run: produce and consume throughput on each path and their ratio (proxied / direct), and the
added p50 / p99 latency of single acknowledged produces. Usage: ``python bench/passthrough.py [--messages N]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from bench.common import direct_and_proxied  # noqa: E402

PAYLOAD = b"x" * 1024


def create_topic(bootstrap: str, topic: str, partitions: int = 4) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result(30)


def produce(bootstrap: str, topic: str, count: int) -> float:
    """Messages per second for ``count`` 1 KiB messages, acks=all, delivery of every message confirmed."""
    p = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all", "queue.buffering.max.messages": 500000}
    )
    p.produce(topic, PAYLOAD)  # warm up: metadata and connections
    p.flush(30)
    start = time.perf_counter()
    produce_all(p, topic, count, PAYLOAD)
    return count / (time.perf_counter() - start)


def produce_all(producer: Producer, topic: str, count: int, value: bytes) -> None:
    """``count`` messages of ``value`` as fast as the producer's queue takes them, then every delivery awaited."""
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, value)
                break
            except BufferError:
                producer.poll(0.001)
    producer.flush(120)


def consume(bootstrap: str, topic: str, count: int, partitions: int = 4) -> float:
    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False, "fetch.max.bytes": 52428800}
    )
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    got = 0
    start = None
    while got < count:
        msgs = c.consume(10000, 5)
        if not msgs:
            break
        if start is None:
            start = time.perf_counter()
        got += sum(1 for m in msgs if not m.error())
    elapsed = time.perf_counter() - (start or time.perf_counter())
    c.close()
    return got / elapsed if elapsed else 0.0


def latencies(bootstrap: str, topic: str, n: int) -> list[float]:
    """Round trip of single acknowledged produces (linger 0), in milliseconds."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
    p.produce(topic, PAYLOAD)
    p.flush(30)
    out = []
    for _ in range(n):
        t = time.perf_counter()
        p.produce(topic, PAYLOAD)
        p.flush(10)
        out.append((time.perf_counter() - t) * 1000)
    return out


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--latency-samples", type=int, default=2000)
    args = parser.parse_args()
    with direct_and_proxied() as (direct, proxied, _):
        results = {"direct": {"produce": [], "consume": []}, "proxied": {"produce": [], "consume": []}}
        for r in range(args.rounds):
            paths = [("direct", direct), ("proxied", proxied)]
            for name, bootstrap in paths if r % 2 == 0 else paths[::-1]:  # alternate who goes first
                topic = f"bench-{name}-{r}"
                create_topic(bootstrap, topic)
                results[name]["produce"].append(produce(bootstrap, topic, args.messages))
                results[name]["consume"].append(consume(bootstrap, topic, args.messages))
        create_topic(direct, "lat")
        create_topic(proxied, "lat")
        lat = {
            "direct": latencies(direct, "lat", args.latency_samples),
            "proxied": latencies(proxied, "lat", args.latency_samples),
        }
    print(f"confluent-kafka, 1 KiB messages, {args.messages} per round, {args.rounds} rounds (median)")
    for kind in ("produce", "consume"):
        d = statistics.median(results["direct"][kind])
        p = statistics.median(results["proxied"][kind])
        per_round = " ".join(f"{pr / dr:.2f}" for dr, pr in zip(results["direct"][kind], results["proxied"][kind]))
        print(
            f"  {kind:8} direct {d:10.0f} msg/s  proxied {p:10.0f} msg/s  ratio {p / d:.3f}  (per round: {per_round})"
        )
    for q, label in ((0.5, "p50"), (0.99, "p99")):
        d, p = pct(lat["direct"], q), pct(lat["proxied"], q)
        print(f"  single-produce {label}: direct {d:.3f} ms  proxied {p:.3f} ms  added {p - d:+.3f} ms")


if __name__ == "__main__":
    main()
