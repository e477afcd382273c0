"""Per-topic byte rates (``{topic: NAME}`` quota entries) held against their target, in one run.

No open-source broker or proxy has a per-topic quota to run beside (KIP-1010 is a proposal), so the anchor here is
the target itself: a topic's total rate within 0.95-1.05 of its quota, whoever moves its bytes. One Apache Kafka
4.4.0 broker (tests/kafka_cluster.py) behind a sidecar proxy (its own process), Kafka's default windows (11 x 1 s,
``quota.smoothing`` off, Kafka's sampled rate, unless ``--smoothing on``). Phases, each ``--duration`` seconds:

- ``produce xN`` for each N of ``--producers``: N librdkafka producers at their default settings, each with a
  client id of its own (a tenant rotating ids to escape: the quota is the topic's), flat out with 1000-byte values
  to one 6-partition topic whose entry sets ``producer_byte_rate`` ``--quota``. Beside them a bystander with the
  first producer's client id writes another topic (no quota) through the same proxy, paced at ``--bystander``
  B/s: it must get what it asks for (at least 0.97 x), as it does alone through the proxy before the phase. At
  the same time, the anchor: N producers sharing one client id connect to Kafka directly, held by Kafka's own
  ``producer_byte_rate`` (kafka-configs) of the same value on their own topic: the nearest Kafka has to one budget
  for several connections;
- ``consume x2``: two librdkafka consumers (client ids of their own, three partitions each) read a topic filled
  beforehand whose entry sets ``consumer_byte_rate`` ``--quota``.

Achieved / quota is the least-squares slope of the topic's cumulative bytes (acknowledged or received, all clients
summed; targets: within 0.95-1.05, and no further from 1 than Kafka's own quota is in the same phase plus 0.03)
from the end of the first window span (11 s: a fresh quota admits about quota x 10 s at first, as Kafka's
client quotas do) to the end of the phase; the plain mean is printed beside it. The proxy's CPU seconds per GB
moved and the 1-minute load are printed with each phase. Exits 1 on a missed target.

Usage: ``python bench/anchors_topic_rate.py [--duration 60] [--quota 2097152] [--producers 1,2,4]
[--bystander 4194304] [--smoothing off]``.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.anchors_byte_rate import SPAN_S, steady_rate  # noqa: E402
from bench.anchors_byte_rate_clients import VALUE, Series, librdkafka_produce, threaded  # noqa: E402
from bench.anchors_common import ProxyProcess, Verdicts, kafka_client_quota, load  # noqa: E402
from bench.common import fill  # noqa: E402
from tests.kafka_cluster import KafkaCluster  # noqa: E402

PARTITIONS = 6
BAND = (0.95, 1.05)
BYSTANDER_AT_LEAST = 0.97


def paced_produce(
    bootstrap: str,
    topic: str,
    cid: str,
    rate: float,
    stop: threading.Event,
    series: Series,
    spread: int = 0,
    tick_s: float = 0.01,
    queued: list | None = None,
) -> None:
    """A librdkafka producer (default settings) asking for ``rate`` B/s of 1000-byte values, sent every ``tick_s``;
    ``spread``: each to the next of that many partitions in turn (as messages of many keys spread), else where the
    producer's partitioner puts it. With ``queued``, appends (epoch seconds, messages in the producer's queue, values
    refused as it was full) each second."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "client.id": cid})
    events = series.events

    def acked(err, msg):
        if err is None:
            events.append((time.monotonic(), len(msg.value())))

    per_tick = max(1, round(rate * tick_s / len(VALUE)))
    where = {}
    next_t = time.monotonic()
    k = 0
    next_sample, refused = next_t + 1, 0
    while not stop.is_set():
        for _ in range(per_tick):
            if spread:
                where["partition"], k = k % spread, k + 1
            try:
                p.produce(topic, VALUE, on_delivery=acked, **where)
            except BufferError:
                refused += 1
                p.poll(0.01)
        next_t += tick_s
        if queued is not None and next_t >= next_sample:
            queued.append((time.time(), len(p), refused))
            next_sample += 1
        while time.monotonic() < next_t:  # poll returns early when a delivery report is served
            p.poll(max(0.0, next_t - time.monotonic()))
    p.flush(10)


