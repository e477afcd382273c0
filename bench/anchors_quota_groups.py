"""Quota groups (``{quota-group: NAME}`` entries) held against their target, in one run.

Apache Kafka has no quota shared by several client ids or users (KIP-257 is a proposal; Redpanda's
``client-id-prefix`` entities are the nearest), so the anchor is the nearest Kafka has: several producers sharing
one client id, held by Kafka's own ``producer_byte_rate`` (kafka-configs) of the same value, directly on the broker.
One Apache Kafka 4.4.0 broker (tests/kafka_cluster.py) behind a sidecar proxy (its own process), Kafka's default
windows (11 x 1 s, ``quota.smoothing`` off unless ``--smoothing on``). Phases, each ``--duration`` seconds:

- ``produce xN`` for each N of ``--producers``: N librdkafka producers at their default settings, each with a
  client id of its own under one prefix group (``client-id-prefix: "job-xN-"``, ``producer_byte_rate``
  ``--quota``), flat out with 1000-byte values to a 6-partition topic. Beside them, through the same proxy, a
  bystander outside the group paced at ``--bystander`` B/s must get what it asks for (at least 0.97 x, as alone
  through the proxy before the phases), and N producers of one client id connect to Kafka directly, under Kafka's
  quota: the anchor;
- ``consume x2``: two librdkafka consumers, client ids ``reader-0`` and ``reader-1`` named in a group
  (``client-ids``, ``consumer_byte_rate`` ``--quota``), read three partitions each of a topic filled beforehand.

Achieved / quota is the least-squares slope of the group's cumulative bytes (acknowledged or received, its members
summed; targets: within 0.95-1.05, and no further from 1 than Kafka's own quota is in the same phase plus 0.03)
from the end of the first window span to the end of the phase; the plain mean is printed beside it. The proxy's
CPU seconds per GB moved and the 1-minute load are printed with each phase. Exits 1 on a missed target.

Usage: ``python bench/anchors_quota_groups.py [--duration 60] [--quota 2097152] [--producers 1,2,4]
[--bystander 4194304] [--smoothing off]``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.anchors_byte_rate import SPAN_S, steady_rate  # noqa: E402
from bench.anchors_byte_rate_clients import VALUE, Series, librdkafka_produce, threaded  # noqa: E402
from bench.anchors_common import ProxyProcess, Verdicts, kafka_client_quota, load  # noqa: E402
from bench.anchors_topic_rate import (  # noqa: E402
    BAND,
    BYSTANDER_AT_LEAST,
    PARTITIONS,
    paced_produce,
    partitions_consume,
    run,
    seconds_of,
)
from bench.common import fill  # noqa: E402
from tests.kafka_cluster import KafkaCluster  # noqa: E402


def group_quotas(counts: list[int], quota: int) -> list[dict]:
    """One prefix group per produce phase (a phase's group starts with an empty window), one named group of readers."""
    quotas: list[dict] = [
        {"entity": {"quota-group": f"jobs-x{n}"}, "client-id-prefix": f"job-x{n}-", "producer_byte_rate": quota}
        for n in counts
    ]
    quotas.append(
        {"entity": {"quota-group": "readers"}, "client-ids": ["reader-0", "reader-1"], "consumer_byte_rate": quota}
    )
    return quotas


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=int, default=60, help="seconds per phase (default 60)")
    parser.add_argument("--quota", type=int, default=2 * 1024 * 1024, help="each group's byte rate, B/s")
    parser.add_argument("--producers", default="1,2,4", help="producer counts, one phase each")
    parser.add_argument("--smoothing", choices=("on", "off"), default="off", help="the proxy's quota.smoothing")
    parser.add_argument("--bystander", type=int, default=4 * 1024 * 1024, help="the bystander's paced rate, B/s")
    args = parser.parse_args()
    if args.duration <= SPAN_S + 5:
        parser.error(f"--duration must be more than {SPAN_S + 5} s (the first window span is left out)")
    counts = [int(n) for n in args.producers.split(",")]
    verdicts = Verdicts()
    cluster = KafkaCluster(1, "anchors-groups").start()
    node = cluster.nodes[0]
    settings = {"quota.smoothing": args.smoothing}
    proxy = ProxyProcess(node.proxy_port, f"127.0.0.1:{node.client_port}", group_quotas(counts, args.quota), settings)
    try:
        proxy.start()
        bootstrap = f"127.0.0.1:{node.proxy_port}"
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": node.direct})
        names = ["grouped", "free", "direct", "read"]
        for done in admin.create_topics([NewTopic(name, PARTITIONS, 1) for name in names]).values():
            done.result(60)
        for n in counts:
            kafka_client_quota(cluster, f"kafka-x{n}", producer_byte_rate=args.quota)
        print(
            f"Apache Kafka 4.4.0, one node; group quota {args.quota} B/s, {PARTITIONS} partitions; "
            f"quota.smoothing {args.smoothing}; load {load()}"
        )
        alone = Series()
        t0 = run(
            lambda stop: [threaded(paced_produce, bootstrap, "free", "bystander", args.bystander, stop, alone)], 11
        )
        alone_rate = sum(seconds_of([alone], t0, 11)[2:]) / 9
        print(f"bystander alone through the proxy: {alone_rate / args.bystander:.2f} x the {args.bystander} B/s asked")

        for n in counts:
            members, direct, bystander = [Series() for _ in range(n)], [Series() for _ in range(n)], Series()
            cpu0, load0 = proxy.cpu(), load()

            def clients(stop, n=n, members=members, direct=direct, bystander=bystander):
                threads = [
                    threaded(librdkafka_produce, bootstrap, "grouped", f"job-x{n}-{i}", stop, members[i])
                    for i in range(n)
                ]
                threads.append(threaded(paced_produce, bootstrap, "free", "bystander", args.bystander, stop, bystander))
                threads += [
                    threaded(librdkafka_produce, node.direct, "direct", f"kafka-x{n}", stop, direct[i])
                    for i in range(n)
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
                f"produce x{n} (load {load0}-{load()}): group {rate:.3f} x its quota (mean {mean:.3f}); "
                f"proxy CPU {cpu / (moved / 1e9):.1f} s/GB; each second {[round(s / args.quota, 2) for s in seconds]}"
            )
            kafka, kafka_mean = steady_rate(seconds_of(direct, t0, args.duration), args.quota)
            print(f"  Kafka's client quota, {n} producers of one client id: {kafka:.3f} x (mean {kafka_mean:.3f})")
            verdicts.check(
                f"produce x{n} group rate in band", BAND[0] <= rate <= BAND[1] and not errors, f"{rate:.3f} x"
            )
            verdicts.check(
                f"produce x{n} group rate beside Kafka's quota",
                abs(rate - 1) <= abs(kafka - 1) + 0.03,
                f"|{rate:.3f} - 1| against Kafka's |{kafka:.3f} - 1| + 0.03",
            )
            verdicts.check(
                f"produce x{n} bystander outside the group",
                by >= BYSTANDER_AT_LEAST * min(alone_rate, args.bystander),
                f"{by / args.bystander:.2f} x asked (alone {alone_rate / args.bystander:.2f} x)",
            )

        need = int(args.quota * (args.duration + SPAN_S) * 1.3)
        print(f"filling read with {need / 1e6:.0f} MB for the consumers ...", flush=True)
        fill(node.direct, "read", need, VALUE, 1_000_000)
        readers = [Series(), Series()]
        cpu0, load0 = proxy.cpu(), load()
        t0 = run(
            lambda stop: [
                threaded(partitions_consume, bootstrap, "read", f"reader-{i}", range(i, PARTITIONS, 2), stop, s)
                for i, s in enumerate(readers)
            ],
            args.duration,
        )
        cpu = proxy.cpu() - cpu0
        seconds = seconds_of(readers, t0, args.duration)
        rate, mean = steady_rate(seconds, args.quota)
        errors = [s.error for s in readers if s.error is not None]
        print(
            f"consume x2 (load {load0}-{load()}): group {rate:.3f} x its quota (mean {mean:.3f}); "
            f"proxy CPU {cpu / max(sum(seconds) / 1e9, 1e-9):.1f} s/GB; each second "
            f"{[round(s / args.quota, 2) for s in seconds]}"
        )
        verdicts.check("consume x2 group rate", BAND[0] <= rate <= BAND[1] and not errors, f"{rate:.3f} x {errors[:1]}")
    finally:
        proxy.stop()
        cluster.stop()
    return verdicts.exit_code()


if __name__ == "__main__":
    sys.exit(main())
