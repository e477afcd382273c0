"""Per-partition byte rates (``{topic: NAME, partition: <default>}`` quota entries) held against their target.

No broker or proxy has a per-partition quota to run beside (KIP-1010, a proposal, is the nearest), so the anchor is
the target itself: each partition's rate within 0.95-1.05 of its quota, whoever writes it, and a cold partition of
the same topic getting what it asks beside hot ones. One Apache Kafka 4.4.0 broker (tests/kafka_cluster.py) behind a
sidecar proxy (its own process), Kafka's default windows (11 x 1 s; ``quota.smoothing`` off, Kafka's sampled rate,
unless ``--smoothing on``). Phases, each ``--duration`` seconds:

- ``produce xN`` for each N of ``--producers``: a 6-partition topic whose ``partition: <default>`` entry sets
  ``producer_byte_rate`` ``--quota``; N librdkafka producers (default settings, a client id each) write partition 0
  flat out, N others partition 1, and one more writes partition 2 paced at ``--cold`` B/s (a quarter of the quota
  by default). Partitions 0 and 1 must each be held to the quota (each its own budget), and partition 2 get what it
  asks (at least 0.97 x): the hot ones cannot take its budget. At the same time, the nearest Kafka has: N producers
  sharing one client id write one partition directly on Kafka under its own ``producer_byte_rate`` (kafka-configs)
  of the same value, one budget for several connections, printed beside (a partition's figure no further from 1
  than Kafka's plus 0.03 is a second target);
- ``consume x2``: a 2-partition topic filled beforehand whose ``partition: <default>`` entry sets
  ``consumer_byte_rate`` ``--quota``, read by two librdkafka consumers, one per partition: each partition within
  the band.

Achieved / quota is the least-squares slope of each partition's cumulative bytes (acknowledged or received) from the
end of the first window span (11 s: a fresh quota admits about quota x 10 s at first, as Kafka's client quotas do)
to the end of the phase; the plain mean is printed beside it. Exits 1 on a missed target.

Usage: ``python bench/anchors_partition_rate.py [--duration 60] [--quota 2097152] [--producers 1,2] [--cold B/s]
[--smoothing off]``.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.anchors_byte_rate import SPAN_S, steady_rate  # noqa: E402
from bench.anchors_byte_rate_clients import VALUE, Series, threaded  # noqa: E402
from bench.anchors_common import ProxyProcess, Verdicts, kafka_client_quota, load  # noqa: E402
from bench.anchors_topic_rate import partitions_consume, rate_verdicts, run, seconds_of  # noqa: E402
from bench.common import fill  # noqa: E402
from tests.kafka_cluster import KafkaCluster  # noqa: E402

PARTITIONS = 6
BAND = (0.95, 1.05)
COLD_AT_LEAST = 0.97


def paced(rate: float) -> int:
    """Values sent every 10 ms to ask ``rate`` B/s (what is asked is then ``paced(rate) * 100`` values a second)."""
    return max(1, round(rate * 0.01 / len(VALUE)))


def to_partition(
    bootstrap: str, topic: str, partition: int, cid: str, rate: float | None, stop: threading.Event, series: Series
) -> None:
    """A librdkafka producer (default settings) writing 1000-byte values to one partition: flat out (``rate``
    None), or ``rate`` B/s sent every 10 ms."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "client.id": cid})
    events = series.events

    def acked(err, msg):
        if err is None:
            events.append((time.monotonic(), len(msg.value())))

    per_tick = 1 if rate is None else paced(rate)
    next_t = time.monotonic()
    while not stop.is_set():
        for _ in range(per_tick):
            try:
                p.produce(topic, VALUE, partition=partition, on_delivery=acked)
            except BufferError:
                p.poll(0.05)
        if rate is None:
            p.poll(0)
            continue
        next_t += 0.01
        while time.monotonic() < next_t:
            p.poll(max(0.0, next_t - time.monotonic()))
    p.purge()
    p.flush(5)