def partitions_consume(bootstrap: str, topic: str, cid: str, partitions, stop: threading.Event, series: Series):
    """A librdkafka consumer (default settings) assigned ``partitions`` of ``topic`` from the beginning."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "client.id": cid, "group.id": cid, "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    while not stop.is_set():
        for m in c.consume(1000, 0.2):
            if not m.error():
                series.events.append((time.monotonic(), len(m.value())))
    c.close()


def rate_verdicts(verdicts: Verdicts, what: str, rate: float, kafka: float, errors: list) -> None:
    """A produce rate (x its quota) in BAND with no errors, and no further from 1 than Kafka's own client quota in the
    same seconds (``kafka``) plus 0.03."""
    verdicts.check(f"{what} rate in band", BAND[0] <= rate <= BAND[1] and not errors, f"{rate:.3f} x {errors[:1]}")
    verdicts.check(
        f"{what} rate beside Kafka's quota",
        abs(rate - 1) <= abs(kafka - 1) + 0.03,
        f"|{rate:.3f} - 1| against Kafka's |{kafka:.3f} - 1| + 0.03",
    )


def seconds_of(series: list[Series], t0: float, duration: int) -> list[int]:
    """The bytes of every series together, per second since ``t0``."""
    out = [0] * duration
    for s in series:
        for t, n in s.events:
            i = int(t - t0)
            if 0 <= i < duration:
                out[i] += n
    return out


def run(threads_of, duration: int) -> float:
    """Start the clients (``threads_of(stop)`` returns their threads), wait ``duration``, stop them; returns t0."""
    stop = threading.Event()
    t0 = time.monotonic()
    threads = threads_of(stop)
    time.sleep(max(0.0, t0 + duration - time.monotonic()))
    stop.set()
    for thread in threads:
        thread.join(30)
    return t0


def bystander_alone(bootstrap: str, rate: float) -> float:
    """What the bystander (client id ``tenant-0``) gets alone, paced at ``rate`` B/s to ``free-alone`` for a window
    span (its first two seconds left out), in B/s."""
    alone = Series()
    t0 = run(lambda stop: [threaded(paced_produce, bootstrap, "free-alone", "tenant-0", rate, stop, alone)], SPAN_S)
    return sum(seconds_of([alone], t0, SPAN_S)[2:]) / (SPAN_S - 2)


@dataclass(frozen=True)
class Phase:
    """One ``produce xN`` phase: the members' topic and client ids, the bystander's topic and client id, the topic of
    Kafka's anchor (its producers share client id ``kafka-xN``), what the members share (the topic, a group), and
    where the bystander stands."""

    topic: str
    ids: list[str]
    free: str
    bystander: str
    direct: str
    what: str
    bystander_note: str


def produce_phase(proxy, node, phase: Phase, args, alone_rate: float, verdicts: Verdicts) -> None:
    """N librdkafka producers flat out through the proxy, a paced bystander beside them, and N producers of one
    client id directly on Kafka under its own quota; the members' total against ``args.quota`` and Kafka's."""
    n, bootstrap = len(phase.ids), f"127.0.0.1:{node.proxy_port}"
    members, direct, bystander = [Series() for _ in range(n)], [Series() for _ in range(n)], Series()
    cpu0, load0 = proxy.cpu(), load()

    def clients(stop):
        threads = [
            threaded(librdkafka_produce, bootstrap, phase.topic, cid, stop, series)
            for cid, series in zip(phase.ids, members)
        ]
        threads.append(threaded(paced_produce, bootstrap, phase.free, phase.bystander, args.bystander, stop, bystander))
        threads += [
            threaded(librdkafka_produce, node.direct, phase.direct, f"kafka-x{n}", stop, series) for series in direct
        ]
        return threads

    t0 = run(clients, args.duration)
    cpu = proxy.cpu() - cpu0
    seconds = seconds_of(members, t0, args.duration)
    rate, mean = steady_rate(seconds, args.quota)
    by = sum(seconds_of([bystander], t0, args.duration)[2:]) / (args.duration - 2)
    moved = sum(seconds) + sum(size for _, size in bystander.events)
    errors = [s.error for s in [*members, bystander] if s.error is not None]
    print(
        f"produce x{n} (load {load0}-{load()}): {phase.what} {rate:.3f} x its quota (mean {mean:.3f}); "
        f"proxy CPU {cpu / (moved / 1e9):.1f} s/GB; each second {[round(s / args.quota, 2) for s in seconds]}"
    )
    kafka, kafka_mean = steady_rate(seconds_of(direct, t0, args.duration), args.quota)
    print(f"  Kafka's client quota, {n} producers of one client id: {kafka:.3f} x (mean {kafka_mean:.3f})")
    rate_verdicts(verdicts, f"produce x{n} {phase.what}", rate, kafka, errors)
    verdicts.check(
        f"produce x{n} bystander {phase.bystander_note}",
        by >= BYSTANDER_AT_LEAST * min(alone_rate, args.bystander),
        f"{by / args.bystander:.2f} x asked (alone {alone_rate / args.bystander:.2f} x)",
    )


def consume_phase(proxy, node, topic: str, quota: int, duration: int, what: str, verdicts: Verdicts) -> None:
    """``consume x2``: ``topic`` filled directly, then two librdkafka consumers (``reader-0``, ``reader-1``, three
    partitions each) read it through the proxy for ``duration`` s; ``what`` (the topic, a group) held to ``quota``."""
    need = int(quota * (duration + SPAN_S) * 1.3)
    print(f"filling {topic} with {need / 1e6:.0f} MB for the consumers ...", flush=True)
    fill(node.direct, topic, need, VALUE, 1_000_000)
    bootstrap = f"127.0.0.1:{node.proxy_port}"
    readers = [Series(), Series()]
    cpu0, load0 = proxy.cpu(), load()
    t0 = run(
        lambda stop: [
            threaded(partitions_consume, bootstrap, topic, f"reader-{i}", range(i, PARTITIONS, 2), stop, s)
            for i, s in enumerate(readers)
        ],
        duration,
    )
    cpu = proxy.cpu() - cpu0
    seconds = seconds_of(readers, t0, duration)
    rate, mean = steady_rate(seconds, quota)
    errors = [s.error for s in readers if s.error is not None]
    print(
        f"consume x2 (load {load0}-{load()}): {what} {rate:.3f} x its quota (mean {mean:.3f}); "
        f"proxy CPU {cpu / max(sum(seconds) / 1e9, 1e-9):.1f} s/GB; each second "
        f"{[round(s / quota, 2) for s in seconds]}"
    )
    verdicts.check(f"consume x2 {what} rate", BAND[0] <= rate <= BAND[1] and not errors, f"{rate:.3f} x {errors[:1]}")


def phase_arguments(doc: str, quota_help: str) -> tuple[argparse.Namespace, list[int]]:
    """The command line of a benchmark in phases (this one's, bench/anchors_quota_groups.py's), and its producer
    counts."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--duration", type=int, default=60, help="seconds per phase (default 60)")
    parser.add_argument("--quota", type=int, default=2 * 1024 * 1024, help=quota_help)
    parser.add_argument("--producers", default="1,2,4", help="producer counts, one phase each")
    parser.add_argument("--smoothing", choices=("on", "off"), default="off", help="the proxy's quota.smoothing")
    parser.add_argument("--bystander", type=int, default=4 * 1024 * 1024, help="the bystander's paced rate, B/s")
    args = parser.parse_args()
    if args.duration <= SPAN_S + 5:
        parser.error(f"--duration must be more than {SPAN_S + 5} s (the first window span is left out)")
    return args, [int(n) for n in args.producers.split(",")]


