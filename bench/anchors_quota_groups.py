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

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.anchors_common import ProxyProcess, Verdicts, kafka_client_quota, load  # noqa: E402
from bench.anchors_topic_rate import (  # noqa: E402
    PARTITIONS,
    Phase,
    bystander_alone,
    consume_phase,
    phase_arguments,
    produce_phase,
)
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
    args, counts = phase_arguments(__doc__, "each group's byte rate, B/s")
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
        names = ["grouped", "free", "free-alone", "direct", "read"]
        for done in admin.create_topics([NewTopic(name, PARTITIONS, 1) for name in names]).values():
            done.result(60)
        for n in counts:
            kafka_client_quota(cluster, f"kafka-x{n}", producer_byte_rate=args.quota)
        print(
            f"Apache Kafka 4.4.0, one node; group quota {args.quota} B/s, {PARTITIONS} partitions; "
            f"quota.smoothing {args.smoothing}; load {load()}"
        )
        alone_rate = bystander_alone(bootstrap, args.bystander)
        print(f"bystander alone through the proxy: {alone_rate / args.bystander:.2f} x the {args.bystander} B/s asked")

        for n in counts:
            ids = [f"job-x{n}-{i}" for i in range(n)]
            phase = Phase("grouped", ids, "free", "bystander", "direct", "group", "outside the group")
            produce_phase(proxy, node, phase, args, alone_rate, verdicts)

        consume_phase(proxy, node, "read", args.quota, args.duration, "group", verdicts)
    finally:
        proxy.stop()
        cluster.stop()
    return verdicts.exit_code()


if __name__ == "__main__":
    sys.exit(main())