def produce_phase(proxy, node, topic: str, n: int, args, verdicts: Verdicts) -> None:
    """N producers flat out on partition 0, N on partition 1, one paced on partition 2; each partition's rate."""
    bootstrap = f"127.0.0.1:{node.proxy_port}"
    hot = [[Series() for _ in range(n)] for _ in (0, 1)]
    cold = Series()
    direct = [Series() for _ in range(n)]
    cpu0, load0 = proxy.cpu(), load()

    def clients(stop):
        threads = [
            threaded(to_partition, bootstrap, topic, partition, f"p{partition}-{i}", None, stop, series)
            for partition in (0, 1)
            for i, series in enumerate(hot[partition])
        ]
        threads.append(threaded(to_partition, bootstrap, topic, 2, "cold", args.cold, stop, cold))
        threads += [
            threaded(to_partition, node.direct, f"direct-x{n}", 0, f"kafka-x{n}", None, stop, series)
            for series in direct
        ]
        return threads

    t0 = run(clients, args.duration)
    cpu = proxy.cpu() - cpu0
    moved = sum(size for s in [*hot[0], *hot[1], cold] for _, size in s.events)
    errors = [s.error for s in [*hot[0], *hot[1], cold] if s.error is not None]
    print(f"produce x{n} per hot partition (load {load0}-{load()}): proxy CPU {cpu / max(moved / 1e9, 1e-9):.1f} s/GB")
    kafka, kafka_mean = steady_rate(seconds_of(direct, t0, args.duration), args.quota)
    print(
        f"  Kafka's client quota, {n} producers of one client id on one partition: {kafka:.3f} x (mean {kafka_mean:.3f})"
    )
    for partition in (0, 1):
        seconds = seconds_of(hot[partition], t0, args.duration)
        rate, mean = steady_rate(seconds, args.quota)
        print(
            f"  partition {partition}: {rate:.3f} x its quota (mean {mean:.3f}); each second "
            f"{[round(s / args.quota, 2) for s in seconds]}"
        )
        rate_verdicts(verdicts, f"produce x{n} partition {partition}", rate, kafka, errors)
    got = sum(seconds_of([cold], t0, args.duration)[2:]) / (args.duration - 2)
    asked = paced(args.cold) * len(VALUE) * 100
    verdicts.check(
        f"produce x{n} cold partition 2 gets what it asks",
        got >= COLD_AT_LEAST * asked,
        f"{got / asked:.3f} x the {asked} B/s it asks",
    )


def consume_phase(proxy, node, topic: str, args, verdicts: Verdicts) -> None:
    """Two consumers, one per partition of ``topic`` (filled directly first), each partition held to the quota."""
    need = int(args.quota * (args.duration + SPAN_S) * 2 * 1.6)  # two partitions, the filler's spread uneven
    print(f"filling {topic} with {need / 1e6:.0f} MB for the consumers ...", flush=True)
    fill(node.direct, topic, need, VALUE, 1_000_000)
    bootstrap = f"127.0.0.1:{node.proxy_port}"
    readers = [Series(), Series()]
    load0 = load()
    t0 = run(
        lambda stop: [
            threaded(partitions_consume, bootstrap, topic, f"reader-{i}", [i], stop, s) for i, s in enumerate(readers)
        ],
        args.duration,
    )
    errors = [s.error for s in readers if s.error is not None]
    print(f"consume x2, one consumer per partition (load {load0}-{load()}):")
    for partition, series in enumerate(readers):
        seconds = seconds_of([series], t0, args.duration)
        rate, mean = steady_rate(seconds, args.quota)
        print(f"  partition {partition}: {rate:.3f} x its quota (mean {mean:.3f})")
        verdicts.check(
            f"consume partition {partition} rate in band",
            BAND[0] <= rate <= BAND[1] and not errors,
            f"{rate:.3f} x {errors[:1]}",
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=int, default=60, help="seconds per phase (default 60)")
    parser.add_argument("--quota", type=int, default=2 * 1024 * 1024, help="each partition's byte rate, B/s")
    parser.add_argument("--producers", default="1,2", help="producers per hot partition, one phase each")
    parser.add_argument("--cold", type=int, default=0, help="the cold partition's paced rate (default quota / 4)")
    parser.add_argument("--smoothing", choices=("on", "off"), default="off", help="the proxy's quota.smoothing")
    args = parser.parse_args()
    if args.duration <= SPAN_S + 5:
        parser.error(f"--duration must be more than {SPAN_S + 5} s (the first window span is left out)")
    args.cold = args.cold or args.quota // 4
    counts = [int(n) for n in args.producers.split(",")]
    verdicts = Verdicts()
    cluster = KafkaCluster(1, "anchors-partition").start()
    node = cluster.nodes[0]
    topics = [f"spread-x{n}" for n in counts]
    quotas: list[dict] = [
        {"entity": {"topic": name, "partition": "<default>"}, "producer_byte_rate": args.quota} for name in topics
    ]
    quotas.append({"entity": {"topic": "spread-read", "partition": "<default>"}, "consumer_byte_rate": args.quota})
    proxy = ProxyProcess(node.proxy_port, f"127.0.0.1:{node.client_port}", quotas, {"quota.smoothing": args.smoothing})
    try:
        proxy.start()
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": node.direct})
        new = [NewTopic(name, PARTITIONS, 1) for name in topics] + [NewTopic("spread-read", 2, 1)]
        new += [NewTopic(f"direct-x{n}", 1, 1) for n in counts]
        for done in admin.create_topics(new).values():
            done.result(60)
        for n in counts:
            kafka_client_quota(cluster, f"kafka-x{n}", producer_byte_rate=args.quota)
        print(
            f"Apache Kafka 4.4.0, one node; partition quota {args.quota} B/s (partition: <default>); "
            f"cold partition asks {args.cold} B/s; quota.smoothing {args.smoothing}; load {load()}"
        )
        for n, topic in zip(counts, topics):
            produce_phase(proxy, node, topic, n, args, verdicts)
        consume_phase(proxy, node, "spread-read", args, verdicts)
    finally:
        proxy.stop()
        cluster.stop()
    return verdicts.exit_code()


if __name__ == "__main__":
    sys.exit(main())