def main() -> int:
    args, counts = phase_arguments(__doc__, "the topics' byte rate, B/s")
    verdicts = Verdicts()
    cluster = KafkaCluster(1, "anchors-topic").start()
    node = cluster.nodes[0]
    capped = [f"capped-x{n}" for n in counts]
    quotas = [{"entity": {"topic": name}, "producer_byte_rate": args.quota} for name in capped]
    quotas.append({"entity": {"topic": "capped-read"}, "consumer_byte_rate": args.quota})
    proxy = ProxyProcess(node.proxy_port, f"127.0.0.1:{node.client_port}", quotas, {"quota.smoothing": args.smoothing})
    try:
        proxy.start()
        bootstrap = f"127.0.0.1:{node.proxy_port}"
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": node.direct})
        new = [NewTopic(name, PARTITIONS, 1) for name in [*capped, "capped-read"]]
        new += [NewTopic(f"free-x{n}", PARTITIONS, 1) for n in counts] + [NewTopic("free-alone", PARTITIONS, 1)]
        new += [NewTopic(f"direct-x{n}", PARTITIONS, 1) for n in counts]
        for done in admin.create_topics(new).values():
            done.result(60)
        for n in counts:
            kafka_client_quota(cluster, f"kafka-x{n}", producer_byte_rate=args.quota)
        print(
            f"Apache Kafka 4.4.0, one node; topic quota {args.quota} B/s, {PARTITIONS} partitions; "
            f"quota.smoothing {args.smoothing}; load {load()}"
        )

        alone_rate = bystander_alone(bootstrap, args.bystander)
        print(f"bystander alone through the proxy: {alone_rate / args.bystander:.2f} x the {args.bystander} B/s asked")

        for n, topic in zip(counts, capped):
            ids = [f"tenant-{i}" for i in range(n)]
            phase = Phase(
                topic, ids, f"free-x{n}", "tenant-0", f"direct-x{n}", "topic", "on another topic, same client id"
            )
            produce_phase(proxy, node, phase, args, alone_rate, verdicts)

        consume_phase(proxy, node, "capped-read", args.quota, args.duration, "topic", verdicts)
    finally:
        proxy.stop()
        cluster.stop()
    return verdicts.exit_code()


if __name__ == "__main__":
    sys.exit(main())
